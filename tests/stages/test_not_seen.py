"""No thin metadata leaves (issue 52): an own photo or clip whose words would come from nothing but its file name
(the offline describer, nothing embedded, no demo prompt) goes to no agency, and the run says why and the way on.
Plain stage functions, no Prefect."""

from __future__ import annotations

from pathlib import Path

from flows.run_outcome import exit_code, state_name
from tasks.core.reports import NOT_SEEN, NOT_SEEN_WHY, Gathered
from tasks.core.settings import Settings
from tasks.observe.summary import BatchSummary
from tasks.stages.assets import gather_assets
from tasks.stages.csv import csvs_for_packed
from tasks.stages.describe import describe_stage
from tasks.stages.kinds import pack_described
from tasks.stages.pack import finish_batch
from tasks.stages.review import Correction, edit_asset
from tasks.stages.run_context import RunContext
from tasks.stores.pending import uploadable
from tests.fakes.clips import make_clip
from tests.fakes.photo_library import jpeg, xmp_segment

AGENCIES = ["adobe", "dreamstime", "vecteezy"]
TAGGED = dict(title="Old lighthouse at dusk", description="A white lighthouse on a rocky coast at dusk",
              keywords=("lighthouse", "coast", "dusk", "sea", "rocks", "beacon", "maritime", "travel"))


def _own_files(folder: Path) -> Path:
    """Four own files as a new contributor has them: two photos and a clip with nothing but their names, one photo
    whose embedded XMP a person wrote."""
    folder.mkdir()
    (folder / "lake_sunset.jpg").write_bytes(jpeg(1))
    (folder / "mountain-hut.jpg").write_bytes(jpeg(2))
    (folder / "lighthouse.jpg").write_bytes(jpeg(3, xmp_segment(**TAGGED)))
    make_clip(folder / "harbour_boats.mov", 1920, 1080, seconds=6)
    return folder


def _run(ctx: RunContext, gathered: Gathered):
    described = describe_stage(ctx, gathered.assets)
    packed = pack_described(ctx)
    csvs = csvs_for_packed(ctx, packed)
    finished = finish_batch(ctx.wd, packed, csvs)
    return described, finished, csvs


def test_own_files_with_nothing_but_their_names_go_to_no_agency_and_the_run_ends_incomplete(workdir, tmp_path):
    ctx = RunContext(workdir, Settings(), AGENCIES)
    gathered = gather_assets(ctx, 0, str(_own_files(tmp_path / "own")))
    described, packed, csvs = _run(ctx, gathered)
    unseen = ["harbour_boats.mov", "lake_sunset.jpg", "mountain-hut.jpg"]

    assert sorted(packed.not_seen) == unseen
    sent = uploadable(packed, csvs, ctx.agencies)
    for agency in AGENCIES:
        assert not set(unseen) & set(csvs.agencies[agency].accepted), agency
        assert not [i for i in sent.get(agency, []) if Path(i.name).stem in {Path(u).stem for u in unseen}], agency
        assert {n: packed.held_back[agency][n] for n in unseen} == dict.fromkeys(unseen, NOT_SEEN_WHY), agency
        assert {p.asset for p in csvs.problems if p.agency == agency and p.rule == NOT_SEEN} == set(unseen)
    assert "lighthouse.jpg" in csvs.agencies["adobe"].accepted, "what a person embedded is passed on"
    assert (workdir.csv / "adobe.csv").read_text(encoding="utf-8").count("\n") == 2, "header and the lighthouse"

    summary = BatchSummary.from_stages(workdir, gathered, described, csvs, packed, {})
    assert summary.not_seen == unseen
    assert state_name(summary) == "Incomplete"
    assert exit_code(summary) == 3
    assert "3 held back everywhere: no describer saw it" in summary.headline()
    assert "microstock review edit" in summary.headline() and "OpenAI-compatible endpoint" in summary.headline()
    assert "held back: " not in summary.headline(), "counted once, as held back everywhere"


def test_a_title_and_keywords_written_with_review_edit_let_the_photo_go(workdir, tmp_path):
    ctx = RunContext(workdir, Settings(), ["adobe"])
    source = tmp_path / "own"
    source.mkdir()
    (source / "lake_sunset.jpg").write_bytes(jpeg(1))
    gathered = gather_assets(ctx, 0, str(source))
    _run(ctx, gathered)

    edit_asset(workdir, ctx.settings, ["adobe"], Correction(
        file="lake_sunset.jpg", title="Calm mountain lake at sunset",
        keywords=["lake", "sunset", "mountain", "calm", "water", "reflection", "evening", "nature"]))
    described, packed, csvs = _run(ctx, gathered)
    assert packed.not_seen == {}
    assert csvs.agencies["adobe"].accepted == ["lake_sunset.jpg"]
    summary = BatchSummary.from_stages(workdir, gathered, described, csvs, packed, {})
    assert exit_code(summary) == 0 and state_name(summary) == "Completed"


def test_a_generated_demo_image_keeps_going_offline(workdir):
    ctx = RunContext(workdir, Settings(), ["adobe"])
    gathered = gather_assets(ctx, 1, None)  # the offline generator: its prompt is what a person wrote
    described, packed, csvs = _run(ctx, gathered)
    assert packed.not_seen == {}
    assert csvs.agencies["adobe"].accepted == [gathered.assets[0].name]
    assert exit_code(BatchSummary.from_stages(workdir, gathered, described, csvs, packed, {})) == 0
