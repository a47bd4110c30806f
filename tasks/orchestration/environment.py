"""Prefect's environment for a command: set before Prefect is imported.

Without ``PREFECT_API_URL`` each command runs on Prefect's ephemeral server
with its state in ``<workdir>/.prefect`` (unless ``PREFECT_HOME`` is set);
analytics are off; the terminal shows WARNING and up unless verbose (INFO
still reaches the API and the UI). The embedded server's task-run recorder
writes its records in batches (:data:`RECORDER_BATCHING`).
"""

from __future__ import annotations

import os
from pathlib import Path

from tasks.core.errors import ConfigError

#: The server's task-run recorder: up to 500 task runs' states in one database write, at least once a second.
#: Prefect's default writes one at a time (batch size 1), a commit each: the embedded SQLite server then
#: records a few dozen task runs a second and falls behind a stage that starts hundreds (docs/BENCHMARKS.md).
#: Its ``READ_BATCH_SIZE`` is not set: the in-memory broker of the embedded server ignores it.
RECORDER_BATCHING = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "500",
                     "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1"}


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
    for name, value in RECORDER_BATCHING.items():  # the embedded server's (and `microstock serve`'s) recorder
        os.environ.setdefault(name, value)
    if not verbose:  # quiet terminal; the run's INFO logs still reach the API (and the UI of a real server)
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")

