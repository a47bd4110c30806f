"""The CSV stage on a full disk: one line naming the disk, the file and what was written, never a traceback.

A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where the stage writes
(``atomic_write_bytes`` as :mod:`tasks.stages.csv` calls it).
"""

from __future__ import annotations

import errno

import pytest

from tasks.core.errors import StageStopped
from tasks.core.files import disk_of
from tasks.core.settings import Settings
from tasks.stages import csv as csv_stage
from tasks.stages.csv import write_agency_csvs
from tests.stages.test_csv import GOLDEN_ASSETS, describe, parse

AGENCIES = ["adobe", "vecteezy", "dreamstime"]
NAMES = ["a.jpg", "b.jpg", "c.jpg"]


def full_at(monkeypatch, file_name: str) -> None:
    """Writing ``file_name`` fails with ENOSPC; every other write goes through."""
    real_write = csv_stage.atomic_write_bytes

    def small_disk(path, data):
        if path.name == file_name:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(csv_stage, "atomic_write_bytes", small_disk)


@pytest.fixture
def described(workdir):
    for name in NAMES:
        describe(workdir, name, GOLDEN_ASSETS["sunset_sea_000.jpg"], asset_id=name.encode().hex())
    return workdir


@pytest.mark.parametrize(("full", "kept"), [
    ("vecteezy.csv", "the CSVs of adobe written"),
    ("adobe.csv", "no agency's CSVs written"),
    ("validation.json", "the CSVs of adobe, vecteezy, dreamstime written"),
])
def test_a_full_disk_stops_the_csv_stage_with_one_line_and_the_rerun_writes_every_csv(described, monkeypatch,
                                                                                      full, kept):
    wd = described
    full_at(monkeypatch, full)
    with pytest.raises(StageStopped) as stop:
        write_agency_csvs(wd, AGENCIES, Settings())
    line, where = stop.value.message, (wd.reports if full.endswith(".json") else wd.csv) / full
    assert stop.value.kind == "disk_full" and "\n" not in line
    assert line.startswith(f"disk full: {disk_of(where)} has no room left for {where} (No space left on device)")
    assert f"the CSV stage stopped with {kept} (each file whole or not at all)" in line

    monkeypatch.undo()  # space freed
    report = write_agency_csvs(wd, AGENCIES, Settings())
    assert all(len(report.agencies[a].files) == 1 for a in AGENCIES)
    for agency in AGENCIES:
        assert [row[0] for row in parse(wd.csv / f"{agency}.csv")[1:]] == NAMES, agency
    assert (wd.reports / "validation.json").is_file()


def test_a_write_error_that_is_not_a_full_disk_is_not_called_one(described, monkeypatch):
    def broken(path, data):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(csv_stage, "atomic_write_bytes", broken)
    with pytest.raises(StageStopped) as stop:  # a read-only folder: one line too, naming the file, not the disk
        write_agency_csvs(described, AGENCIES, Settings())
    assert stop.value.kind == "unwritable" and "disk full" not in stop.value.message
    assert stop.value.message.startswith(f"{described.csv / 'adobe.csv'} cannot be written (Permission denied): ")
