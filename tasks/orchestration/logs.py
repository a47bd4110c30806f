"""Where a stage's log lines go, and one line of Prefect's that must not read like a crash.

:func:`stage_logger` gives Prefect's run logger inside a run (the UI shows
the lines), else a plain logger. (The describe, replay and review stages log
through module loggers instead, routed into the run's log by
``PREFECT_LOGGING_EXTRA_LOGGERS``: :func:`tasks.orchestration.environment.route_run_logs`.)

A task that ends by returning a failed-type state (an upload file left
pending, a describe job Parked) is an expected outcome, not an exception, but
Prefect logs it twice: "Task run failed with state: Parked(message=…,
result=…)" (with ``exc_info=True`` while no exception is in flight, so
followed by ``NoneType: None``), then the line that ends every task run,
"Finished in state Parked('…')". :class:`NoRepeatedFailedState` drops the
first, so the state's message is logged once. It depends on the wording of
Prefect's line (``prefect/task_engine.py``, ``handle_retry``), so it is
installed by one call, :func:`drop_repeated_failed_state`, made where a
command sets up Prefect's logging (``route_run_logs``), not by importing this.
"""

from __future__ import annotations

import logging
import sys


def stage_logger(name: str) -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a flow or task run, ``logging.getLogger(name)`` elsewhere.

    Prefect is never imported here: no flow or task can be running unless
    it already is, so commands that never run a flow (``microstock ledger …``)
    start fast and log at once.
    """
    if "prefect" not in sys.modules:
        return logging.getLogger(name)
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(name)


class NoRepeatedFailedState(logging.Filter):
    """Drop Prefect's "Task run failed with state: …" (a task returned a failed-type state and is not retried):
    the "Finished in state …" line that ends the same task run says it, and the state's message only once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("Task run failed with state: "))


def drop_repeated_failed_state() -> None:
    """Put :class:`NoRepeatedFailedState` on Prefect's ``prefect.task_runs`` logger (once; safe to call again)."""
    task_runs = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, NoRepeatedFailedState) for f in task_runs.filters):
        task_runs.addFilter(NoRepeatedFailedState())
