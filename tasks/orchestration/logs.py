"""Where a stage's log lines go: Prefect's run logger inside a run (the UI shows them), else a plain logger."""

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
