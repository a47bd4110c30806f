"""Ingesting a real library's names and non-files: every file becomes its own asset or is named with a reason,
and no name stops the batch (issue 25, point 2). Each test failed before the change it names."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.errors import StageStopped
from tasks.core.files import atomic_write_bytes, name_max
from tasks.core.records import Asset, Metadata, iter_asset_files, ready_name, write_sidecar
from tasks.stages.assets import gather
from tasks.stages.ingest import ingest, settle_asset_names, stem_key


def _photo(path: Path | str, colour) -> Path:
    Image.new("RGB", (2000, 1600), colour).save(path, "PNG" if str(path).lower().endswith(".png") else "JPEG",
                                                quality=85)
    return Path(path)


@pytest.fixture
def folders(tmp_path):
    src, assets = tmp_path / "src", tmp_path / "assets"
    src.mkdir(), assets.mkdir()
    return src, assets


def test_atomic_file_writes_a_name_at_the_disks_limit(tmp_path):
    """Regression: the temp name added ~14 bytes, so a legal 250-byte name raised ENAMETOOLONG."""
    limit = name_max(tmp_path)
    target = tmp_path / ("x" * (limit - 4) + ".jpg")
    atomic_write_bytes(target, b"whole")
    assert target.read_bytes() == b"whole" and os.listdir(tmp_path) == [target.name]


def test_a_long_name_is_ingested_and_its_sidecar_fits(folders):
    src, assets = folders
    limit = name_max(src)
    near = _photo(src / ("near" + "n" * (limit - 12) + ".jpg"), "red")  # limit - 4: its own name, sidecar fits
    full = _photo(src / ("full" + "f" * (limit - 8) + ".jpg"), "blue")  # at the limit: <stem>.json would not
    report = ingest(src, assets)
    assert sorted(a.name for a in report.added)[1] == near.name and report.rejected == {}
    [renamed] = report.renamed.values()
    assert len(renamed.encode()) + 1 <= limit and renamed.startswith("full") and list(report.renamed) == [full.name]
    for asset in report.added:
        atomic_write_bytes(assets / (Path(asset.name).stem + ".json"), b"{}")  # the sidecar can be written


def test_twins_by_extension_and_by_case_are_each_their_own_asset(folders):
    """Regression: twin.jpg and twin.png shared assets/twin.json and packs/ready/twin.jpg."""
    src, assets = folders
    _photo(src / "twin.jpg", "red")
    _photo(src / "twin.png", "green")
    _photo(src / "Sea.jpg", "navy")
    _photo(src / "sea.jpg", "teal")
    report = ingest(src, assets)
    names = [a.name for a in report.added]
    assert len(names) == 4 and report.rejected == {}
    assert len({stem_key(n) for n in names}) == 4 and len({ready_name(n).casefold() for n in names}) == 4
    assert {"twin.jpg", "Sea.jpg"} <= set(names)  # the first by name keeps its own name
    again = ingest(src, assets)  # a re-run adds nothing and names nothing
    assert again.added == [] and again.duplicates == {} and len(again.already) == 4


def test_twins_already_in_an_old_workdir_are_kept_apart_the_described_one_keeps_its_name(folders):
    _, assets = folders
    _photo(assets / "twin.jpg", "red")
    _photo(assets / "twin.png", "green")
    png = Asset(name="twin.png", asset_id="0" * 64, path=assets / "twin.png")
    write_sidecar(assets / "twin.json", png, Metadata(title="t", description="d"))  # an old sidecar: the PNG's
    renamed = settle_asset_names(assets)
    assert list(renamed) == ["twin.jpg"] and renamed["twin.jpg"].startswith("twin_")  # the PNG keeps its name
    assert sorted(p.name for p in iter_asset_files(assets)) == sorted([renamed["twin.jpg"], "twin.png"])
    assert settle_asset_names(assets) == {}


def test_a_name_that_is_not_utf8_already_in_an_old_workdir_is_renamed_once(folders):
    """Regression: such an asset stayed pending forever, with tracebacks at every run."""
    _, assets = folders
    _photo(assets / os.fsdecode(b"caf\xe9.jpg"), "brown")
    assert settle_asset_names(assets) == {"caf\\xe9.jpg": "café.jpg"}
    assert [p.name for p in iter_asset_files(assets)] == ["café.jpg"]


def test_a_decomposed_name_is_matched_in_nfc_and_an_undecodable_one_renamed_as_said(folders):
    src, assets = folders
    nfd = unicodedata.normalize("NFD", "café_crème.jpg")
    _photo(src / nfd, "brown")
    latin1 = os.fsdecode("pr\xe8s de la mer.jpg".encode("latin-1"))  # not UTF-8: an old tool's name
    _photo(src / latin1, "blue")
    report = ingest(src, assets)
    assert sorted(a.name for a in report.added) == ["café_crème.jpg", "près de la mer.jpg"]
    assert report.renamed == {nfd: "café_crème.jpg", "pr\\xe8s de la mer.jpg": "près de la mer.jpg"}
    assert (src / nfd).exists() and (src / latin1).exists()  # the originals are never touched
    assert ingest(src, assets).added == []


def test_a_decomposed_name_in_an_old_workdir_gets_its_row():
    """Regression: the NFD name was held back for every agency as having "control characters"."""
    from tasks.agencies.rows import build_row
    from tasks.agencies.spec import load_spec
    from tasks.core.records import Metadata

    meta = Metadata(title="Coffee cup on a table", description="A cup of coffee on a wooden table",
                    keywords=["coffee", "cup", "table", "wood", "drink", "morning", "cafe", "hot", "mug", "brown"],
                    category_hints=["food"], adobe_category=7)
    row = build_row(load_spec("adobe"), meta, unicodedata.normalize("NFD", "café.jpg"))
    assert not [p for p in row.problems if p.rule == "filename.unsafe"]


def test_links_folders_fifos_and_duplicates_are_named_with_their_reason(folders, tmp_path):
    src, assets = folders
    good = _photo(src / "good.jpg", "green")
    _photo(src / "good_copy.jpg", "green")  # the same picture again
    (src / "album.jpg").mkdir()
    (src / "plain folder").mkdir()  # not named: no file of the batch
    os.symlink(tmp_path, src / "to-a-folder")
    os.symlink(src / "gone.jpg", src / "dangling.jpg")
    os.symlink(src / "loop.jpg", src / "loop.jpg")
    os.mkfifo(src / "pipe.jpg")
    os.symlink(good, src / "link to good.jpg")  # a link to a picture is that picture
    got = gather(assets, 0, src, [], 0, None, lambda assets: {})
    assert [a.name for a in got.assets] == ["good.jpg"]
    reasons = got.rejected
    assert set(reasons) == {"good_copy.jpg", "album.jpg", "to-a-folder", "dangling.jpg", "loop.jpg", "pipe.jpg",
                            "link to good.jpg"}, reasons
    assert "same picture as good.jpg" in reasons["good_copy.jpg"] and "folder" in reasons["album.jpg"]
    assert "link to a folder" in reasons["to-a-folder"] and "to nothing" in reasons["dangling.jpg"]
    assert "loops" in reasons["loop.jpg"] and "FIFO" in reasons["pipe.jpg"]
    assert "same picture as good.jpg" in reasons["link to good.jpg"]


def test_an_unexpected_error_with_one_file_rejects_that_file_only(folders, monkeypatch):
    from tasks.stages import ingest as stage

    src, assets = folders
    _photo(src / "a.jpg", "red")
    _photo(src / "b.jpg", "blue")
    real = stage.inspect_image

    def flaky(path):
        if path.name == "a.jpg":
            raise RuntimeError("decoder fell over")
        return real(path)

    monkeypatch.setattr(stage, "inspect_image", flaky)
    report = ingest(src, assets)
    assert [a.name for a in report.added] == ["b.jpg"]
    assert "RuntimeError: decoder fell over" in report.rejected["a.jpg"]


def test_an_asset_that_cannot_be_read_is_named_and_the_others_go_on(folders, monkeypatch):
    """Regression: hashing every asset raised for one unreadable file and the whole run failed."""
    from tasks.stages import assets as stage

    _, assets = folders
    _photo(assets / "fine.jpg", "red")
    _photo(assets / "locked.jpg", "blue")
    real = stage.sha256_file

    def hashing(path):
        if path.name == "locked.jpg":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(stage, "sha256_file", hashing)
    got = gather(assets, 0, None, [], 0, None, lambda assets: {})
    assert [a.name for a in got.assets] == ["fine.jpg"]
    assert "Permission denied" in got.rejected["locked.jpg"]


def test_a_name_with_an_escape_sequence_and_a_newline_is_printed_escaped(folders):
    """A source file's name is untrusted: the OSC title sequence, the screen clear, CR, LF and a bidi override
    in it reach neither the terminal tables, the logs' names nor the UI's markdown raw — written out as ``\\x1b``."""
    from rich.console import Console

    from tasks.core.reports import CsvReport, DescribeReport, PackReport
    from tasks.core.workdir import Workdir
    from tasks.observe.batch_assets import asset_rows
    from tasks.observe.markdown import summary_markdown
    from tasks.observe.summary import BatchSummary
    from tasks.observe.terminal import summary_table

    src, assets = folders
    evil = "\x1b]0;PWNED\x07sea\nview\u202egpj.jpg"
    Image.new("RGB", (1600, 1250), "blue").save(src / evil, "JPEG")  # 2 MP: the smallest an agency takes
    (src / "\x1b[2Jbroken\r.jpg").write_bytes(b"not a picture")
    got = gather(assets, 0, src, [], 0, None, lambda assets: {})
    assert [a.name for a in got.assets] == [evil]  # the file keeps its name on disk: only printing escapes it
    s = BatchSummary.from_stages(Workdir(assets.parent), got, DescribeReport(), CsvReport(), PackReport(), {})
    console = Console(record=True, width=400)
    console.print(summary_table(s))
    shown = {"terminal": console.export_text(), "markdown": summary_markdown(s),
             "batch-assets": repr([row["asset"] for row in asset_rows(got, DescribeReport(), CsvReport(),
                                                                       PackReport(), {}, [])])}
    for where, text in shown.items():
        assert "\x1b" not in text and "\r" not in text and "\u202e" not in text, where
    assert "\\x1b[2Jbroken\\x0d.jpg" in shown["terminal"]
    assert "\\\\x1b\\[2Jbroken\\\\x0d.jpg" in shown["markdown"]  # the backslash and the [ escaped for markdown
    assert "\\\\x1b]0;PWNED\\\\x07sea\\\\x0aview\\\\u202egpj.jpg" in shown["batch-assets"]


def test_two_runs_ingesting_the_same_source_at_once_make_each_asset_once(folders):
    """Two runs of ``run --source SRC`` on one workdir (threads here: the lock is a per-file ``flock``, which
    two threads' opens contend for as two processes' do): the second waits for the first and finds its assets,
    so no identical bytes become a ``<stem>_<8 hex>`` twin and nothing is new twice."""
    import threading

    src, assets = folders
    names = [f"pic{i}.jpg" for i in range(6)]
    for i, name in enumerate(names):
        Image.new("RGB", (1600, 1250), (40 * i, 90, 200)).save(src / name, "JPEG")
    start, results = threading.Barrier(2), []

    def one_run():
        start.wait()
        results.append(gather(assets, 0, src, [], 0, None, lambda assets: {}))

    runs = [threading.Thread(target=one_run) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    assert sorted(p.name for p in iter_asset_files(assets)) == names
    assert sorted(len(r.new) for r in results) == [0, 6]  # each asset new in exactly one of the runs
    assert all(r.rejected == {} for r in results)


def test_a_full_disk_stops_ingest_with_one_line_and_the_rerun_adds_the_rest_once(folders, monkeypatch):
    """A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where ingest
    writes (``atomic_file``, the copy into ``assets/``) from the third file on."""
    import errno
    from contextlib import contextmanager

    import tasks.stages.ingest as ingest_stage
    from tasks.core.files import disk_of

    src, assets = folders
    names = [f"pic{i}.jpg" for i in range(4)]
    for i, name in enumerate(names):
        Image.new("RGB", (1600, 1250), (60 * i, 90, 200)).save(src / name, "JPEG")
    real, copied = ingest_stage.atomic_file, []

    @contextmanager
    def small_disk(path):
        if len(copied) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        with real(path) as fh:
            yield fh
        copied.append(path.name)

    monkeypatch.setattr(ingest_stage, "atomic_file", small_disk)
    with pytest.raises(StageStopped) as stop:  # the run stops here, as it does at pack: nothing is described
        gather(assets, 0, src, [], 0, None, lambda assets: {})
    assert stop.value.kind == "disk_full"
    assert stop.value.message == (f"disk full: {disk_of(assets)} has no room left for {assets} (No space left on "
                                  f"device); 2 asset(s) added and kept, 2 file(s) left for the next run — free space "
                                  f"on {disk_of(assets)} and run again")
    assert [p.name for p in iter_asset_files(assets)] == names[:2]
    monkeypatch.setattr(ingest_stage, "atomic_file", real)  # space freed
    again = gather(assets, 0, src, [], 0, None, lambda assets: {})
    assert again.stopped is None and again.new == names[2:]
    assert sorted(p.name for p in iter_asset_files(assets)) == names  # each once, no twin
