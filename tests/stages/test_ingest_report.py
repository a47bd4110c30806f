"""``reports/ingest.json`` on a full disk: the assets stage keeps its assets and says so in one line.

A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where the report is
written (``atomic_write_bytes`` as :mod:`tasks.stages.ingest_report` calls it).
"""

from __future__ import annotations

import errno
import json

from PIL import Image

from tasks.core.files import disk_of
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


def test_a_full_disk_for_the_ingest_report_is_the_stages_one_line_and_the_assets_are_kept(workdir, tmp_path,
                                                                                          monkeypatch):
    src = source_folder(tmp_path)

    def small_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest_report, "atomic_write_bytes", small_disk)
    gathered = gather_assets(RunContext(workdir, Settings()), 0, str(src))
    path = workdir.reports / "ingest.json"
    assert gathered.stopped == (f"disk full: {disk_of(path)} has no room left for {path} (No space left on "
                                "device); the assets stage kept its 2 asset(s), ingest.json not written (the run's "
                                f"log names the 1 rejected file(s)) — free space on {disk_of(path)} and run again")
    assert sorted(a.name for a in gathered.assets) == ["pic0.jpg", "pic1.jpg"] and list(gathered.rejected) == [
        "notes.jpg"]
    assert not path.exists()

    monkeypatch.undo()  # space freed: the next run adds nothing twice and writes the report
    again = gather_assets(RunContext(workdir, Settings()), 0, str(src))
    assert again.stopped is None and again.new == []
    assert [r["file"] for r in json.loads(path.read_text())["rejected"]] == ["notes.jpg"]


def test_an_earlier_stop_of_the_stage_is_kept_as_its_first_reason(workdir, tmp_path, monkeypatch):
    """Ingest already stopped on the full disk: that line stays the stage's reason (the report's is logged)."""
    import tasks.stages.ingest as ingest_stage

    src = source_folder(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest_stage, "atomic_file", full)
    monkeypatch.setattr(ingest_report, "atomic_write_bytes", full)
    gathered = gather_assets(RunContext(workdir, Settings()), 0, str(src))
    assert gathered.stopped.startswith(f"disk full: {disk_of(workdir.assets)} has no room left for {workdir.assets}")
    assert "0 asset(s) added and kept" in gathered.stopped
