"""One Prefect server per workdir that outlives a command, and stops itself when nobody uses it.

The first command that needs Prefect (without ``PREFECT_API_URL``) calls
:func:`ensure`: under a lock file it either finds the server the record
``<PREFECT_HOME>/server.json`` names answering ``/api/health`` or starts one:
``python -m tasks.orchestration.workdir_server HOME PORT IDLE_S`` — a small
keeper, detached (its own session, standard streams on
``<PREFECT_HOME>/server.log``: it never holds the command's output), that runs
a :class:`~tasks.orchestration.local_server.LocalServer` (Prefect's own
``prefect server start``) on a free loopback port and stops it after
``IDLE_S`` seconds in which no command used it. What Prefect's
``prefect server start --background`` / ``status`` / ``stop`` lack, and so
why this keeper exists: docs/ARCHITECTURE.md, Workarounds.

Use is the record file's modification time: :func:`ensure` touches it and
:func:`keep_alive` touches it every :data:`HEARTBEAT_S` while a command runs,
so a long run is never idle; the keeper checks it a few times per idle period.
Looking at the UI does not count as use (the UI talks to the server directly).

A record is trusted only while its pid is alive and is a keeper for this very
home (``/proc/<pid>/cmdline``), and its port answers ``/api/health``: a
server that died, a pid reused by another process, a port now taken by
something else all read as "no server" and a new one is started on a new port.

Only the contributor reaches it (other users of the machine reach loopback
too): the server requires an auth string (``PREFECT_SERVER_API_AUTH_STRING``)
kept in ``<PREFECT_HOME>/server.auth`` (mode 0600, made once, never logged, never
in the record), which :func:`client_env` hands to every command as
``PREFECT_API_AUTH_STRING``; the home is mode 0700 and the keeper and server
create their files 0600 (umask 077), so the database (which holds the Secret
blocks' encryption key) is the contributor's only; and the keeper's environment
is an allow-list of the command's (:func:`tasks.core.secrets.server_environment`).

Nothing here imports Prefect: the address must be in the environment before
Prefect is imported by the command.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from tasks.core.errors import ConfigError
from tasks.core.secrets import server_environment
from tasks.orchestration.local_server import (
    HOST,
    LocalServer,
    free_port,
    healthy,
    new_auth_string,
    refuse_busy_port,
    wait_healthy,
)

#: ``workdir`` (the default): commands use the workdir's server; ``ephemeral``: each command runs Prefect's
#: ephemeral server in its own process, as before (the test suite's setting).
MODE_ENV = "MICROSTOCK_PREFECT_SERVER"
#: Seconds without a command before the server stops itself (default :data:`DEFAULT_IDLE_S`).
IDLE_ENV = "MICROSTOCK_SERVER_IDLE_SECONDS"
DEFAULT_IDLE_S = 1800
#: How often a running command marks the server as used.
HEARTBEAT_S = 30.0
#: The keeper's name on its command line (how a live pid is told from a reused one).
KEEPER = "tasks.orchestration.workdir_server"


@dataclass(frozen=True)
class ServerRecord:
    """What ``server.json`` says: the keeper's pid, the server's port, when it started, its idle limit."""

    pid: int
    port: int
    started: str
    idle_s: float

    @property
    def url(self) -> str:
        """The UI's address."""
        return f"http://{HOST}:{self.port}"

    @property
    def api_url(self) -> str:
        """The value for ``PREFECT_API_URL``."""
        return f"{self.url}/api"


def record_path(home: Path) -> Path:
    return home / "server.json"


def log_path(home: Path) -> Path:
    return home / "server.log"


def auth_path(home: Path) -> Path:
    """The file holding the server's auth string (the UI's login asks for its content)."""
    return home / "server.auth"


def auth_string(home: Path) -> str | None:
    """The workdir server's auth string, None before a server was first started."""
    try:
        return auth_path(home).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _ensure_auth(home: Path) -> None:
    """With the lock held: make the auth file once (0600 from its creation, written whole, then renamed), kept
    across restarts (a browser logged in to the UI stays logged in)."""
    if auth_string(home):
        return
    tmp = auth_path(home).with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(new_auth_string() + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, auth_path(home))


def _make_private(home: Path) -> None:
    """The home 0700 and what is in it 0600: the database holds the Secret blocks' encryption key (a home made
    before the server required this is closed on the next start)."""
    os.chmod(home, 0o700)
    for path in home.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)


def client_env(home: Path, record: ServerRecord) -> dict[str, str]:
    """What a command needs to use the running server: ``PREFECT_API_URL`` and ``PREFECT_API_AUTH_STRING``."""
    return {"PREFECT_API_URL": record.api_url, "PREFECT_API_AUTH_STRING": auth_string(home) or ""}


def idle_seconds() -> float:
    """The idle limit from :data:`IDLE_ENV`; ConfigError when it is not a positive number."""
    raw = os.environ.get(IDLE_ENV, "") or str(DEFAULT_IDLE_S)
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise ConfigError(f"{IDLE_ENV}={raw!r}: give the idle time in seconds, a positive number")
    return value


def wanted() -> bool:
    """True unless :data:`MODE_ENV` says ``ephemeral`` (or ``PREFECT_API_URL`` names a server already)."""
    return os.environ.get(MODE_ENV, "workdir") != "ephemeral" and not os.environ.get("PREFECT_API_URL")


def read_record(home: Path) -> ServerRecord | None:
    try:
        return ServerRecord(**json.loads(record_path(home).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _write_record(home: Path, record: ServerRecord) -> None:
    tmp = record_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record)), encoding="utf-8")
    os.replace(tmp, record_path(home))


def _is_keeper(pid: int, home: Path) -> bool:
    """True when ``pid`` is alive and is the keeper of ``home`` (not a process that reused the pid)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return KEEPER.encode() in args and str(home).encode() in args


def running(home: Path, patience_s: float = 0.0) -> ServerRecord | None:
    """The record when its keeper is alive and its server answers (within ``patience_s``: a server busy with a
    big run may be slow to answer, and is not taken for dead at the first slow health check); else None."""
    record = read_record(home)
    deadline = time.monotonic() + patience_s
    while record and _is_keeper(record.pid, home):
        if healthy(record.api_url):
            return record
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)
    return None


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    """The workdir's server lock: one command at a time starts or stops its server."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(home / "server.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def touch(home: Path) -> None:
    """Mark the server as used now (a missing record is left missing)."""
    try:
        os.utime(record_path(home))
    except OSError:
        pass


def keep_alive(home: Path) -> None:
    """Touch the record every :data:`HEARTBEAT_S` for as long as this process runs (a daemon thread)."""
    def beat() -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            touch(home)

    threading.Thread(target=beat, name="workdir-server-heartbeat", daemon=True).start()


def ensure(home: Path, port: int | None = None, *, startup_timeout_s: float = 180.0) -> tuple[ServerRecord, bool]:
    """The workdir's running server, started if needed: ``(record, started_now)``.

    ``port``: the port a new server must take (ConfigError when it is busy); by default a free one. A running
    server is used whatever its port. ConfigError with the log's last lines when the server does not start.
    """
    with _locked(home):
        record = running(home, patience_s=30.0)
        if record:
            touch(home)
            return record, False
        _stop_keeper(home)
        if port is None:
            port = free_port()
        refuse_busy_port(port)
        _make_private(home)
        _ensure_auth(home)
        with open(log_path(home), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", KEEPER, str(home), str(port), str(idle_seconds())],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True, env=server_environment(dict(os.environ)))
        record = ServerRecord(pid=proc.pid, port=port, started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              idle_s=idle_seconds())
        _write_record(home, record)
        try:
            wait_healthy(proc, record.api_url, log_path(home), startup_timeout_s, "the workdir's Prefect server")
        except BaseException:  # also Ctrl-C / SIGTERM while it starts: no half-started server is left behind
            proc.kill()  # its server child follows (PR_SET_PDEATHSIG), even before the keeper's name is in /proc
            proc.wait()
            _stop_keeper(home)
            raise
        return record, True


def stop(home: Path, timeout_s: float = 30.0) -> ServerRecord | None:
    """Stop the workdir's server and remove its record; the record it had when it was running, else None."""
    with _locked(home):
        return _stop_keeper(home, timeout_s)


def _stop_keeper(home: Path, timeout_s: float = 30.0) -> ServerRecord | None:
    """With the lock held: SIGTERM the record's keeper (SIGKILL after ``timeout_s``) if it is one, drop the
    record. A pid that is not this home's keeper is never signalled."""
    record = read_record(home)
    if record is None:
        return None
    alive = _is_keeper(record.pid, home)
    if alive:
        try:
            os.kill(record.pid, signal.SIGTERM)
        except ProcessLookupError:
            alive = False
        deadline = time.monotonic() + timeout_s
        while alive and _is_keeper(record.pid, home) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_keeper(record.pid, home):
            try:
                os.killpg(record.pid, signal.SIGKILL)
            except ProcessLookupError:  # it exited between the check and the kill
                pass
    record_path(home).unlink(missing_ok=True)
    return record if alive else None


def _drop_if_idle(home: Path, idle_s: float) -> str | None:
    """Why this server must stop now (its record gone, or untouched for ``idle_s``), else None. Under the lock
    (a command may be finding the server right now): an idle record is dropped, so that the next command
    starts a new server instead of using this one as it stops."""
    with _locked(home):
        try:
            idle_for = time.time() - record_path(home).stat().st_mtime
        except OSError:
            return "the record is gone: nobody can find this server any more"
        if idle_for < idle_s:
            return None
        record_path(home).unlink(missing_ok=True)
        return f"no command for {idle_for:.0f} s"


def _keep(home: Path, port: int, idle_s: float) -> None:
    """The keeper: run the server until SIGTERM, until it exits, or until the record is ``idle_s`` untouched.
    Its environment is the starting command's allow-listed (the recorder's batching:
    ``environment.set_prefect_env``); what it and its server create is the contributor's only."""
    os.umask(0o077)
    auth = auth_string(home)
    if not auth:  # `ensure` makes it before starting the keeper: never a server anyone can use
        raise SystemExit(f"no auth string in {auth_path(home)}: not starting a server without one")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session: only `server stop` or the idle time end it
    check_s = max(0.2, min(HEARTBEAT_S, idle_s / 4))
    server = LocalServer(home, port, auth_string=auth)
    try:
        with server:
            print(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} workdir server on {server.url}, "
                  f"stops after {idle_s:.0f} s without a command", flush=True)
            while not stopping.wait(check_s):
                if server.proc is None or server.proc.poll() is not None:
                    print("the Prefect server exited", flush=True)
                    break
                if why := _drop_if_idle(home, idle_s):
                    print(f"{why}: stopping", flush=True)
                    break
    finally:
        record = read_record(home)
        if record and record.pid == os.getpid():
            record_path(home).unlink(missing_ok=True)


if __name__ == "__main__":
    _keep(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
