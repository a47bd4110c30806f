"""The describe stage's task runs (tasks/orchestration/describe_runs.py) in a real Prefect flow run, where they
decide what the plain stage cannot: how a job's task run ends (Parked, failed, Completed) and what the flow makes
of it. The stage's own logic is tested plainly in tests/stages/test_describe*.py."""

from __future__ import annotations

from tasks.core import records
from tasks.core.files import atomic_write_bytes, disk_of
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fake_gemini is a fixture)
from tests.stages.test_describe import describe_flow, fast_settings, make_assets
from tests.stages.test_describe_disk_full import NAMES, fill_disk_after


def test_in_prefect_with_gemini_a_full_disk_leaves_the_paid_answer_pending_not_parked(
        prefect_harness, fake_gemini, tmp_path, monkeypatch):  # noqa: F811
    """The Prefect task runs with the real SDK against the fake Gemini server: the job whose sidecar could not be
    written fails as StageStopped (not Parked), the flow completes, the stage reports the one line."""
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, NAMES[:3])
    fill_disk_after(monkeypatch, room=1)
    state = describe_flow(str(wd.root), fast_settings(concurrency=1), assets, return_state=True)
    assert state.is_completed(), state.message
    report = state.result()
    assert report.stopped.startswith(f"disk full: {disk_of(wd.assets)} has no room left for")
    assert "the describe answer for b.jpg could not be kept (gemini" in report.stopped
    assert report.described == ["a.jpg"] and report.parked == {} and sorted(report.pending) == ["b.jpg", "c.jpg"]
    assert open_store(wd, Settings()).list() == []
    assert len(fake_gemini.requests) == 2, "a.jpg and b.jpg called; c.jpg never"

    monkeypatch.setattr(records, "atomic_write_bytes", atomic_write_bytes)  # space freed
    again = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets)
    assert again.described == ["b.jpg", "c.jpg"] and again.already == ["a.jpg"]
    assert len(fake_gemini.requests) == 4, "each asset left pending described once more, a.jpg not again"
