"""The keeper notices its server's death at once, not at its next idle check (issue 50: it looked every 30 s, so
a killed server was back after 13-34 s under a command).

The keeper runs in a process of its own (it takes SIGTERM) with a stand-in for its server: a child that only
sleeps, and an idle check cadence of a million seconds. Killing the child must end the keeper, saying so: it
can only when its watch waits on the child itself. (The wait for the keeper's end has a hang guard, far above
the instant the fix takes and far below the million seconds the old loop slept.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tasks.orchestration import server_record
from tasks.orchestration.local_server import new_auth_string

KEEPER_WITH_A_SLEEPING_SERVER = """
import subprocess, sys
from pathlib import Path
from tasks.orchestration import server_keeper

class SleepingServer:  # LocalServer's part the keeper uses: a child process, entered and left
    def __init__(self, home, port, **settings):
        self.url = self.api_url = f"http://127.0.0.1:{port}"
    def __enter__(self):
        self.proc = subprocess.Popen(["sleep", "1000000"])
        print("server pid", self.proc.pid, flush=True)
        return self
    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

server_keeper.LocalServer = SleepingServer
server_keeper.crash_orphans = lambda *args: []
server_keeper.CHECK_S = 1e6
server_keeper.keep(Path(sys.argv[1]), 9, 1e9)
"""


def test_the_keeper_wakes_when_its_server_dies_not_at_its_next_idle_check(tmp_path):
    home = tmp_path / ".prefect"
    home.mkdir()
    server_record.auth_path(home).write_text(new_auth_string() + "\n")
    keeper = subprocess.Popen([sys.executable, "-c", KEEPER_WITH_A_SLEEPING_SERVER, str(home)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = keeper.stdout.readline()
        assert first.startswith("server pid "), first
        os.kill(int(first.split()[-1]), signal.SIGKILL)
        said, _ = keeper.communicate(timeout=60)
    finally:
        if keeper.poll() is None:
            keeper.kill()
            keeper.wait()
    assert keeper.returncode == 0, said
    assert "the Prefect server exited (code -9)" in said, said
