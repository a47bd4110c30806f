"""A run that loses the workdir's server, for real: the server SIGKILLed (with its keeper) in describe and again
in upload comes back on the same port, and the run finishes — every file received once, the run Completed in
the UI, its address still opening; `server stop` under the run is refused and a 10-second idle limit does not
stop the server under it (it stops once the run is done). A server that cannot come back (`server stop
--force`) ends the run at once with one line; the next server start marks that run Crashed and lists it, and a
re-run finishes the rest exactly once.

The run is slowed where the kills land: the test Gemini server answers each describe call after a delay, the
FTP server reads at a low rate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.core.workdir import Workdir
from tasks.orchestration import server_record
from tasks.orchestration.local_server import HOST, healthy
from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.fakes.servers import PASSWORD, USER, FtpServer
from tests.orchestration.test_local_server_lifecycle import alive, default_env
from tests.orchestration.test_server import api, make_photo

pytestmark = pytest.mark.server

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]
NAMES = ["red_barn", "blue_lake", "green_field"]  # adobe takes 3 versions of one motif (same answer)


def slow_answer(req):
    reply = answer_json()
    reply.delay = 4.0
    return reply


@pytest.fixture
def slow_world(tmp_path):
    """A workdir of four photos, adobe over a slow FTP server, a slow test Gemini server; the command's env."""
    gemini = FakeGemini().start()
    gemini.default = slow_answer
    ftp = FtpServer(tmp_path / "ftp").start()
    ftp.faults.rate = 40_000
    wd = Workdir(tmp_path / "data").prepare()
    for name, colour in zip(NAMES, ["red", "blue", "green"], strict=True):
        make_photo(wd.assets / f"{name}.jpg", colour)
    wd.config_file.write_text(f"[agencies.adobe]\ntarget = 'ftp://{USER}@127.0.0.1:{ftp.port}/'\n",
                              encoding="utf-8")
    env = default_env(migrated_home(wd.root / ".prefect"), MICROSTOCK_SERVER_IDLE_SECONDS="10", GEMINI_API_KEY=FAKE_KEY,
                      GOOGLE_GEMINI_BASE_URL=gemini.url, MICROSTOCK_ADOBE_PASSWORD=PASSWORD)
    try:
        yield wd, env, gemini, ftp
    finally:
        gemini.stop()
        ftp.stop()


def describing(gemini: FakeGemini) -> int:
    """Describe calls received so far (not the model-list check a run makes first)."""
    return sum(":generateContent" in r.path for r in gemini.requests)


def start(env: dict, wd: Workdir) -> tuple[subprocess.Popen, Path]:
    out = wd.root / f"run-{time.monotonic_ns()}.err"
    proc = subprocess.Popen(MICROSTOCK + ["run", "--workdir", str(wd.root), "--agency", "adobe"], env=env,
                            cwd=wd.root, stdout=subprocess.PIPE, stderr=open(out, "w"), text=True)
    return proc, out


def kill_server(home: Path) -> server_record.ServerRecord:
    record = server_record.read_record(home)
    os.killpg(record.pid, signal.SIGKILL)
    wait_until("the killed keeper to go", lambda: not alive(record.pid), timeout_s=30)
    return record


def back_on(home: Path, port: int) -> server_record.ServerRecord:
    def found():
        r = server_record.read_record(home)
        return r if r and r.port == port and alive(r.pid) and healthy(r.api_url) else None

    return wait_until("the server back on its port", found, timeout_s=180)


def test_a_run_outlives_its_server_killed_in_describe_and_upload(slow_world, run_microstock):
    wd, env, gemini, ftp = slow_world
    home = wd.root / ".prefect"
    proc, err = start(env, wd)
    wait_until("describe to be under way", lambda: describing(gemini) >= 1, timeout_s=240)
    first = kill_server(home)
    again = back_on(home, first.port)
    assert again.pid != first.pid

    # The run uses it: `server stop` is refused (naming the run), and its 10 s idle limit passes without a stop.
    refused = run_microstock("server", "stop", env={"PREFECT_HOME": str(home)})
    assert refused.exit_code == 2 and "in use by pid" in refused.output and "microstock run" in refused.output

    wait_until("the first upload", lambda: ftp.log.received(), timeout_s=240)
    second = kill_server(home)
    back_on(home, first.port)
    out, _ = proc.communicate(timeout=300)
    stderr = err.read_text()
    assert proc.returncode == 0, out[-3000:] + stderr[-3000:]
    assert stderr.count("is back on") == 2 and "Traceback" not in stderr, stderr[-3000:]
    assert "no command for" not in (home / "server.log").read_text(), "the idle limit stopped it under the run"

    # Every file received once; the run's page opens on the same address, and it reads Completed.
    assert sorted(r.name for r in ftp.log.received()) == sorted(f"{n}.jpg" for n in NAMES)
    *_, stays, last = out.strip().splitlines()
    assert last.startswith(f"the run in the Prefect UI: http://{HOST}:{first.port}/runs/flow-run/"), last
    # Before it, how long that page stays up and the command that brings it back on the same port.
    assert "10 s after the last" in stays and f"on port {first.port}" in stays, stays
    assert "microstock server start --workdir" in stays, stays
    run_id = last.rsplit("/", 1)[1]
    record = server_record.read_record(home)
    from tests.orchestration.test_server import AUTH

    AUTH[record.api_url] = server_record.auth_string(home)
    assert api(record.api_url, "GET", f"/flow_runs/{run_id}")["state"]["type"] == "COMPLETED"
    assert second.port == first.port
    # Nobody uses it now: it stops by itself after its idle time.
    wait_until("the idle server to stop", lambda: not alive(record.pid), timeout_s=120)


def test_a_server_stopped_for_good_ends_the_run_in_one_line_and_the_rerun_finishes(slow_world, run_microstock):
    wd, env, gemini, ftp = slow_world
    home = wd.root / ".prefect"
    proc, err = start(env, wd)
    wait_until("describe to be under way", lambda: describing(gemini) >= 1, timeout_s=240)
    forced = run_microstock("server", "stop", "--force", env={"PREFECT_HOME": str(home)})
    assert forced.exit_code == 0, forced.output
    proc.communicate(timeout=120)  # it ends at once (Prefect alone drained its events for many minutes)
    stderr = err.read_text()
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert "server stop --force" in line and "Run the same command again" in line, line

    started = subprocess.run(MICROSTOCK + ["server", "start", "--workdir", str(wd.root)], env=env,
                             capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    listed = started.stdout[started.stdout.index("the last runs:"):]
    assert "stock-batch" in listed and "Crashed" in listed, started.stdout
    proc, err = start(env, wd)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:] + err.read_text()[-3000:]
    assert sorted(r.name for r in ftp.log.received()) == sorted(f"{n}.jpg" for n in NAMES)
