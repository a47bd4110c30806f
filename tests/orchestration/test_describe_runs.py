"""The describe stage in Prefect (:mod:`tasks.orchestration.describe_runs`): what only Prefect shows — a task run
per asset named for it, the ``on_failure`` hook that parks, the Parked state, the backstop that parks what the hook
could not, the run's logs, and the flow staying Completed with parked jobs.

The stage's own logic, called plainly with the same fake Gemini server and scripts, is
tests/stages/test_describe.py; the flow here runs it :data:`~tasks.orchestration.describe_runs.IN_PREFECT`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow

from tasks.core import records
from tasks.core.files import atomic_write_bytes, disk_of
from tasks.core.reports import DescribeReport
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.orchestration import describe_runs
from tasks.orchestration.describe_runs import describe_assets
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes import prefect_api
from tests.fakes.gemini import FAKE_KEY, error, fake_gemini, finished, gemini_for_module  # noqa: F401  (a fixture)
from tests.stages.test_describe import (  # noqa: F401  (gemini_key is a fixture)
    EXPECTED_PARKED,
    NAMES,
    Script,
    assert_key_nowhere,
    assert_left_pending_then_described,
    assert_parked_as_expected,
    assert_rerun_calls_nothing,
    fast_settings,
    gemini_key,
    make_assets,
    mixed_script,
    stage_lines,
    store_locked_while_doomed_fails,
    workdir_bytes,
)
from tests.stages.test_describe_disk_full import NAMES as DISK_NAMES
from tests.stages.test_describe_disk_full import fill_disk_after


@flow(name="describe-stage-test")
def describe_flow(workdir: str, settings: Settings, assets: list) -> DescribeReport:
    return describe_assets(RunContext(Workdir(Path(workdir)), settings), assets)


def run_describe(wd: Workdir, settings: Settings, assets: list):
    """The stage in a flow run (task runs, hook, Parked states): its final state and report."""
    state = describe_flow(str(wd.root), settings, assets, return_state=True)
    assert state.is_completed(), state.message
    return state, state.result()


def flow_run_logs(state) -> str:
    """The log lines of the flow run that ended in ``state``, one text."""
    return "\n".join(log.message for log in prefect_api.logs(state.state_details.flow_run_id))


@pytest.fixture(scope="module")
def mixed_run(prefect_harness, tmp_path_factory):
    """The stage tests' mixed run (each asset meets a different failure) in a flow run, and a plain run after it;
    shared by the tests below."""
    with gemini_for_module() as (fake, _):
        wd = Workdir(tmp_path_factory.mktemp("mixed")).prepare()
        assets = make_assets(wd, NAMES)
        script = mixed_script(fake)
        state, report = run_describe(wd, fast_settings(), assets)
        calls_after_first = len(fake.requests)
        with stage_lines() as again_lines:
            again = describe_stage(RunContext(wd, fast_settings()), assets)
        yield wd, script, state, report, again, fake, "\n".join(again_lines), calls_after_first


def test_each_failure_class_gets_its_attempts_and_error_class(mixed_run):
    """Parked by the task run's failure hook, with the attempts the job made, as the plain stage parks them."""
    wd, script, state, report, *_ = mixed_run
    assert_parked_as_expected(wd, script, report)
    runs = prefect_api.task_runs_once_finished(state.state_details.flow_run_id, len(NAMES))
    assert {run.name: run.state.name for run in runs} == {
        f"describe-{name}": "Parked" if name in EXPECTED_PARKED else "Completed" for name in NAMES}


def test_nothing_is_lost_and_the_flow_completes(mixed_run):
    wd, _, state, report, *_ = mixed_run
    assert state.is_completed() and state.type.value == "COMPLETED"
    accounted = set(report.described) | set(report.parked) | set(report.pending)
    assert accounted == set(NAMES)
    for name in NAMES:
        assert wd.sidecar(name).exists() == (name in report.described)
    assert report.tokens == 4 * 321


def test_a_rerun_calls_nothing_already_described_or_parked(mixed_run):
    wd, _, _, report, again, fake, _, calls_after_first = mixed_run
    assert_rerun_calls_nothing(wd, report, again, fake, calls_after_first)


def test_the_api_key_appears_nowhere(mixed_run):
    wd, _, state, _, _, fake, again_lines, _ = mixed_run
    logs = flow_run_logs(state) + again_lines
    assert "Parked('exhausted:503 after 3 attempt(s)" in logs, "the logs were read"
    assert_key_nowhere(wd, fake, logs, again_lines)


def test_the_flow_parks_a_failed_job_when_the_hook_could_not(prefect_harness, fake_gemini, gemini_key, tmp_path,
                                                             monkeypatch):
    def broken_hook(task, task_run, state):
        raise RuntimeError("hook failed")

    monkeypatch.setattr(describe_runs.describe_asset, "on_failure_hooks", [broken_hook])
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["a.jpg", "b.jpg"])
    script = Script(fake_gemini, [a.name for a in assets])
    script.set("a.jpg", error(503), error(503), error(503))
    script.set("b.jpg", finished("IMAGE_SAFETY"))
    _, report = run_describe(wd, fast_settings(), assets)
    assert report.parked == {"a.jpg": "exhausted:503", "b.jpg": "blocked:IMAGE_SAFETY"}
    rows = {j.asset_name: (j.error_class, j.attempts) for j in open_store(wd, Settings()).list()}
    assert rows == {"a.jpg": ("exhausted:503", 3), "b.jpg": ("blocked:IMAGE_SAFETY", 1)}


def test_a_locked_store_leaves_the_job_pending_and_the_others_go_on(prefect_harness, fake_gemini, gemini_key, tmp_path,
                                                                    monkeypatch):
    """In a flow run: neither the hook nor the backstop can park the job; it stays pending, the run says why."""
    with store_locked_while_doomed_fails(fake_gemini, tmp_path, monkeypatch) as (wd, assets):
        state, report = run_describe(wd, fast_settings(concurrency=1), assets)
    assert "dead_letter.db" in flow_run_logs(state)
    assert_left_pending_then_described(wd, assets, report)


def test_in_prefect_with_gemini_a_full_disk_leaves_the_paid_answer_pending_not_parked(
        prefect_harness, fake_gemini, tmp_path, monkeypatch):  # noqa: F811
    """The Prefect task runs with the real SDK against the fake Gemini server: the job whose sidecar could not be
    written fails as StageStopped (not Parked), the flow completes, the stage reports the one line."""
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, DISK_NAMES[:3])
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
