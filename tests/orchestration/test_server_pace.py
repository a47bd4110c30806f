"""Back-pressure from Prefect's server: a submit loop never runs ``ahead`` task runs past what is recorded.

The pace's logic runs against a simulated server (deterministic, instant);
the count it asks for is checked against a real Prefect test server.
"""

from __future__ import annotations

import time

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tasks.core.errors import ConfigError
from tasks.orchestration.server_pace import (AHEAD_ENV, DEFAULT_AHEAD, ServerPace, configured_ahead, finished_task_runs,
                                             pace_for_flow_run, task_run_counts, wait_until_recorded)


class SlowServer:
    """Records ``rate`` finished runs per simulated second, never more than were submitted."""

    def __init__(self, rate: float) -> None:
        self.rate, self.t, self.submitted, self.recorded_f = rate, 0.0, 0, 0.0
        self.asked = 0

    def sleep(self, s: float) -> None:
        self.t += s
        self.recorded_f = min(float(self.submitted), self.recorded_f + self.rate * s)

    def recorded(self) -> int:
        self.asked += 1
        return int(self.recorded_f)


def test_the_loop_never_gets_ahead_of_the_server_by_the_bound():
    server = SlowServer(rate=20)
    pace = ServerPace(server.recorded, ahead=50, poll_s=0.5, sleep=server.sleep)
    worst = 0
    for _ in range(2000):
        pace.before_submit(server.submitted)
        worst = max(worst, server.submitted - int(server.recorded_f))
        server.submitted += 1
        server.sleep(0.001)  # submitting takes a little time too
    assert worst < 50
    assert pace.waited_s > 0 and server.t >= (2000 - 50) / 20, "the loop ran faster than the server records"


def test_a_server_that_keeps_up_is_asked_rarely_and_costs_no_wait():
    server = SlowServer(rate=10_000)
    pace = ServerPace(server.recorded, ahead=100, sleep=server.sleep)
    for _ in range(5000):
        pace.before_submit(server.submitted)
        server.submitted += 1
        server.sleep(0.001)
    assert pace.waited_s == 0
    assert server.asked <= 5000 // 100 + 1


def test_a_count_that_never_moves_slows_the_stage_but_never_stops_it():
    slept = []
    pace = ServerPace(lambda: 0, ahead=10, poll_s=1, stall_s=5, sleep=slept.append)
    for submitted in range(40):
        pace.before_submit(submitted)
    assert sum(slept) == 5 * 3  # one stall of 5 s at 10, 20 and 30 submitted runs, then on


@task(name="describe", task_run_name="describe-{i}", cache_policy=NO_CACHE)
def _named(i: int) -> int:
    return i


@task(name="other", cache_policy=NO_CACHE)
def _other() -> None:
    return None


@flow(name="server-pace-test")
def _three_describe_runs_and_one_other() -> str:
    from prefect.context import FlowRunContext

    for f in [_named.submit(i) for i in range(3)] + [_other.submit()]:
        f.wait()
    return str(FlowRunContext.get().flow_run.id)


def test_the_count_asked_for_is_the_flow_runs_finished_runs_of_that_name(prefect_harness):
    flow_run_id = _three_describe_runs_and_one_other()
    recorded = finished_task_runs(flow_run_id, "describe-")
    deadline = time.monotonic() + 60
    while recorded() < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert recorded() == 3


class Clock:
    """Simulated time for ``wait_until_recorded``: sleeping advances it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_waiting_for_the_record_ends_once_every_known_run_is_finished_and_no_new_one_appears():
    clock = Clock()
    # (started and unfinished, finished) as the server records: 10 runs start by t = 3 s, finish by t = 4 s
    def counts():
        t = clock()
        return (min(10, 4 + int(2 * t)) - min(10, int(2.5 * t)), min(10, int(2.5 * t)))

    assert wait_until_recorded(counts, quiet_s=1.5, clock=clock, sleep=clock.sleep)
    assert 4 + 1.5 <= clock() < 4 + 1.5 + 0.5  # not before the last run was recorded and quiet, not much after


def test_waiting_gives_up_at_the_limit_or_on_an_api_error():
    clock = Clock()
    assert not wait_until_recorded(lambda: (1, 4), limit_s=10, clock=clock, sleep=clock.sleep)
    assert 10 <= clock() < 10.5

    def broken():
        raise OSError("server gone")

    assert not wait_until_recorded(broken, clock=Clock(), sleep=Clock().sleep)


def test_the_counts_are_the_flow_runs_unfinished_and_finished_task_runs(prefect_harness):
    flow_run_id = _three_describe_runs_and_one_other()
    assert wait_until_recorded(task_run_counts(flow_run_id), quiet_s=0.5)
    assert task_run_counts(flow_run_id)() == (0, 4)


def test_a_run_that_never_started_does_not_hold_the_wait_up(prefect_harness):
    from prefect.client.orchestration import get_client
    from prefect.states import Pending

    flow_run_id = _three_describe_runs_and_one_other()
    with get_client(sync_client=True) as client:  # a stage whose tag slots were refused: created, never started
        client.create_task_run(_other, flow_run_id=flow_run_id, dynamic_key="never-started", state=Pending())
    assert wait_until_recorded(task_run_counts(flow_run_id), quiet_s=0.5, limit_s=30)
    assert task_run_counts(flow_run_id)() == (0, 4)


@flow(name="server-pace-bound")
def _pace_in_a_flow_run() -> int | None:
    pace = pace_for_flow_run("describe-")
    return None if pace is None else pace.ahead


def test_the_bound_comes_from_the_environment_and_zero_turns_the_pace_off(prefect_harness, monkeypatch):
    monkeypatch.delenv(AHEAD_ENV, raising=False)
    assert _pace_in_a_flow_run() == DEFAULT_AHEAD
    monkeypatch.setenv(AHEAD_ENV, "2000")
    assert _pace_in_a_flow_run() == 2000
    monkeypatch.setenv(AHEAD_ENV, "0")
    assert _pace_in_a_flow_run() is None
    monkeypatch.setenv(AHEAD_ENV, "lots")
    with pytest.raises(ConfigError, match=AHEAD_ENV):
        configured_ahead()
