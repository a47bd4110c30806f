"""One asset of any kind on one path: an image and a clip through the same stage functions, no Prefect."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

import pytest

from tasks.core.records import ready_name
from tasks.core.settings import Settings
from tasks.stages.assets import gather_assets
from tasks.stages.csv import csvs_for_packed
from tasks.stages.describe import describe_stage
from tasks.stages.kinds import ASSET_EXTENSIONS, KINDS, kind_of, pack_described
from tasks.stages.pack import finish_batch
from tasks.stages.run_context import RunContext
from tasks.stores.pending import recorded_uploadable, uploadable

ROOT = Path(__file__).resolve().parents[2]


def test_an_image_and_a_clip_take_the_same_stage_functions(workdir):
    ctx = RunContext(workdir, Settings(), ["adobe", "dreamstime"])
    gathered = gather_assets(ctx, 1, None, clips=1)  # the offline generator: one image, one clip
    image, clip = (a.name for a in gathered.assets)  # the images first, then the clips
    assert (kind_of(image).name, kind_of(clip).name) == ("image", "clip")

    described = describe_stage(ctx, gathered.assets)
    assert sorted(described.described) == sorted([image, clip])

    packed = pack_described(ctx)
    assert packed.ready == {image: workdir.packs / "ready" / ready_name(image), clip: workdir.assets / clip}
    assert all(packed.thumbnails[name].is_file() for name in (image, clip))
    assert packed.about.keys() == {clip}, "a clip's kind tells its facts"
    assert clip in packed.not_taken["dreamstime"], "Dreamstime's video rules keep the clip out"

    csvs = csvs_for_packed(ctx, packed)
    assert csvs.agencies["adobe"].accepted == sorted([image, clip])
    assert csvs.agencies["dreamstime"].accepted == [image]
    assert not [p for p in csvs.problems if p.asset == clip], "a kind's rules are no row problem"

    finished = finish_batch(workdir, packed, csvs)
    sent = uploadable(finished, csvs, ctx.agencies)
    assert [i.name for i in sent["adobe"]] == sorted([ready_name(image), clip])
    assert [i.name for i in sent["dreamstime"]] == [ready_name(image)]
    with zipfile.ZipFile(finished.zip_path) as zf:
        assert not [n for n in zf.namelist() if n.endswith(clip)], "a clip is sent as it is, not zipped"
    assert {a: [i.name for i in items] for a, items in recorded_uploadable(workdir, ctx.agencies).items()} == {
        a: [i.name for i in items] for a, items in sent.items()}, "what the run sends is what the ledger counts"


def test_every_extension_has_one_kind():
    assert set().union(*(k.extensions for k in KINDS)) == ASSET_EXTENSIONS
    assert sum(len(k.extensions) for k in KINDS) == len(ASSET_EXTENSIONS), "no extension in two kinds"
    assert kind_of("a.JPG").name == "image" and kind_of("b.Mov").name == "clip"
    with pytest.raises(ValueError, match="a.gif"):
        kind_of("a.gif")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_flow_and_no_orchestration_module_imports_a_kinds_own_parts():
    """The flows name no kind: a clip's parts (tasks/stages/clips.py) are reached through its kind only."""
    for path in sorted([*(ROOT / "flows").glob("*.py"), *(ROOT / "tasks" / "orchestration").glob("*.py")]):
        assert "tasks.stages.clips" not in _imports(path), path.name


def test_a_run_takes_its_agencies_from_its_context_start_to_end(workdir):
    """The agency catalog is a port of the run's context: an agency spec removed while the run goes on (the
    contributor tidying agencies/) does not change the run that read it — pack, similarity and CSVs use the
    context's catalog, as the assets stage did."""
    import shutil
    from importlib import resources

    workdir.agencies.mkdir(exist_ok=True)
    shutil.copy(resources.files("tasks.agencies") / "vecteezy.toml", workdir.agencies / "mystock.toml")
    ctx = RunContext(workdir, Settings(), ["mystock"])
    assert "mystock" in ctx.catalog.names
    gathered = gather_assets(ctx, 1, None)
    describe_stage(ctx, gathered.assets)
    (workdir.agencies / "mystock.toml").unlink()  # gone mid-run
    packed = pack_described(ctx)
    assert list(packed.ready) == [gathered.assets[0].name]
    assert csvs_for_packed(ctx, packed).agencies["mystock"].accepted == [gathered.assets[0].name]
