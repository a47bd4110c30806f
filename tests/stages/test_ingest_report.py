"""``reports/ingest.json`` on a full disk: the assets stage keeps its assets and stops the run with one line.

A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where the report is
written (``atomic_write_bytes`` as :mod:`tasks.stages.ingest_report` calls it).
"""

from __future__ import annotations

import errno
import json

import pytest
from PIL import Image

from tasks.core.errors import StageStopped
from tasks.core.files import disk_of
from tasks.core.records import iter_asset_files
from tasks.core.settings import Settings
from tasks.stages import ingest_report
from tasks.stages.assets import gather_assets
from tasks.stages.run_context import RunContext


def source_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2):
        Image.new("RGB", (2000, 1600), (80 * i, 90, 200)).save(src / f"pic{i}.jpg", "JPEG")
    (src / "notes.jpg").write_bytes(b"not a picture")
    return src


def test_a_full_disk_for_the_ingest_report_stops_the_run_with_one_line_and_the_assets_are_kept(workdir, tmp_path,
                                                                                                monkeypatch, caplog):
    src = source_folder(tmp_path)

    def small_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest_report, "atomic_write_bytes", small_disk)
    with pytest.raises(StageStopped) as stop:
        gather_assets(RunContext(workdir, Settings()), 0, str(src))
    path = workdir.reports / "ingest.json"
    assert stop.value.kind == "disk_full"
    assert stop.value.message == (f"disk full: {disk_of(path)} has no room left for {path} (No space left on "
                                  "device); the assets stage kept its 2 asset(s), ingest.json not written (the run's "
                                  f"log names the 1 rejected file(s)) — free space on {disk_of(path)} and run again")
    assert [p.name for p in iter_asset_files(workdir.assets)] == ["pic0.jpg", "pic1.jpg"]
    assert "rejected notes.jpg: " in caplog.text and not path.exists()

    monkeypatch.undo()  # space freed: the next run adds nothing twice and writes the report
    again = gather_assets(RunContext(workdir, Settings()), 0, str(src))
    assert again.stopped is None and again.new == []
    assert [r["file"] for r in json.loads(path.read_text())["rejected"]] == ["notes.jpg"]


def test_ingest_stopped_by_the_full_disk_stops_the_stage_before_the_report(workdir, tmp_path, monkeypatch):
    """Ingest's own line is the stage's: nothing after it is tried (the last run's report is left as it was)."""
    import tasks.stages.ingest as ingest_stage

    src = source_folder(tmp_path)
    (workdir.reports / "ingest.json").write_text('{"rejected": [], "left_out": []}')

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest_stage, "atomic_file", full)
    with pytest.raises(StageStopped) as stop:
        gather_assets(RunContext(workdir, Settings()), 0, str(src))
    assert stop.value.message.startswith(f"disk full: {disk_of(workdir.assets)} has no room left for "
                                         f"{workdir.assets}")
    assert "0 asset(s) added and kept" in stop.value.message
    assert (workdir.reports / "ingest.json").read_text() == '{"rejected": [], "left_out": []}'


def test_a_run_whose_ingest_meets_a_full_disk_stops_there_in_one_line(prefect_harness, run_microstock, tmp_path,
                                                                       monkeypatch):
    """``microstock run --source`` end to end: the disk fills on the second copy; the run ends with ingest's line
    (exit 1), nothing described; with space freed the re-run adds the other picture once and finishes."""
    import tasks.stages.ingest as ingest_stage

    src, wd = tmp_path / "src", tmp_path / "w"
    src.mkdir()
    for i in range(2):  # 4.8 MP: Adobe Stock takes them (at least 4 MP)
        Image.new("RGB", (2400, 2000), (80 * i, 90, 200)).save(src / f"pic{i}.jpg", "JPEG")
    real, copied = ingest_stage.atomic_file, []

    def small_disk(path):
        if copied:
            raise OSError(errno.ENOSPC, "No space left on device")
        copied.append(path.name)
        return real(path)

    monkeypatch.setattr(ingest_stage, "atomic_file", small_disk)
    result = run_microstock("run", "--source", str(src), "--agency", "adobe", "--workdir", str(wd))
    assert result.exit_code == 1 and "Traceback" not in result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: the run failed: Flow run encountered an exception: StageStopped: disk full: "
                           f"{disk_of(wd)} has no room left for {wd / 'assets'} (No space left on device); 1 asset(s) "
                           "added and kept"), last
    assert [p.name for p in iter_asset_files(wd / "assets")] == ["pic0.jpg"]
    assert not list((wd / "assets").glob("*.json")), "nothing described on the full disk"

    monkeypatch.undo()
    again = run_microstock("run", "--source", str(src), "--agency", "adobe", "--workdir", str(wd))
    assert again.exit_code == 0, again.output[-3000:]
    assert [p.name for p in iter_asset_files(wd / "assets")] == ["pic0.jpg", "pic1.jpg"]
    assert "2 described · 0 parked · 2 uploaded" in again.stdout
