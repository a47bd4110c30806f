"""A full disk while describe writes a sidecar: the answer could not be kept, which is not the asset's failure.

A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where the sidecar is
written (``atomic_write_bytes`` as :func:`tasks.core.records.write_sidecar` calls it), after the first sidecar.
The stage stops with one line naming the disk, nothing is parked, the asset whose answer was lost and the ones
not yet described stay pending, and the run after space is freed describes each of them exactly once.
"""

from __future__ import annotations

import errno

from tasks.core import records
from tasks.core.files import atomic_write_bytes, disk_of
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stages.describe import DescribeWith, describe_stage
from tasks.stages.offline_describer import OfflineDescriber
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fake_gemini is a fixture)
from tests.stages import test_describe
from tests.stages.test_describe import fast_settings, make_assets

NAMES = ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]


class Counting(OfflineDescriber):
    """The offline describer, counting its calls per asset."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def describe(self, asset):
        self.calls[asset.name] = self.calls.get(asset.name, 0) + 1
        return super().describe(asset)


def fill_disk_after(monkeypatch, room: int) -> list[str]:
    """Sidecar writes fail with ENOSPC once ``room`` of them succeeded; the names of the ones written."""
    real_write, written = records.atomic_write_bytes, []

    def small_disk(path, data):
        if len(written) == room:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data)
        written.append(path.name)

    monkeypatch.setattr(records, "atomic_write_bytes", small_disk)
    return written


def test_a_full_disk_stops_describe_with_one_line_parks_nothing_and_the_rerun_describes_each_once(
        tmp_path, monkeypatch):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, NAMES)
    describer = Counting()
    fill_disk_after(monkeypatch, room=1)
    report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets, DescribeWith(describer=describer))

    line = report.stopped
    assert line is not None and "\n" not in line
    disk = disk_of(wd.assets)
    assert line.startswith(f"disk full: {disk} has no room left for {wd.sidecar('b.jpg')}")
    assert "the describe answer for b.jpg could not be kept (offline)" in line
    assert line.endswith(f"free space on {disk} and run again")
    assert report.described == ["a.jpg"] and report.parked == {}
    assert sorted(report.pending) == ["b.jpg", "c.jpg", "d.jpg"]
    assert open_store(wd, Settings()).list() == [], "a full disk parks nothing"
    assert describer.calls == {"a.jpg": 1, "b.jpg": 1}, "no call after the stage stopped"

    monkeypatch.undo()  # space freed
    again = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets, DescribeWith(describer=describer))
    assert again.stopped is None and again.already == ["a.jpg"]
    assert again.described == ["b.jpg", "c.jpg", "d.jpg"]
    assert describer.calls == {"a.jpg": 1, "b.jpg": 2, "c.jpg": 1, "d.jpg": 1}, "b.jpg's lost answer asked again once"
    assert all(records.read_sidecar(wd.sidecar(n)) is not None for n in NAMES)


def test_a_disk_error_that_is_not_full_is_still_the_assets_own(tmp_path, monkeypatch):
    """Only ENOSPC/EDQUOT stop the stage: another write error (here EIO) parks that one job, as before."""
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, NAMES[:2])

    def broken(path, data):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(records, "atomic_write_bytes", broken)
    report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets,
                            DescribeWith(describer=OfflineDescriber()))
    assert report.stopped is None
    assert report.parked == {"a.jpg": "unknown:OSError", "b.jpg": "unknown:OSError"}


def test_in_batch_mode_a_full_disk_keeps_the_job_so_the_rerun_collects_its_answers_again(
        fake_gemini, tmp_path, monkeypatch):  # noqa: F811
    """Batch answers stay with the Gemini job: the collect that could not write a sidecar stops with the line,
    the job's record stays live, and the next run collects the rest from the same job (no second job, nothing
    parked, nothing paid twice)."""
    from tests.stages import test_batch_describe as batch

    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setattr(test_describe, "COLOURS", batch.COLOURS)
    wd = Workdir(tmp_path / "w").prepare()
    assets = batch.make_assets(wd, NAMES[:3])
    fake_gemini.batch.finish_after_s = 0
    submitted = describe_stage(RunContext(wd, batch.batch_settings()), assets)
    assert sorted(submitted.in_batch) == NAMES[:3]

    fill_disk_after(monkeypatch, room=1)
    stopped = describe_stage(RunContext(wd, batch.batch_settings()), assets)
    assert stopped.stopped.startswith(f"disk full: {disk_of(wd.assets)} has no room left for"), stopped.stopped
    assert stopped.parked == {} and open_store(wd, Settings()).list() == []
    described_first = [n for n in NAMES[:3] if wd.sidecar(n).exists()]
    assert len(described_first) == 1

    monkeypatch.setattr(records, "atomic_write_bytes", atomic_write_bytes)  # space freed
    again = describe_stage(RunContext(wd, batch.batch_settings()), assets)
    assert again.stopped is None and again.parked == {}
    assert all(wd.sidecar(n).exists() for n in NAMES[:3])
    assert fake_gemini.batch.created == 1, "the answers came from the first job: none submitted again"


def test_a_sidecar_lock_that_cannot_be_opened_stops_describe_with_one_line_and_parks_nothing(
        tmp_path):
    """Every sidecar is written under ``assets/.sidecars.lock``: a folder in its place (or no room to create it)
    means no answer can be kept, so the stage stops at the first one, nothing parked, every asset pending."""
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, NAMES)
    (wd.assets / records.SIDECARS_LOCK).mkdir()
    describer = Counting()
    report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets, DescribeWith(describer=describer))
    assert report.stopped.startswith(f"{wd.assets / records.SIDECARS_LOCK}: cannot open the lock for changing a "
                                     "sidecar (Is a directory); the describe answer for a.jpg could not be kept")
    assert "\n" not in report.stopped
    assert report.described == [] and report.parked == {} and sorted(report.pending) == NAMES
    assert describer.calls == {"a.jpg": 1} and open_store(wd, Settings()).list() == []
