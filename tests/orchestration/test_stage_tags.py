"""Tags on stage task runs never fail the run: a refused tag slot runs the stage untagged, once.

A busy Prefect server answering the tags' concurrency-slot request with 503
cannot be made on demand, so Prefect's slot request is replaced by one that
refuses (only when there are tags, as the real one is only made then).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError

from tasks.orchestration.stage_tags import tags_never_fail

ran: list[str] = []


@tags_never_fail
@task(name="stage-under-test", tags=["stage:test"], cache_policy=NO_CACHE)
def stage(label: str) -> str:
    ran.append(label)
    return f"done {label}"


@flow(name="stage-tags-test")
def recipe() -> tuple[str, str]:
    direct = stage("direct")
    submitted = stage.with_options(tags=["stage:test", "agency:adobe"]).submit("submitted").result()
    return direct, submitted


@pytest.fixture
def refused_slots(monkeypatch):
    asked: list[list[str]] = []

    @contextmanager
    def refusing(names, **kwargs):
        if names:
            asked.append(list(names))
            raise ConcurrencySlotAcquisitionError(f"Unable to acquire concurrency slots on {names}: 503 Service Unavailable")
        yield

    monkeypatch.setattr("prefect.task_engine._concurrency", refusing)
    return asked


def test_a_refused_tag_slot_runs_the_stage_untagged_once_and_the_flow_completes(prefect_harness, refused_slots, caplog):
    ran.clear()
    state = recipe(return_state=True)
    assert state.is_completed(), state.message
    direct, submitted = state.result()
    assert (direct, submitted) == ("done direct", "done submitted")
    assert ran == ["direct", "submitted"]  # each body ran exactly once: the refused attempt never started it
    assert [set(names) for names in refused_slots] == [{"tag:stage:test"}, {"tag:stage:test", "tag:agency:adobe"}]
    warnings = [r.getMessage() for r in caplog.records if "running it untagged" in r.getMessage()]
    assert len(warnings) == 2 and "stage:test" in warnings[0] and "agency:adobe" in warnings[1]
    # Prefect's record: each refused attempt is a tagged run left Pending, each rerun an untagged Completed one
    runs = recorded_runs(state.state_details.flow_run_id, finished=2)
    assert sorted((state_type, bool(tags)) for state_type, tags in runs) == [
        ("COMPLETED", False), ("COMPLETED", False), ("PENDING", True), ("PENDING", True)]


def recorded_runs(flow_run_id, finished: int) -> list[tuple[str, list[str]]]:
    """(state type, tags) of the flow run's task runs, once the server has recorded ``finished`` as Completed."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read():
        async with get_client() as client:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            return [(run.state.type.value if run.state else "", run.tags) for run in runs]

    deadline = time.monotonic() + 30
    while True:
        runs = asyncio.run(read())
        if sum(state == "COMPLETED" for state, _ in runs) >= finished or time.monotonic() > deadline:
            return runs
        time.sleep(0.2)


def test_other_failures_of_a_stage_still_fail_it(prefect_harness):
    @tags_never_fail
    @task(name="broken-stage", tags=["stage:test"], cache_policy=NO_CACHE)
    def broken() -> None:
        raise ValueError("the stage itself failed")

    @flow(name="broken-stage-test")
    def run_broken() -> None:
        broken()

    state = run_broken(return_state=True)
    assert state.is_failed()
    with pytest.raises(ValueError, match="the stage itself failed"):
        state.result()
