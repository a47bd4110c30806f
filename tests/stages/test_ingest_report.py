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
