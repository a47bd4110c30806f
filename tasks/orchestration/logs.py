"""Where a stage's log lines go, and one line of Prefect's that must not read like a crash.

:func:`stage_logger` gives Prefect's run logger inside a run (the UI shows
the lines), else a plain logger.

A task that ends by returning a failed-type state (an upload file left
pending, a describe job Parked) is an expected outcome, not an exception, but
Prefect logs it with ``exc_info=True`` while no exception is in flight, so
every such line is followed by ``NoneType: None``. :class:`NoEmptyTraceback`,
on Prefect's ``prefect.task_runs`` logger from the moment this module is
loaded, drops that empty traceback and nothing else.
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


class NoEmptyTraceback(logging.Filter):
    """Drop ``exc_info`` from a record logged with ``exc_info=True`` while no exception was in flight."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[0] is None:
            record.exc_info = None
        return True


_TASK_RUNS = logging.getLogger("prefect.task_runs")
if not any(isinstance(f, NoEmptyTraceback) for f in _TASK_RUNS.filters):
    _TASK_RUNS.addFilter(NoEmptyTraceback())
