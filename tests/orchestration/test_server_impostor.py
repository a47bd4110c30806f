"""Another local user's impostor keeper gets nothing of the contributor's (issue 50).

As ``microstock-other``, a fake HTTP server whose command line holds ``tasks.orchestration.server_keeper HOME
PORT IDLE_S`` for the contributor's workdir listens on a port and writes down every request it receives. With
the record missing (the first start, after `server stop`, after the idle stop) the contributor's `server
status`, `server start`, `server list` and `server stop` take it for no keeper: it receives no request (no
auth string, nothing else), our commands start a server of their own on a port of their own, and `server stop`
ends without a traceback. The old code sent it the auth string as Basic credentials."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tasks.orchestration import server_record
from tasks.orchestration.local_server import HOST, free_port, healthy, port_in_use
from tests.fakes import impostor_server
from tests.fakes.local_users import other_uid, popen_as_other, system_python
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.orchestration.test_local_server_lifecycle import alive, default_env

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]


class Impostor:
    """The other user's fake keeper of ``home`` on ``port``, and the requests it received."""

    def __init__(self, home: Path, port: int) -> None:
        self.port = port
        self.dir = Path(tempfile.mkdtemp(prefix="impostor-"))  # under /tmp: the other user reaches it
        os.chmod(self.dir, 0o755)
        script = self.dir / "fake.py"
        shutil.copy(impostor_server.__file__, script)
        os.chmod(script, 0o644)
        (self.dir / "log").mkdir()
        os.chown(self.dir / "log", other_uid(), -1)
        self.log = self.dir / "log" / "requests.jsonl"
        # Through `sh -c "exec …"`: the keeper's words then stand alone on the fake's command line only, not on
        # runuser's (a root process: the contributor's own when the tests run as root, as on CI).
        argv = [system_python(), "-I", str(script), str(self.log), server_record.KEEPER, str(home), str(port), "600"]
        self.proc = popen_as_other(["sh", "-c", "exec " + shlex.join(argv)])
        wait_until("the impostor to listen", lambda: port_in_use(port) or self.proc.poll() is not None)
        assert self.proc.poll() is None, "the impostor did not start"
        self.pid = self._fake_pid()

    def _fake_pid(self) -> int:
        """The fake's own pid (runuser's child), the process whose command line names the keeper."""
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if str(self.log) in args:
                return int(cmdline.parent.name)
        raise AssertionError("the impostor's process was not found")

    def requests(self) -> list[dict]:
        try:
            return [json.loads(line) for line in self.log.read_text().splitlines()]
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)  # as root: the other user's process
        except ProcessLookupError:  # the old code's `server stop`, run as root, had stopped it
            pass
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def impostor():
    made = []

    def start(home: Path, port: int) -> Impostor:
        made.append(Impostor(home, port))
        return made[-1]

    yield start
    for fake in made:
        fake.stop()


def microstock(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(MICROSTOCK + list(args), env=env, capture_output=True, text=True, timeout=300)


def said(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def test_an_impostor_keeper_is_no_keeper_and_is_sent_nothing(tmp_path, impostor):
    home = tmp_path / "work" / ".prefect"
    home.mkdir(parents=True)
    (home / "server.auth").write_text("microstock:" + "a" * 32 + "\n")
    fake = impostor(home, free_port())
    assert not server_record.is_keeper(fake.pid, home) and server_record.find_keeper(home) is None
    api_url = f"http://{HOST}:{fake.port}/api"
    # Not proven: neither a process of ours (this one) nor the fake itself is what holds its port.
    assert not healthy(api_url, pid=os.getpid(), auth=server_record.auth_string(home))
    assert not healthy(api_url, pid=fake.pid)
    assert fake.requests() == [], "nothing is sent to a port not proven ours"


@pytest.mark.server
def test_with_no_record_our_commands_ignore_an_impostor_and_start_their_own_server(tmp_path, impostor):
    workdir = tmp_path / "work"
    home = migrated_home(workdir / ".prefect")
    env = default_env(home, XDG_STATE_HOME=str(tmp_path / "state"))
    fake = impostor(home, free_port())
    try:
        # The first start: no record, no auth string yet.
        status = microstock(env, "server", "status", "--workdir", str(workdir))
        assert status.returncode == 1 and "no server runs" in status.stdout, said(status)
        started = microstock(env, "server", "start", "--workdir", str(workdir))
        assert started.returncode == 0, said(started)
        record = server_record.read_record(home)
        assert record.port != fake.port and record.pid != fake.pid
        assert f"started: Prefect UI {record.url}" in started.stdout, said(started)
        listed = microstock(env, "server", "list")
        assert listed.returncode == 0 and f"running  {record.url}" in listed.stdout, said(listed)

        # After `server stop`: the record is gone, the auth string is there.
        stopped = microstock(env, "server", "stop", "--workdir", str(workdir))
        assert stopped.returncode == 0 and f"stopped the server on {record.url}" in stopped.stdout, said(stopped)
        wait_until("our keeper to go", lambda: not alive(record.pid), timeout_s=60)
        again = microstock(env, "server", "stop", "--workdir", str(workdir))
        assert again.returncode == 0 and "no server ran" in again.stdout, said(again)
        assert "Traceback" not in said(again)
        status = microstock(env, "server", "status", "--workdir", str(workdir))
        assert status.returncode == 1 and "no server runs" in status.stdout, said(status)
        listed = microstock(env, "server", "list")
        assert listed.returncode == 0 and f"stopped  (was {record.url})" in listed.stdout, said(listed)
        assert "Traceback" not in said(listed)
        back = microstock(env, "server", "start", "--workdir", str(workdir))
        assert back.returncode == 0 and f"started: Prefect UI {record.url}" in back.stdout, said(back)
        assert server_record.read_record(home).pid != fake.pid

        assert fake.requests() == [], "the impostor received a request of ours"
        assert alive(fake.pid), "the impostor was left alone"
    finally:
        microstock(env, "server", "stop", "--force", "--workdir", str(workdir))


@pytest.mark.server
def test_an_impostor_on_the_kept_port_after_the_idle_stop_gets_nothing_and_the_server_moves(tmp_path, impostor):
    workdir = tmp_path / "work"
    home = migrated_home(workdir / ".prefect")
    env = default_env(home, XDG_STATE_HOME=str(tmp_path / "state"), MICROSTOCK_SERVER_IDLE_SECONDS="3")
    started = microstock(env, "server", "start", "--workdir", str(workdir))
    assert started.returncode == 0, said(started)
    first = server_record.read_record(home)
    wait_until("the idle server to stop", lambda: not alive(first.pid) and not port_in_use(first.port),
               timeout_s=120)
    assert server_record.read_record(home) is None
    fake = impostor(home, first.port)  # the other user takes the port the server comes back on
    try:
        status = microstock(env, "server", "status", "--workdir", str(workdir))
        assert status.returncode == 1 and "no server runs" in status.stdout, said(status)
        back = microstock(env, "server", "start", "--workdir", str(workdir))
        assert back.returncode == 0, said(back)
        record = server_record.read_record(home)
        assert record.port != first.port and record.pid != fake.pid
        assert f"port {first.port}, where this workdir's server ran before, is taken by another program" \
            in back.stderr, said(back)
        assert fake.requests() == [], "the impostor received a request of ours"
    finally:
        microstock(env, "server", "stop", "--force", "--workdir", str(workdir))
