"""``microstock run`` end to end on a full disk: the stage that meets it ends the run with its one line (exit 1,
no traceback), and with space freed the re-run finishes the batch. Each stage's own line is tested plainly in
tests/stages (test_ingest_report.py, test_csv_disk_full.py).

A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where the stage writes.
"""

from __future__ import annotations

import errno

import pyexiv2
from PIL import Image

from tasks.core.files import disk_of
from tasks.core.records import iter_asset_files
from tests.stages.test_csv_disk_full import full_at


def test_a_run_whose_ingest_meets_a_full_disk_stops_there_in_one_line(prefect_harness, run_microstock, tmp_path,
                                                                       monkeypatch):
    """``microstock run --source`` end to end: the disk fills on the second copy; the run ends with ingest's line
    (exit 1), nothing described; with space freed the re-run adds the other picture once and finishes."""
    import tasks.stages.ingest as ingest_stage

    src, wd = tmp_path / "src", tmp_path / "w"
    src.mkdir()
    for i in range(2):  # 4.8 MP: Adobe Stock takes them (at least 4 MP); a title its contributor wrote (issue 52)
        Image.new("RGB", (2400, 2000), (80 * i, 90, 200)).save(src / f"pic{i}.jpg", "JPEG")
        with pyexiv2.Image(str(src / f"pic{i}.jpg")) as img:
            img.modify_iptc({"Iptc.Application2.ObjectName": f"Blue study number {i}"})
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


def test_a_run_whose_csv_stage_meets_a_full_disk_says_one_line(prefect_harness, run_microstock, tmp_path,
                                                                monkeypatch):
    """``microstock run`` end to end: the run stops at the CSV stage with the stage's line as its error (Prefect's
    own ERROR lines say it too, without a traceback), exit 1; with space freed the re-run finishes the batch."""
    wd = tmp_path / "w"
    full_at(monkeypatch, "adobe.csv")
    result = run_microstock("run", "--count", "1", "--agency", "adobe", "--workdir", str(wd))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: the run failed: Flow run encountered an exception: StageStopped: disk full: "
                           f"{disk_of(wd)} has no room left for {wd / 'csv' / 'adobe.csv'}"), last
    assert not (wd / "uploads.ledger").exists() or "adobe" not in (wd / "uploads.ledger").read_text()

    monkeypatch.undo()
    again = run_microstock("run", "--agency", "adobe", "--workdir", str(wd))
    assert again.exit_code == 0, again.output[-3000:]
    assert "0 described · 0 parked · 1 uploaded" in again.stdout
