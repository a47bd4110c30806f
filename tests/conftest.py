"""Shared fixtures: Prefect in a private home, one test harness per session, small workdirs."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

# Before Prefect is imported anywhere: a private home, no analytics, patient start-up. Both folders go when the
# process ends (each xdist worker made two and left them: 192 in /tmp after a day's runs).
_HOME = tempfile.mkdtemp(prefix="microstock-prefect-")
atexit.register(shutil.rmtree, _HOME, True)
os.environ["PREFECT_HOME"] = _HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Commands run on their own ephemeral server, as before the workdir's server existed (no server outlives a
# test); tests/orchestration/test_local_server_lifecycle.py exercises the default, the workdir's server.
os.environ["MICROSTOCK_PREFECT_SERVER"] = "ephemeral"
# The user's list of workdir servers (`microstock server list`) of this session only.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="microstock-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)
for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "PREFECT_API_URL"):
    os.environ.pop(key, None)
# The stages log on module loggers (the `tasks` tree); Prefect sends them to the run's logs as `microstock` does.
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")  # a plain stage call is in no run
logging.getLogger("tasks").setLevel(logging.INFO)

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

# No property test is timed: Hypothesis's default 200 ms deadline per example is a wall-clock assertion, and on a
# loaded machine an example of test_protected took 442 ms and failed a clean run (2026-12-07). What is fast enough
# is measured in bench/, not asserted here.
hypothesis_settings.register_profile("microstock", deadline=None)
hypothesis_settings.load_profile("microstock")

from tasks.orchestration.environment import route_run_logs  # noqa: E402  (imports no Prefect)
from tasks.orchestration.prefect_settings import home_settings  # noqa: E402  (imports no Prefect)

route_run_logs()  # the stages' module loggers reach the runs' logs, as for a `microstock` command

#: How `make test` shares its xdist workers: tests/worker_groups.py.
pytest_plugins = ("tests.worker_groups",)


@pytest.fixture(scope="session", autouse=True)
def _prefects_default_port_is_taken():
    """Hold Prefect's port 4200 for the session, as another program on a contributor's machine may: a workdir
    server with no kept port then takes a free port, so the tests' servers (several xdist workers start them at
    once) never contend for 4200. Contending, one test's server came back on another port after another
    test's took 4200 meanwhile (a flaky CI failure, 2026-12-03). A worker that cannot bind it: another worker
    holds it."""
    import socket

    from tasks.orchestration.local_server import DEFAULT_PORT, HOST

    holder = socket.socket()
    try:
        holder.bind((HOST, DEFAULT_PORT))
        holder.listen()
    except OSError:
        pass
    yield
    holder.close()


@pytest.fixture(scope="session", autouse=True)
def _one_migrated_prefect_database_per_session(tmp_path_factory):
    """tests/fakes/prefect_home.py makes its migrated database once for the session, beside the session's
    temporary folders: under xdist their parent (``pytest-N/``, shared by the workers, which take turns under a
    lock), else the session's own. Gone with them."""
    from tests.fakes import prefect_home

    base = tmp_path_factory.getbasetemp()
    prefect_home.SESSION_DIR = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def _no_workdir_server_outlives_the_session(tmp_path_factory):
    """A command run without the ephemeral setting (a subprocess with a cleaned environment) starts a workdir
    server that would outlive the tests for its idle time: stop every one whose home is in this session's
    temporary folders."""
    yield
    import signal
    import time
    from pathlib import Path

    from tasks.orchestration.server_record import KEEPER

    roots = (str(tmp_path_factory.getbasetemp()), _HOME)
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if KEEPER in args and any(a.startswith(roots) for a in args):
            pid = int(cmdline.parent.name)
            os.kill(pid, signal.SIGTERM)
            for _ in range(300):  # until it is gone (or a zombie: its server is stopped then)
                try:
                    if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                        break
                except OSError:
                    break
                time.sleep(0.1)


@pytest.fixture(scope="session")
def prefect_harness():
    """One real Prefect test server for the whole session (it takes ~10 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def run_microstock():
    """``run_microstock(*args, env=None)``: ``microstock ARGS`` in this process (typer's runner), on a 200-column
    terminal, with what the command sets in the environment for Prefect put back afterwards. A test that asks
    for ``prefect_harness`` too has the command's runs on the session's server: no server start to wait for."""
    from typer.testing import CliRunner

    from flows.cli import app

    runner = CliRunner(env={"COLUMNS": "200", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": None})

    def invoke(*args: str, env: dict[str, str | None] | None = None):
        before = dict(os.environ)
        try:
            return runner.invoke(app, list(args), env=env, catch_exceptions=False)
        finally:  # the settings a command pins for its home (environment.set_prefect_env) must not follow the
            os.environ.clear()  # next command of the session, which may have another home
            os.environ.update(before)

    return invoke


@pytest.fixture
def workdir(tmp_path):
    """A fresh, empty workdir."""
    from tasks.core.workdir import Workdir

    return Workdir(tmp_path / "work").prepare()


#: Environment a test must leave as it found it: a leaked key or API URL switches later runs to Gemini or
#: to another server, and the failure shows up far from its cause.
_GUARDED_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "PREFECT_API_URL", "PREFECT_HOME",
                "MICROSTOCK_WORKDIR", "MICROSTOCK_ADOBE_PASSWORD", "MICROSTOCK_VECTEEZY_PASSWORD",
                "MICROSTOCK_DREAMSTIME_PASSWORD")
#: What a command run in this process pins for its home (tasks/orchestration/prefect_settings.py): put back after
#: each test, as run_microstock does. Left behind by a command run through typer's own runner, the next test's
#: workdir server copied its UI into that earlier test's home (a clean-clone CI run).
_PINNED_ENV = (*(k for k in home_settings(Path("/")) if k != "PREFECT_HOME"), "PYTHONSAFEPATH")


@pytest.fixture(autouse=True)
def _environment_is_left_as_found(request):
    before = {k: os.environ.get(k) for k in _GUARDED_ENV}
    pinned = {k: os.environ.get(k) for k in _PINNED_ENV}
    yield
    for key, value in pinned.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    after = {k: os.environ.get(k) for k in _GUARDED_ENV}
    leaked = sorted(k for k in _GUARDED_ENV if before[k] != after[k])
    assert not leaked, f"{request.node.nodeid} left the environment changed: {leaked}"


@pytest.fixture(scope="session")
def clips(tmp_path_factory):
    """The test clips, made once a session: a 5 s 1920×1080 25 fps one Adobe takes, a vertical one, a small 61 s one."""
    from tests.fakes.clips import make_clip

    folder = tmp_path_factory.mktemp("clips")
    return {"hd": make_clip(folder / "harbour.mp4", fps=25),
            "vertical": make_clip(folder / "tower.mp4", width=1080, height=1920),  # 1 fps: the framing is named first
            "long": make_clip(folder / "tide.mov", width=640, height=360, seconds=61)}
