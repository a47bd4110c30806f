"""Prefect's environment for a command: set before Prefect is imported.

Without ``PREFECT_API_URL`` each command runs on the workdir's own Prefect
server (started by the first command, stopped after an idle time), or with
``MICROSTOCK_PREFECT_SERVER=ephemeral`` on Prefect's ephemeral server in its
own process; its state is in ``<workdir>/.prefect`` (unless ``PREFECT_HOME`` is set),
every setting that says where Prefect keeps data pinned there in the environment, so that no settings file of
the folder the command starts in moves it, and another user's settings file there refused
(:mod:`tasks.orchestration.prefect_settings`); analytics are off; the terminal shows WARNING and up unless verbose (INFO
still reaches the API and the UI). The project's own loggers (the ``tasks``
tree: one ``logging.getLogger(__name__)`` per module) reach the run's log
through Prefect's own setting ``PREFECT_LOGGING_EXTRA_LOGGERS``
(:func:`route_run_logs`). The embedded server's task-run recorder
and event persister write in batches (:data:`SERVER_BATCHING`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.orchestration.logs import drop_repeated_failed_state
from tasks.orchestration.prefect_settings import pin, refuse_foreign_settings

#: The logger tree whose lines Prefect sends to the run's log (every module under tasks/).
RUN_LOGGERS = "tasks"
#: Prefect's settings that route it, for a process whose environment is made elsewhere (a worker's flow run:
#: prefect.yaml's and the accounts' job variables carry the same).
RUN_LOG_ENV = {"PREFECT_LOGGING_EXTRA_LOGGERS": RUN_LOGGERS, "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore"}


def route_run_logs() -> None:
    """Send the ``tasks`` loggers' INFO and up to the log of the run they are in (the UI shows them); call it
    before Prefect is imported (a command), or have :data:`RUN_LOG_ENV` in the process's environment (a
    worker's flow run, which imports :mod:`flows` and so calls this for the level and the filter).

    ``PREFECT_LOGGING_EXTRA_LOGGERS`` gives those loggers Prefect's API handler (which finds the flow or task
    run from the context), but not a level: the tree's is set to INFO here, or the root's WARNING would drop
    the INFO lines. Outside a run such a line is not sent (``PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW=ignore``
    instead of a warning per line); it still reaches the terminal as any other log line.
    """
    for name, value in RUN_LOG_ENV.items():
        os.environ.setdefault(name, value)
    logging.getLogger(RUN_LOGGERS).setLevel(logging.INFO)
    drop_repeated_failed_state()


#: The server's writers of what a flow run sends, each in batches: the task-run recorder up to 500 task runs'
#: states in one database write, the event persister up to 1,000 events, both at least once a second.
#: Prefect's defaults (recorder 1, persister 20 every 5 s) commit so often that the embedded SQLite server
#: records a few dozen task runs a second and, at 5,000 describe runs, the persister's 10,000-message queue
#: overflows and drops events (1,670 at the persister's default, 0 so: docs/BENCHMARKS.md). Their
#: ``READ_BATCH_SIZE`` is not set: the in-memory broker of the embedded server ignores it.
SERVER_BATCHING = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "500",
                   "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
                   "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "1000",
                   "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "1"}


def holds_workdir(workdir: Path) -> bool:
    """True when ``workdir`` is one a command made (its Prefect home, assets or config is there)."""
    return any(p.exists() for p in (workdir / ".prefect", workdir / "assets", workdir / "microstock.toml"))


def set_prefect_env(workdir: Path, verbose: bool = False, *, server: bool = True, start_server: bool = True,
                    new_workdir: bool = False) -> None:
    """Set Prefect's environment before Prefect is imported; ConfigError when the workdir is unusable or its
    server does not start.

    Without ``PREFECT_API_URL`` (and unless ``MICROSTOCK_PREFECT_SERVER=ephemeral``) the command uses the
    workdir's own server (:mod:`tasks.orchestration.workdir_server`), started now if none runs, marked as used
    while the command runs, and ``PREFECT_API_URL`` names it (``PREFECT_API_AUTH_STRING`` its auth string).
    ``start_server=False``: only a server already running is used (a command that needs the API only for what
    a running server can hold, such as a run paused for review). ``server=False``: the caller handles the
    server itself (``microstock serve``). A folder that holds no workdir gets no server (ConfigError naming
    it: a mistyped ``--workdir`` starts nothing) unless ``new_workdir`` (a command that makes one).

    Prefect's home (``<workdir>/.prefect``, or ``PREFECT_HOME``; with ``PREFECT_API_URL`` and no ``PREFECT_HOME``
    Prefect's own ``~/.prefect``) holds every setting that decides where its data lives (:func:`pin`), for this
    process, the ephemeral server it may run, and the workdir's server; no Python process started from this one
    imports from its folder (``PYTHONSAFEPATH``). ConfigError first when a Prefect settings file of the current
    folder is another user's (:func:`refuse_foreign_settings`).
    """
    from tasks.orchestration import workdir_server

    refuse_foreign_settings(Path("."))  # the folder Prefect reads them from
    if server and start_server and not new_workdir and workdir_server.wanted() and not holds_workdir(workdir):
        raise ConfigError(f"{workdir} holds no microstock workdir (no .prefect, assets or microstock.toml): check "
                          f"--workdir, or start one with `microstock run --workdir {workdir}`")
    if not os.environ.get("PREFECT_HOME") and not os.environ.get("PREFECT_API_URL"):
        home = workdir / ".prefect"
        try:
            home.mkdir(mode=0o700, parents=True, exist_ok=True)  # its database is the contributor's only
        except OSError as exc:
            raise ConfigError(f"workdir {workdir} is not usable: {exc.strerror or exc}") from exc
        os.environ["PREFECT_HOME"] = str(home)
    pin(os.environ, Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser().absolute())
    # The Python processes Prefect starts from this one (its ephemeral server: `python -m uvicorn`) would import
    # first from the folder they start in, which is this command's: a `uvicorn/` another user put there ran as
    # the contributor (issue 50). Python 3.11's safe path leaves it out; the project's modules are installed.
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    for name, value in SERVER_BATCHING.items():  # the embedded server's (and `microstock serve`'s) recorder
        os.environ.setdefault(name, value)
    if not verbose:  # quiet terminal; the run's INFO logs still reach the API (and the UI of a real server)
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    route_run_logs()
    if server and workdir_server.wanted():
        home = Path(os.environ["PREFECT_HOME"])
        record = workdir_server.ensure(home)[0] if start_server else workdir_server.running(home)
        if record is not None:
            workdir_server.attach(home, record)
