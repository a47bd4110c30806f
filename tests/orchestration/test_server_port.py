"""The workdir server's port stays the contributor's while a command uses it, even while the server is down; and
two servers of the contributor's never listen on one port (issue 50).

When the server died under a command, Prefect's client in that command went on retrying with the auth string,
to whatever then listened on the port, and the port was free until the new server bound it: another local user
looping on ``bind()`` got it. Now the command and the keeper hold the port (``server_port.hold``) and the
server listens beside them (``server_launch``); ``SO_REUSEPORT``, which allows that, would also let two of our
servers share one port: ``server_port.listen`` refuses a second one."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.local_server import HOST, free_port, port_in_use
from tasks.orchestration.server_port import listen, unheld
from tests.fakes.local_users import popen_as_other, system_python
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.orchestration.test_local_server_lifecycle import default_env

pytestmark = pytest.mark.server

#: A command using the workdir's server through Prefect's own client: it connects once, says its port and keeper,
#: waits to be told, then asks again (the client retries while the server is down) and says where it got to.
COMMAND = """
import sys
from pathlib import Path
from tasks.orchestration import workdir_server
home = Path(sys.argv[1])
record, _ = workdir_server.ensure(home)
workdir_server.attach(home, record)
from prefect.client.orchestration import get_client
with get_client(sync_client=True) as client:
    client.hello().raise_for_status()
    print(record.port, record.pid, flush=True)
    sys.stdin.readline()
    client.hello().raise_for_status()
    print("back", client.api_url, flush=True)
"""

#: The other user: binds 127.0.0.1:PORT (every option) in a loop until its stdin closes. Says `down` once it saw
#: the port refuse a connection (no server listening) after a bind failed, `got` if a bind ever succeeds.
BINDER = r"""
import errno, select, socket, sys, time
port = int(sys.argv[1])
said_down = False
while not select.select([sys.stdin], [], [], 0)[0]:
    for host in ("127.0.0.1", "0.0.0.0"):
        for opts in ((), (socket.SO_REUSEADDR,), (socket.SO_REUSEPORT,), (socket.SO_REUSEADDR, socket.SO_REUSEPORT)):
            s = socket.socket()
            for opt in opts:
                s.setsockopt(socket.SOL_SOCKET, opt, 1)
            try:
                s.bind((host, port))
            except OSError as exc:
                assert exc.errno == errno.EADDRINUSE, exc
            else:
                print("got", host, opts, flush=True)
                sys.exit(0)
            finally:
                s.close()
    if not said_down:
        probe = socket.socket()
        if probe.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED:
            print("down", flush=True)
            said_down = True
        probe.close()
    time.sleep(0.002)
print("never got it", flush=True)
"""


@pytest.fixture
def binder_script():
    folder = Path(tempfile.mkdtemp(prefix="binder-"))  # under /tmp, 0755: the other user reaches it
    os.chmod(folder, 0o755)
    script = folder / "binder.py"
    script.write_text(BINDER)
    os.chmod(script, 0o644)
    yield script
    shutil.rmtree(folder, ignore_errors=True)


def test_while_the_server_is_down_under_a_command_no_other_user_takes_its_port(tmp_path, binder_script):
    home = migrated_home(tmp_path / "work" / ".prefect")
    env = default_env(home, XDG_STATE_HOME=str(tmp_path / "state"))
    command = subprocess.Popen([sys.executable, "-c", COMMAND, str(home)], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    binder = None
    try:
        first = command.stdout.readline().split()
        assert len(first) == 2, command.communicate(timeout=60)
        port, keeper = map(int, first)
        binder = popen_as_other([system_python(), "-I", str(binder_script), str(port)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        (server,) = map(int, Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split())
        os.kill(server, signal.SIGKILL)
        # The other user, looping on bind(), sees the port refuse connections (no server) and still cannot take it.
        assert binder.stdout.readline().split() == ["down"]
        command.stdin.write("\n")
        command.stdin.flush()
        back = command.stdout.readline()
        assert back.split() == ["back", f"http://{HOST}:{port}/api/"], command.communicate(timeout=60)
        binder.stdin.close()
        assert binder.stdout.read().split() == ["never", "got", "it"]
        assert server_record.read_record(home).port == port
    finally:
        for proc in (command, binder):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        workdir_server.stop(home, force=True)


def listeners(port: int) -> int:
    """Sockets listening on ``port`` (any address), from the kernel's table."""
    return sum(line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A"
               for line in Path("/proc/net/tcp").read_text().splitlines()[1:])


def test_a_second_server_of_ours_never_listens_on_a_port_one_of_ours_listens_on(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = listen(port)  # another workdir's server's socket, as its launcher made it
    second = subprocess.Popen([sys.executable, "-m", "tasks.orchestration.server_launch", str(port)],
                              env=dict(os.environ, PREFECT_HOME=str(tmp_path / "b")), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until("the second server to stop or listen", lambda: second.poll() is not None or listeners(port) > 1,
                   timeout_s=300)
        assert listeners(port) == 1
        assert second.wait() == 1
        assert "already in use" in second.stdout.read()
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
        first.close()


def test_a_fresh_workdir_never_takes_a_port_another_of_ours_holds_while_its_server_comes_back(tmp_path, monkeypatch):
    """A port another workdir holds (its server down, a command of it waiting for it to come back) only answers
    "refused", as a free one does: a fresh workdir took it, and the one coming back had to move (its command
    then ended). Held, it is no fresh workdir's default; free again, it is."""
    port = free_port()
    monkeypatch.setattr(workdir_server, "DEFAULT_PORT", port)
    fresh = tmp_path / "fresh" / ".prefect"
    placeholder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as server_port.hold makes it
    placeholder.bind((HOST, port))
    try:
        assert not port_in_use(port), "a held port answers refused, as a free one"
        assert not unheld(port)
        assert workdir_server._port_for(fresh, None) != port
    finally:
        placeholder.close()
    assert workdir_server._port_for(fresh, None) == port
