"""The workdir's own Prefect server, for real: started once by commands that start at the same moment, reused by
a run whose summary ends with its UI URL, found by `microstock server status`, gone with its keeper when that is
killed, stopped by its idle time; a stale record (a reused pid, a port now taken by something else) never
misleads a command: a new server is started. `microstock server stop` of a running server: test_server.py's
serve tests (serve stops the server it started).

Each test starts real servers (~5-10 s each), so the lifecycle is covered by two tests that share them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.core.secrets import SERVER_ENV_NAMES, SERVER_ENV_PREFIXES
from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.local_server import HOST, healthy, port_in_use
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home

pytestmark = pytest.mark.server

ENSURE = ("import sys; from pathlib import Path; from tasks.orchestration.workdir_server import ensure; "
          "r, started = ensure(Path(sys.argv[1])); print(r.pid, r.port, started)")


def default_env(home: Path, **extra: str) -> dict[str, str]:
    """A command's environment with the default setting (the workdir's server) and this home."""
    env = {k: v for k, v in os.environ.items() if k not in ("MICROSTOCK_PREFECT_SERVER", "PREFECT_API_URL")}
    return dict(env, PREFECT_HOME=str(home), COLUMNS="200", **extra)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_commands_share_one_server_that_outlives_them_until_stopped(tmp_path, run_microstock):
    home = migrated_home(tmp_path / "work" / ".prefect")
    env = default_env(home)
    secrets = {"GEMINI_API_KEY": "gem-key-lifecycle-1", "MICROSTOCK_ADOBE_PASSWORD": "adobe-pw-lifecycle-2",
               "FTP_PASS": "unrelated-ftp-pw-3", "PREFECT_API_KEY": "prefect-cloud-key-4"}
    starters = [subprocess.Popen([sys.executable, "-c", ENSURE, str(home)], env=dict(env, **secrets),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    said = [p.communicate(timeout=240) for p in starters]
    assert [p.returncode for p in starters] == [0, 0], [err[-1500:] for _, err in said]
    outs = [out.split() for out, _ in said]
    assert outs[0][:2] == outs[1][:2], "two commands starting at once share one server"
    assert sorted(o[2] for o in outs) == ["False", "True"]
    pid, port = int(outs[0][0]), int(outs[0][1])
    record = server_record.read_record(home)
    assert (record.pid, record.port) == (pid, port) and healthy(record.api_url)
    # The keeper and its server outlive the command: they keep an allow-list of its environment, no secret and
    # nothing unrelated; the server has its own auth string (from the workdir's file), nobody else's.
    (server_pid,) = map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    for who in (pid, server_pid):
        environ = Path(f"/proc/{who}/environ").read_bytes()
        assert all(v.encode() not in environ for v in secrets.values()), "the server outlives the command"
        names = {e.split(b"=", 1)[0].decode() for e in environ.split(b"\0") if e}
        assert all(n in SERVER_ENV_NAMES or n.startswith(SERVER_ENV_PREFIXES) for n in names), names
        assert "COLUMNS" not in names and "PREFECT_API_KEY" not in names
    server_env = Path(f"/proc/{server_pid}/environ").read_bytes().split(b"\0")
    assert f"PREFECT_SERVER_API_AUTH_STRING={server_record.auth_string(home)}".encode() in server_env

    # A run uses it (the starter's process is gone: the server outlived it) and ends with the run's UI URL.
    ran = subprocess.run([sys.executable, "-c", "from flows.cli import main; main()", "run", "--count", "1",
                          "--agency", "adobe", "--workdir", str(tmp_path / "work")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    last = ran.stdout.strip().splitlines()[-1]
    assert last.startswith(f"the run in the Prefect UI: http://{HOST}:{port}/runs/flow-run/"), last
    assert server_record.read_record(home).pid == pid, "the run reused the server"

    status = run_microstock("server", "status", env={"PREFECT_HOME": str(home)})
    assert status.exit_code == 0 and f"Prefect UI http://{HOST}:{port}" in status.output

    # It died (killed with its keeper): its server goes too, and no command takes the record for a server.
    os.killpg(pid, signal.SIGKILL)
    wait_until("the killed keeper to go", lambda: not alive(pid), timeout_s=30)
    wait_until("its server to go", lambda: not port_in_use(port), timeout_s=60)
    assert workdir_server.running(home) is None
    stopped = run_microstock("server", "stop", env={"PREFECT_HOME": str(home)})
    assert stopped.exit_code == 0 and "no server ran" in stopped.output
    assert server_record.read_record(home) is None
    assert run_microstock("server", "status", env={"PREFECT_HOME": str(home)}).exit_code == 1


def test_a_stale_record_misleads_nobody_and_an_idle_server_stops_itself(tmp_path, monkeypatch):
    home = migrated_home(tmp_path / ".prefect")
    with socket.socket() as taken:  # something else listens where the record says the server is
        taken.bind((HOST, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {busy} .* already in use"):
            workdir_server.ensure(home, port=busy)
        # The record names this very test process (a pid reused by another program) and the taken port.
        (home / "server.json").write_text(json.dumps({"pid": os.getpid(), "port": busy,
                                                      "started": "2026-01-01T00:00:00+00:00", "idle_s": 60}))
        monkeypatch.setenv(workdir_server.IDLE_ENV, "3")
        # And the port looked free when chosen, then another program took it before the server's bind (two
        # workdirs' servers starting at once both choose 4200): the server starts on a free port instead, and
        # is never taken for the other program (only its own server answers with its auth string).
        monkeypatch.setattr(workdir_server, "_port_for", lambda home, asked: busy)
        record, started = workdir_server.ensure(home)
        assert started and record.port != busy and record.pid != os.getpid() and healthy(record.api_url)
        auth = server_record.auth_string(home)
        assert healthy(record.api_url, pid=record.pid, auth=auth)
        assert not healthy(f"http://{HOST}:{busy}/api", pid=record.pid, auth=auth), "not proven: nothing sent"
        with pytest.raises(ConfigError, match="refuses the auth string"):
            healthy(record.api_url, pid=record.pid, auth="microstock:another-one")
        assert server_record.read_record(home) == record
        assert workdir_server.ensure(home) == (record, False), "the next command uses it"
    # Nobody uses it: it stops by itself and drops its record.
    wait_until("the idle server to stop", lambda: not alive(record.pid), timeout_s=120)
    assert server_record.read_record(home) is None and not port_in_use(record.port)
    assert "stopping" in (home / "server.log").read_text()


def test_a_user_api_url_wins_and_the_ephemeral_setting_keeps_the_old_way(monkeypatch):
    monkeypatch.delenv(workdir_server.MODE_ENV, raising=False)
    assert workdir_server.wanted()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert not workdir_server.wanted()
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv(workdir_server.MODE_ENV, "ephemeral")
    assert not workdir_server.wanted()
