"""Prefect's view of the upload stage: one task run per file, named for the agency and the file.

``tasks.upload`` decides everything (reconcile, send, confirm, record, retry,
stop); :class:`FileTaskRuns` only runs each file's part inside a task run
``upload-<agency>-<file>``, so the UI lists every file with its own state:
Completed with what happened ("uploaded → sftp://…", "reconciled …"), or
Failed with why the file was left pending. A StageStopped raised by the file
still reaches the agency's loop, which stops the agency.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from tasks.orchestration.server_pace import pace_for_flow_run
from tasks.core.records import UploadItem
from tasks.core.records import FileOutcome


@task(name="upload-file", task_run_name="upload-{agency}-{item.name}", cache_policy=NO_CACHE)
def upload_file(agency: str, item: UploadItem, send: Callable[[], FileOutcome]) -> State:
    """Send one file (``send`` does the work); the run's state says what became of it."""
    outcome = send()
    if outcome.kind == "failed":
        return Failed(message=f"{item.name} left pending: {outcome.detail}")
    return Completed(message=f"{item.name} {outcome.kind} {outcome.detail}")


class FileTaskRuns:
    """A ``FileRunner`` for ``upload_agency``: each file in its own task run of the current flow run.

    Made once per flow run and shared by every agency, it paces them
    together like the describe stage (``tasks.server_pace``): never more than
    a bound of file runs ahead of what Prefect's server has recorded, so a
    large batch neither overflows the server's event queue nor leaves it a
    long backlog to record after the flow.
    """

    def __init__(self) -> None:
        self._pace = pace_for_flow_run("upload-")  # the agencies' own runs match too: three more, finished last
        self._lock = threading.Lock()
        self._started = 0

    def __call__(self, agency: str, item: UploadItem, send: Callable[[], FileOutcome]) -> None:
        with self._lock:  # parallel workers share one pace
            if self._pace is not None:
                self._pace.before_submit(self._started)
            self._started += 1
        state = upload_file(agency, item, send, return_state=True)
        if state.is_failed():
            raised = state.result(raise_on_failure=False)
            if isinstance(raised, BaseException):  # a StageStopped or store failure: the agency's loop decides
                raise raised
