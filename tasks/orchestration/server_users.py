"""Who uses the workdir's server right now: one locked file a process, gone with the process.

A command that talks to the workdir's server calls :func:`register`: it
creates ``<PREFECT_HOME>/users/<pid>.json`` (what it is, since when) and holds
an exclusive ``flock`` on it for as long as it lives. :func:`live` lists the
files whose lock is held; a file whose lock it can take belonged to a process
that ended (even by SIGKILL: the kernel drops a dead process's locks), and is
removed. So the keeper never stops a server under a running command (the idle
stop, ``server stop``), whatever the heartbeat does, and a server that comes
back knows which runs in its database lost their process (those that started
before every live user: :func:`tasks.orchestration.server_keeper.crash_orphans`).

Nothing here imports Prefect.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

#: This process's registrations: home → the open, locked file (kept open: closing it drops the lock).
_HELD: dict[Path, int] = {}


@dataclass(frozen=True)
class User:
    """A live process using the server: its pid, what it runs (``microstock run``), since when (UTC, ISO)."""

    pid: int
    what: str
    since: str


def users_dir(home: Path) -> Path:
    return home / "users"


def register(home: Path, what: str | None = None) -> None:
    """Mark this process as a user of ``home``'s server until it ends (idempotent)."""
    if home in _HELD:
        return
    folder = users_dir(home)
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{os.getpid()}.json"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # `live` may have removed the file between our open and our lock: then lock a new one
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    what = what or " ".join(["microstock", *sys.argv[1:2]])
    since = datetime.now(timezone.utc).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": os.getpid(), "what": what, "since": since}).encode())
    _HELD[home] = fd


def live(home: Path, *, but_me: bool = False) -> list[User]:
    """The processes using ``home``'s server now, oldest first (``but_me``: not this one); files of ended
    processes are removed on the way."""
    found = []
    try:
        paths = sorted(users_dir(home).glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its process runs
                if but_me and path.stem == str(os.getpid()):
                    continue
                try:
                    found.append(User(**json.loads(os.read(fd, 4096) or b"{}")))
                except (ValueError, TypeError):  # written the moment we read: still a user
                    found.append(User(pid=int(path.stem) if path.stem.isdigit() else 0, what="?", since=""))
                continue
            path.unlink(missing_ok=True)  # its process ended
        finally:
            os.close(fd)
    return sorted(found, key=lambda u: u.since)


def describe(users: list[User]) -> str:
    """``pid 123 (microstock run, since 2026-12-02T00:52:01+00:00)``, joined for one line."""
    return "; ".join(f"pid {u.pid} ({u.what}, since {u.since})" for u in users)
