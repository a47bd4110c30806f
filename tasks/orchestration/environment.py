"""Prefect's environment for a command: set before Prefect is imported, and the wait at the end.

Without ``PREFECT_API_URL`` each command runs on Prefect's ephemeral server
with its state in ``<workdir>/.prefect`` (unless ``PREFECT_HOME`` is set);
analytics are off; the terminal shows WARNING and up unless verbose (INFO
still reaches the API and the UI). The project's own loggers (the ``tasks``
tree: one ``logging.getLogger(__name__)`` per module) reach the run's log
through Prefect's own setting ``PREFECT_LOGGING_EXTRA_LOGGERS``
(:func:`route_run_logs`).
"""

from __future__ import annotations

import os
import logging
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.orchestration.logs import drop_repeated_failed_state

#: The logger tree whose lines Prefect sends to the run's log (every module under tasks/).
RUN_LOGGERS = "tasks"


def route_run_logs() -> None:
    """Send the ``tasks`` loggers' INFO and up to the log of the run they are in (the UI shows them); call it
    before Prefect is imported.

    ``PREFECT_LOGGING_EXTRA_LOGGERS`` gives those loggers Prefect's API handler (which finds the flow or task
    run from the context), but not a level: the tree's is set to INFO here, or the root's WARNING would drop
    the INFO lines. Outside a run such a line is not sent (``PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW=ignore``
    instead of a warning per line); it still reaches the terminal as any other log line.
    """
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", RUN_LOGGERS)
    os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
    logging.getLogger(RUN_LOGGERS).setLevel(logging.INFO)
    drop_repeated_failed_state()


def set_prefect_env(workdir: Path, verbose: bool = False) -> None:
    """Set Prefect's environment before Prefect is imported; ConfigError when the workdir is unusable."""
    if not os.environ.get("PREFECT_HOME") and not os.environ.get("PREFECT_API_URL"):
        home = workdir / ".prefect"
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"workdir {workdir} is not usable: {exc.strerror or exc}") from exc
        os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if not verbose:  # quiet terminal; the run's INFO logs still reach the API (and the UI of a real server)
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    route_run_logs()


def wait_for_prefects_record(state) -> bool:
    """On the ephemeral server, let it record the run's last task runs before this process stops it.

    It records them from events, behind the flow; without the wait the last
    ones (the uploads) could be missing from Prefect's history. A real server
    (``PREFECT_API_URL``) keeps running and catches up on its own. False when
    the ephemeral server had not recorded everything in time.
    """
    if os.environ.get("PREFECT_API_URL"):
        return True
    from tasks.orchestration.server_pace import task_run_counts, wait_until_recorded

    return wait_until_recorded(task_run_counts(state.state_details.flow_run_id))
