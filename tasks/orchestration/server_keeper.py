"""The keeper: the detached process that runs the workdir's Prefect server and stops it when nobody uses it.

Started by :func:`tasks.orchestration.workdir_server.ensure` as
``python -m tasks.orchestration.server_keeper HOME PORT IDLE_S`` (its own
session, output on ``server.log``). It runs a
:class:`~tasks.orchestration.local_server.LocalServer` with the home's auth
string, holding its port for its whole life (:func:`server_port.hold`: no other user takes it while the server
is down), and stops it on SIGTERM, when the server exits (a thread waits on it:
at once), or when for ``IDLE_S``
no process used it: a process registered in :mod:`server_users` is a use for
as long as it lives (a 10-second idle limit never stops a server under a
running command), and the record's modification time is the last use.

Once its server answers it sets right the runs that lost their process while
no server was there (:func:`crash_orphans`): a run still Running, Pending,
Paused or Cancelling in the database that started before every process now
using the server can have no process left, and is marked Crashed with what to
do, so the UI does not show it running forever.

Nothing here imports Prefect (its REST API is called with the standard library, only once its port has proven
to be held by its own server: :mod:`server_proof`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.orchestration import server_users
from tasks.orchestration.local_server import LocalServer
from tasks.orchestration.server_port import hold
from tasks.orchestration.server_proof import ask
from tasks.orchestration.server_record import auth_path, auth_string, locked, read_record, record_path

#: How often the keeper looks whether its server is idle, at most (a short idle limit looks more often); its
#: server's exit wakes it at once.
CHECK_S = 30.0
#: What a run that lost its process is told (its state message in the UI).
ORPHAN_MESSAGE = ("its command ended while the workdir's Prefect server was gone; nothing is lost (uploads are "
                  "in the ledger): run the same command again to finish it")
UNFINISHED = ["RUNNING", "PENDING", "PAUSED", "CANCELLING"]


def _api(server: LocalServer, auth: str, path: str, body: dict) -> object:
    """``POST`` to the keeper's own server, once its port is proven held by that server
    (:func:`server_proof.ask`: the auth string goes to no other process); OSError when it is not, or answers
    other than 2xx."""
    answer = ask(server.api_url, path, pid=server.proc.pid, auth=auth, body=body, timeout_s=30)
    if answer is None:
        raise OSError(f"the port of {server.url} is not held by the keeper's server: nothing sent")
    status, data = answer
    if not 200 <= status < 300:
        raise OSError(f"{path} answered HTTP {status}")
    return json.loads(data or b"null")


def crash_orphans(home: Path, server: LocalServer, auth: str) -> list[str]:
    """Mark Crashed every unfinished flow run that started before every live user of the server (none: all);
    the ids it marked."""
    users = server_users.live(home)
    oldest = min((u.since for u in users), default=None)
    runs = _api(server, auth, "/flow_runs/filter",
                {"flow_runs": {"state": {"type": {"any_": UNFINISHED}}}, "limit": 200})
    marked = []
    for run in runs:
        began = run.get("start_time") or run.get("created") or ""
        if oldest is not None and _utc(began) >= _utc(oldest):
            continue
        _api(server, auth, f"/flow_runs/{run['id']}/set_state",
             {"state": {"type": "CRASHED", "name": "Crashed", "message": ORPHAN_MESSAGE}, "force": True})
        marked.append(run["id"])
    return marked


def _utc(stamp: str) -> datetime:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _drop_if_idle(home: Path, idle_s: float) -> str | None:
    """Why this server must stop now (its record gone, or no user for ``idle_s``), else None. Under the lock
    (a command may be finding the server right now): an idle record is dropped, so that the next command
    starts a new server instead of using this one as it stops."""
    with locked(home):
        if server_users.live(home):
            os.utime(record_path(home))  # in use now: the idle time counts from the last user's end
            return None
        try:
            idle_for = time.time() - record_path(home).stat().st_mtime
        except OSError:
            return "the record is gone: nobody can find this server any more"
        if idle_for < idle_s:
            return None
        record_path(home).unlink(missing_ok=True)
        return f"no command for {idle_for:.0f} s"


def _say(line: str) -> None:
    print(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {line}", flush=True)


def _wake_when_gone(proc: subprocess.Popen, wake: threading.Event) -> None:
    """Wait for the server's exit (blocked in ``waitpid``, no polling), then wake the keeper."""
    proc.wait()
    wake.set()


def keep(home: Path, port: int, idle_s: float) -> None:
    """Run the server until SIGTERM, until it exits, or until nobody used it for ``idle_s``. Its environment is
    the starting command's allow-listed; what it and its server create is the contributor's only.

    Its server's exit wakes it at once (a thread waits on the child), so a command using the server brings it
    back within its own watch's second; the idle check keeps its cadence (:data:`CHECK_S`, or a quarter of a
    short idle limit). It looked every 30 s for both before, so a killed server was back after 13-34 s
    (issue 50)."""
    os.umask(0o077)
    auth = auth_string(home)
    if not auth:  # `ensure` makes it before starting the keeper: never a server anyone can use
        raise SystemExit(f"no auth string in {auth_path(home)}: not starting a server without one")
    wake = threading.Event()  # set by SIGTERM or by the server's exit
    signal.signal(signal.SIGTERM, lambda *_: wake.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session: only `server stop` or the idle time end it
    check_s = max(0.2, min(CHECK_S, idle_s / 4))
    server = LocalServer(home, port, auth_string=auth)
    try:
        hold(port)  # the port stays ours for the keeper's life, its server down or not (server_port)
        with server:
            threading.Thread(target=_wake_when_gone, args=(server.proc, wake), name="server-exit",
                             daemon=True).start()
            _say(f"workdir server on {server.url}, stops after {idle_s:.0f} s without a command")
            try:
                os.utime(record_path(home))  # the idle time counts from now, not from before its start-up
            except OSError:  # set aside as damaged this moment by a command that rebuilds it (fresh: now)
                pass
            try:
                if marked := crash_orphans(home, server, auth):
                    _say(f"{len(marked)} run(s) that lost their command marked Crashed: {', '.join(marked)}")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                _say(f"could not look for runs that lost their command: {exc}")
            while not wake.wait(check_s):
                if why := _drop_if_idle(home, idle_s):
                    _say(f"{why}: stopping")
                    break
            if server.proc.poll() is not None:  # woken by its exit (a SIGTERM leaves it running: None)
                _say(f"the Prefect server exited (code {server.proc.returncode})")
    except ConfigError as exc:  # it did not start (its port taken, its database unreadable): the log says why
        _say(exc.message)
        raise SystemExit(1) from None
    finally:
        record = read_record(home)
        if record and record.pid == os.getpid():
            record_path(home).unlink(missing_ok=True)


if __name__ == "__main__":
    keep(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
