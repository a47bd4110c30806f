"""The deployments of ``prefect.yaml``, read once for ``prefect deploy`` and ``microstock serve`` alike.

``prefect.yaml`` at the project root is the one definition of every
deployment (names, entrypoints, schedules, parameters, concurrency). This
module reads it with Prefect's own model of the file and turns each entry
into a deployment that ``prefect.serve`` can run in this process, so the
served deployments are the deployed ones.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from tasks.core.errors import ConfigError

#: The project root: where prefect.yaml, flows/ and tasks/ are.
PROJECT_DIR = Path(__file__).resolve().parents[2]
PREFECT_YAML = PROJECT_DIR / "prefect.yaml"


@dataclass(frozen=True)
class CronSpec:
    cron: str
    timezone: str | None = None


@dataclass(frozen=True)
class DeploymentSpec:
    """One ``deployments:`` entry of prefect.yaml, as far as serving needs it."""

    name: str
    entrypoint: str
    description: str = ""
    tags: list[str] = field(default_factory=list)
    schedules: list[CronSpec] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    concurrency_limit: int | None = None
    work_pool: str | None = None

    @property
    def module(self) -> str:
        """``flows/stock_batch.py:stock_batch`` → ``flows.stock_batch``."""
        path = self.entrypoint.split(":", 1)[0]
        return path.removesuffix(".py").replace("/", ".")

    @property
    def function(self) -> str:
        return self.entrypoint.split(":", 1)[1]


def load_specs(path: Path = PREFECT_YAML) -> list[DeploymentSpec]:
    """Every deployment of ``path``; ConfigError naming the file and the problem when it is unusable.

    Only cron schedules are used by this project; another kind is refused
    here rather than silently dropped.
    """
    from prefect.cli.deploy._models import PrefectYamlModel

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        model = PrefectYamlModel.model_validate(raw)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read deployments: {exc}") from exc
    specs = []
    for d in model.deployments:
        if not d.name or not d.entrypoint or ":" not in d.entrypoint:
            raise ConfigError(f"{path}: every deployment needs a name and an entrypoint 'file.py:function'")
        crons = []
        for s in d.schedules or []:
            cron = getattr(s, "cron", None)
            if not cron:
                raise ConfigError(f"{path}: deployment {d.name}: only cron schedules are supported")
            crons.append(CronSpec(cron, getattr(s, "timezone", None)))
        limit = d.concurrency_limit if isinstance(d.concurrency_limit, int) or d.concurrency_limit is None \
            else d.concurrency_limit.limit
        specs.append(DeploymentSpec(
            name=d.name, entrypoint=d.entrypoint, description=d.description or "",
            tags=list(d.tags or []) if not isinstance(d.tags, str) else [d.tags],
            schedules=crons, parameters=dict(d.parameters or {}), concurrency_limit=limit,
            work_pool=d.work_pool.name if d.work_pool else None,
        ))
    return specs


def load_flow(spec: DeploymentSpec):
    """The flow object of ``spec``'s entrypoint, imported as a module of this package."""
    from prefect import Flow

    try:
        obj = getattr(importlib.import_module(spec.module), spec.function)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"deployment {spec.name}: cannot load {spec.entrypoint}: {exc}") from exc
    if not isinstance(obj, Flow):
        raise ConfigError(f"deployment {spec.name}: {spec.entrypoint} is not a Prefect flow")
    return obj


def runner_deployments(specs: list[DeploymentSpec], workdir: Path, timezone: str | None = None) -> list:
    """Deployments to pass to ``prefect.serve``: the specs' schedules (``timezone`` overrides theirs),
    parameters and limits, with ``workdir`` as every flow's workdir."""
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    out = []
    for spec in specs:
        flow = load_flow(spec)
        schedules = []
        for s in spec.schedules:
            tz = timezone or s.timezone or "UTC"
            try:
                ZoneInfo(tz)
            except (ValueError, ZoneInfoNotFoundError) as exc:
                raise ConfigError(f"deployment {spec.name}: unknown timezone {tz!r} (use an IANA name such as "
                                  "Europe/Berlin)") from exc
            schedules.append(Cron(s.cron, timezone=tz))
        out.append(flow.to_deployment(
            name=spec.name,
            description=spec.description or None,
            tags=spec.tags,
            schedules=schedules,
            parameters={**spec.parameters, "workdir": str(workdir)},
            concurrency_limit=spec.concurrency_limit,
            # Runs import the flow by module (the package is installed), whatever the current folder.
            entrypoint_type=EntrypointType.MODULE_PATH,
        ))
    return out


def serve_all(workdir: Path, *, port: int | None, timezone: str | None, say=print) -> None:
    """Serve every deployment of prefect.yaml until SIGTERM or SIGINT.

    With ``PREFECT_API_URL`` set, against that server. Without it, on the
    workdir's server (:mod:`tasks.orchestration.workdir_server`, database in
    ``$PREFECT_HOME``): when none runs one is started on ``port`` and runs for
    exactly as long as the deployments are served (started and healthy before
    them, stopped after ``serve`` has paused their schedules); one already
    running is used on its own port and left running.
    Prefect must not have been imported yet when no server is set.
    """
    import os
    import signal
    import threading
    import time

    from tasks.orchestration.server_record import log_path
    from tasks.orchestration.workdir_server import attach, ensure, stop

    runners: list = []  # the Prefect runner serving the deployments, once _serve has made it
    done = threading.Event()  # set when serving has ended: a signal held for the runner is then dropped

    def interrupt(signum, frame):  # SIGTERM before Prefect's runner has started
        if not runners:
            raise KeyboardInterrupt
        # The runner registers the deployments first, installs its SIGTERM handler when it starts, and until it
        # has started that handler exits the process (Runner.handle_sigterm: sys.exit) without pausing their
        # schedules. Hand the signal on once it has started, so that it pauses them as on any later stop.
        threading.Thread(target=redeliver, args=(runners[0],), daemon=True).start()

    def redeliver(runner):
        while not runner.started and not done.is_set():
            time.sleep(0.05)
        if not done.is_set():  # serving ended before the runner started: nothing is left to stop
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, interrupt)
    def as_sigterm(signum, frame):  # Ctrl-C takes SIGTERM's way: Prefect's runner pauses the schedules on it
        os.kill(os.getpid(), signal.SIGTERM)

    # Installed explicitly: it also works when the caller started us with SIGINT ignored (a background job).
    previous_int = signal.signal(signal.SIGINT, as_sigterm)
    try:
        if os.environ.get("PREFECT_API_URL"):
            _serve(workdir, timezone, os.environ["PREFECT_API_URL"].removesuffix("/api"), say, runners)
            return
        home = Path(os.environ["PREFECT_HOME"])
        say(f"the workdir's Prefect server (database in {home}, log {log_path(home)}) …")
        record, started = ensure(home, port)
        try:
            say(f"… started on {record.url}" if started else f"… already runs on {record.url}: serving on it")
            attach(home, record)  # the environment also its flow runs' (the runner's processes inherit it)
            _serve(workdir, timezone, record.url, say, runners)
        finally:
            if started:  # a server this command started runs as long as it does (its own runs have ended)
                stop(home, force=True)
        if started:
            say("local Prefect server stopped")
    except KeyboardInterrupt:
        say("stopped")
    finally:
        done.set()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _serve(workdir: Path, timezone: str | None, ui_url: str, say, runners: list) -> None:
    """Serve the deployments until a stop, as Prefect's ``serve()`` does, with the runner in ``runners`` for
    :func:`serve_all`'s signal handling (it must see when the runner has started)."""
    import asyncio
    import os
    import signal
    import threading
    import time
    from uuid import uuid4

    from prefect.exceptions import TerminationSignal
    from prefect.runner import Runner

    deployments = runner_deployments(load_specs(), workdir, timezone)
    for d in deployments:
        when = ", ".join(f"{s.schedule.cron} {s.schedule.timezone}" for s in d.schedules) or "manual"
        say(f"  {d.flow_name}/{d.name}: {when}")
    say(f"workdir {workdir}; Prefect UI {ui_url}; Ctrl-C or SIGTERM stops serving")
    storage = Path(os.environ["PREFECT_HOME"]) / "runner_storage"
    storage.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Serving lasts for weeks, and each flow run is a new process that starts in this one's folder, where Prefect
    # reads .env / prefect.toml / pyproject.toml: a file put in the starting folder after the check at the start
    # (environment.set_prefect_env) would reach them. In the home nobody else can put one.
    os.chdir(storage.parent)

    class PausingRunner(Runner):
        """Prefect's Runner, but a SIGTERM that reaches its handler before it has started waits for the start
        (Prefect's handler would ``sys.exit(0)`` then, leaving the schedules running) and then stops it; and its
        files in the home.

        Why the files: Prefect's runner keeps them in ``<tmp>/runner_storage/<uuid>`` (``Runner.__init__``,
        Prefect 3.9.1; no setting names it), one folder for every user of the machine: one another user made
        first stopped ``serve`` with a PermissionError (issue 50), and its owner could swap what is in it."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._tmp_dir = storage / str(uuid4())

        def handle_sigterm(self, *args, **kwargs) -> None:
            if self.started or self.stopping:
                super().handle_sigterm(*args, **kwargs)
                return
            threading.Thread(target=self._stop_once_started, daemon=True).start()

        def _stop_once_started(self) -> None:
            while not self.started:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGTERM)

    runner = PausingRunner(pause_on_shutdown=True)
    runners.append(runner)
    for deployment in deployments:
        runner.add_deployment(deployment)
    try:
        asyncio.run(runner.start())
    except (KeyboardInterrupt, TerminationSignal):
        pass
