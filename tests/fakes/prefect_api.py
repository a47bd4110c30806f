"""What a Prefect server recorded of one flow run, read back by a test: its task runs, artifacts and logs, and
the waits until the server has caught up with the run.

The session shares one Prefect server (``prefect_harness`` in tests/conftest.py) between every test of a worker,
so each reader takes the flow run the test made and never counts another test's runs. The server records task
runs from events, a little after the flow has returned: :func:`task_runs_once_finished` and :func:`logs` wait
for the record, and return what is there when the wait gives up, for the test's assertion to show.
Prefect is imported inside the functions, after tests/conftest.py has set its environment.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar
from uuid import UUID

T = TypeVar("T")

#: The state types a run ends in.
FINISHED = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})


def wait_until(what: str, check: Callable[[], T], timeout_s: float = 30.0, every_s: float = 0.2) -> T:
    """``check()``'s first truthy value, asked every ``every_s``; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def flow_runs_with(flow_name: str, **parameters: Any) -> list:
    """The runs of the flow named ``flow_name`` whose parameters include ``parameters`` (a test's own workdir,
    say), newest first: how a test finds the run a command made when the command does not say its id."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                     sort=FlowRunSort.EXPECTED_START_TIME_DESC)
    return [run for run in runs if all(run.parameters.get(k) == v for k, v in parameters.items())]


def task_runs(flow_run_id: UUID, name: str | None = None) -> list:
    """The flow run's task runs the server has recorded (only those named ``name`` when given)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter, TaskRunFilterName

    named = TaskRunFilter(name=TaskRunFilterName(any_=[name])) if name is not None else TaskRunFilter()
    with get_client(sync_client=True) as client:
        return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                     task_run_filter=named)


def task_runs_once_finished(flow_run_id: UUID, finished: int, states: frozenset[str] = FINISHED,
                            timeout_s: float = 30.0) -> list:
    """The flow run's task runs once at least ``finished`` of them are recorded in one of ``states``, or what is
    recorded when ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = task_runs(flow_run_id)
        done = [run for run in runs if run.state and run.state.type.value in states]
        if len(done) >= finished or time.monotonic() > deadline:
            return runs
        time.sleep(0.2)


def artifacts(flow_run_id: UUID | None = None, key: str | None = None) -> list:
    """The artifacts of a flow run, or with a key; both given: that flow run's artifacts with that key."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    kept = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]) if flow_run_id else None,
                          key=ArtifactFilterKey(any_=[key]) if key is not None else None)
    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=kept)


def logs(flow_run_id: UUID, timeout_s: float = 30.0) -> list:
    """The flow run's log records once every task run's last line ("Finished in state …") and the flow's are in,
    or what is in when ``timeout_s`` has passed (this process's log worker is drained first)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    runs = task_runs(flow_run_id)
    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            found = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            last_lines = [log for log in found if log.message.startswith("Finished in state")]
            if len(last_lines) > len(runs) or time.monotonic() > deadline:
                return found
            time.sleep(0.5)
