"""One Prefect server per workdir that outlives a command, comes back on its port, and stops when nobody uses it.

The first command that needs Prefect (without ``PREFECT_API_URL``) calls :func:`ensure`: under the home's lock it
either finds the server the record ``<PREFECT_HOME>/server.json`` names (or, with no usable record, the keeper of
this home among the user's own processes: :func:`server_record.find_keeper`) or starts one: the keeper
(:mod:`server_keeper`), detached, runs Prefect's server on loopback (:mod:`server_launch`). A new server takes the
port the home's server last had (``server.port``), else Prefect's 4200 when free, else a free one; so the addresses
a run printed open again after the server comes back. What Prefect's ``prefect server start --background`` /
``status`` / ``stop`` lack, and so why this keeper exists: docs/ARCHITECTURE.md, Workarounds.

A command then :func:`attach`-es: it is registered as a user of the server for as long as it lives
(:mod:`server_users`: no idle stop, no ``server stop`` under it), holds its port (:mod:`server_port`: no other user
takes it), and a thread watches the keeper: if the server dies under the command, the thread brings it back on that
port at once, and Prefect's client, which retries a refused connection for about a minute once it has connected
(with the auth string: hence the port held), goes on (a run's tasks report through events, which Prefect resends
after a reconnect). If it cannot come back (its port taken, ``server stop --force``), the command ends at once with
one line saying why and how to go on (:func:`_give_up`), instead of Prefect draining its queued events for many
minutes.

A live keeper is never killed by a command: a server slow to answer ``/api/health`` (a loaded machine) is waited
for, and left running with one line if it does not answer in time. Only ``server stop`` stops it, and not while a
command uses it unless forced.

Only the contributor reaches it (other users of the machine reach loopback too): the server requires an auth string
(``PREFECT_SERVER_API_AUTH_STRING``) kept in ``<PREFECT_HOME>/server.auth`` (mode 0600, made once, never logged,
never in the record), which :func:`client_env` hands to every command as ``PREFECT_API_AUTH_STRING`` once the
server's port has proven to be this home's keeper's server's (:mod:`server_proof`: another user's program is sent
nothing); the home is mode 0700 and the keeper and server create their files 0600 (umask 077), so the database
(which holds the Secret blocks' encryption key) is the contributor's only; and the keeper's environment is an
allow-list of the command's (:func:`tasks.core.secrets.server_environment`). The keeper and its server run in the
home, with every setting that decides where Prefect keeps data pinned there
(:mod:`tasks.orchestration.prefect_settings`): no settings file of the folder a command starts in moves them.

Nothing here imports Prefect: the address must be in the environment before
Prefect is imported by the command.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn

from tasks.core.errors import ConfigError
from tasks.core.secrets import server_environment
from tasks.orchestration import server_users
from tasks.orchestration.local_server import (
    DEFAULT_PORT,
    AuthRefused,
    free_port,
    healthy,
    port_in_use,
    refuse_busy_port,
    wait_healthy,
)
from tasks.orchestration.prefect_settings import pin
from tasks.orchestration.server_port import hold, unheld
from tasks.orchestration.server_proof import family
from tasks.orchestration.server_record import (
    KEEPER,
    ServerRecord,
    auth_path,
    auth_string,
    check_home,
    ensure_auth,
    find_keeper,
    is_keeper,
    known_homes,
    last_port,
    locked,
    log_path,
    make_private,
    read_record,
    record_path,
    remember,
    stopped_path,
    write_record,
)

log = logging.getLogger(__name__)

#: ``workdir`` (the default): commands use the workdir's server; ``ephemeral``: each command runs Prefect's
#: ephemeral server in its own process, as before (the test suite's setting).
MODE_ENV = "MICROSTOCK_PREFECT_SERVER"
#: Seconds without a command before the server stops itself (default :data:`DEFAULT_IDLE_S`).
IDLE_ENV = "MICROSTOCK_SERVER_IDLE_SECONDS"
DEFAULT_IDLE_S = 1800
#: How often a command looks whether its server's keeper still lives (a /proc read).
WATCH_S = 1.0
#: How long a port a dead server held may take to be free again before a new server takes another.
PORT_RELEASE_S = 15.0

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


def _current(home: Path) -> ServerRecord | None:
    """With the lock held: the record of this home's live keeper (rebuilt from the process table when the record
    is missing or was damaged), else None (a stale record is dropped)."""
    record = read_record(home)
    if record and is_keeper(record.pid, home):
        if last_port(home) != record.port:  # the port file was damaged: the port is remembered again
            write_record(home, record)
        return record
    record_path(home).unlink(missing_ok=True)
    if found := find_keeper(home):
        write_record(home, found)
        log.warning("the workdir server's record %s was missing or damaged: rebuilt from its running keeper "
                    "(pid %d)", record_path(home), found.pid)
    return found


def running(home: Path) -> ServerRecord | None:
    """The record when this home's keeper lives and its server answers now, proven this home's (:func:`_answers`);
    else None. ConfigError when it runs but the home's auth file is damaged (:func:`_answers`)."""
    if not record_path(home).is_file() and not find_keeper(home):
        return None
    check_home(home)
    with locked(home):
        record = _current(home)
    return record if record and _answers(home, record) else None


def _answers(home: Path, record: ServerRecord) -> bool:
    """True when ``record``'s server, proven this keeper's (:func:`local_server.healthy`), answers with the home's
    auth string; False while it does not (yet). ConfigError at once when the auth file is missing, damaged (set
    aside) or not the server's: waiting cannot mend that (it hung 181 s, issue 50), a new server can."""
    fix = "`microstock server stop` (--force while a command uses it), then the next command starts it anew"
    auth = auth_string(home)
    if auth is None:
        raise ConfigError(f"the workdir's Prefect server runs ({record.url}, pid {record.pid}) but its auth string "
                          f"file {auth_path(home)} is missing or damaged, so no command can use it: {fix}")
    try:
        return healthy(record.api_url, pid=record.pid, auth=auth)
    except AuthRefused:
        raise ConfigError(f"the workdir's Prefect server ({record.url}, pid {record.pid}) refuses the auth string "
                          f"in {auth_path(home)} (the file changed since the server started): {fix}") from None


def touch(home: Path) -> None:
    """Mark the server as used now (a missing record is left missing)."""
    try:
        os.utime(record_path(home))
    except OSError:
        pass


def _port_for(home: Path, asked: int | None) -> int:
    """The port a new server takes: the one asked for (ConfigError when busy), else the last one, else 4200,
    else a free one; a last port still held by the server that just died is waited for a little."""
    if asked is not None:
        refuse_busy_port(asked)
        return asked
    kept = last_port(home)
    if kept:
        deadline = time.monotonic() + PORT_RELEASE_S
        while port_in_use(kept) and time.monotonic() < deadline:
            time.sleep(0.25)
        if not port_in_use(kept):
            return kept
        log.warning("port %d, where this workdir's server ran before, is taken by another program: the UI "
                    "moves to a new port (addresses printed before do not open)", kept)
    return DEFAULT_PORT if not kept and unheld(DEFAULT_PORT) else free_port()


def ensure(home: Path, port: int | None = None, *, startup_timeout_s: float = 180.0) -> tuple[ServerRecord, bool]:
    """The workdir's running server, started if needed: ``(record, started_now)``.

    ``port``: the port a new server must take (ConfigError when it is busy); by default the kept one
    (:func:`_port_for`). A running server is used whatever its port, and never killed: one that does not
    answer within ``startup_timeout_s`` is a ConfigError saying so, left running. ConfigError with the log's
    last lines when a new server does not start.
    """
    for note in check_home(home):
        log.warning(note)
    with locked(home):
        record = _current(home)
        if record:
            deadline = time.monotonic() + startup_timeout_s
            while not _answers(home, record):
                if not is_keeper(record.pid, home):
                    break  # it died while we waited: start a new one below
                if time.monotonic() > deadline:
                    raise ConfigError(
                        f"the workdir's Prefect server (pid {record.pid}, {record.url}) has not answered for "
                        f"{startup_timeout_s:.0f} s (a busy machine?); it was left running: try again, or "
                        f"`microstock server stop --force` to restart it (log {log_path(home)})")
                time.sleep(0.5)
            else:
                touch(home)
                return record, False
            record_path(home).unlink(missing_ok=True)
        stopped_path(home).unlink(missing_ok=True)  # a command asks for a server again
        make_private(home)
        ensure_auth(home)
        chosen = _port_for(home, port)
        log_start = _log_size(home)
        try:
            return _start(home, chosen, startup_timeout_s), True
        except ConfigError:
            if port is not None or not _lost_the_port(home, log_start):
                raise
        # Another program took the port between the check and the server's bind (two workdirs' servers starting
        # at once both found 4200 free): once more on a free port, saying so.
        moved = free_port()
        log.warning("port %d was taken while this workdir's server started: it starts on port %d instead",
                    chosen, moved)
        return _start(home, moved, startup_timeout_s), True


def _log_size(home: Path) -> int:
    try:
        return log_path(home).stat().st_size
    except OSError:
        return 0


def _lost_the_port(home: Path, since: int) -> bool:
    """True when the server's log, from byte ``since``, says its port was taken: another program had it (the
    other one may be gone again by now, so the port's state cannot say)."""
    try:
        with open(log_path(home), "rb") as log:
            log.seek(since)
            return b"already in use" in log.read()  # uvicorn's bind error, or the keeper's own check
    except OSError:
        return False


def _start(home: Path, port: int, startup_timeout_s: float) -> ServerRecord:
    """With the lock held: start the keeper on ``port`` and return its record once its server answers as this
    home's (its auth string); ConfigError, and nothing left running, when it does not."""
    idle_s = idle_seconds()
    with open(log_path(home), "ab") as out:
        # In its home with its data's settings pinned there: nothing of the folder the command started in is
        # read (a prefect.toml there moved the database, issue 50).
        proc = subprocess.Popen([sys.executable, "-m", KEEPER, str(home), str(port), str(idle_s)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                start_new_session=True, close_fds=True,
                                env=pin(server_environment(dict(os.environ)), home))
    record = ServerRecord(pid=proc.pid, port=port, idle_s=idle_s,
                          started=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    write_record(home, record)
    remember(home)
    try:
        wait_healthy(proc, record.api_url, log_path(home), startup_timeout_s, "the workdir's Prefect server",
                     auth_string(home))
    except BaseException:  # also Ctrl-C / SIGTERM while it starts: no half-started server is left behind
        proc.kill()  # its server child follows (PR_SET_PDEATHSIG), even before the keeper's name is in /proc
        proc.wait()
        _stop_keeper(home)
        raise
    return record


def attach(home: Path, record: ServerRecord) -> None:
    """Use ``record``'s server for the rest of this process: the client's environment set, this process
    registered as a user, its port held (:func:`server_port.hold`: no other user takes it while the server is
    down), and a thread that brings the server back on that port if it dies meanwhile."""
    server_users.register(home)
    hold(record.port)
    touch(home)
    os.environ.update(client_env(home, record))
    threading.Thread(target=_watch, args=(home, record), name="workdir-server-watch", daemon=True).start()


def _watch(home: Path, record: ServerRecord) -> None:
    while True:
        time.sleep(WATCH_S)
        if is_keeper(record.pid, home):
            continue
        if stopped_path(home).exists():
            _give_up("the workdir's Prefect server was stopped (`microstock server stop --force`)")
        log.warning("the workdir's Prefect server (pid %d, %s) is gone: bringing it back on port %d",
                    record.pid, record.url, record.port)
        try:
            back, _ = ensure(home)  # on the kept port: this one
        except ConfigError as exc:
            _give_up(f"the workdir's Prefect server went away and could not be brought back ({exc.message})")
        if back.port != record.port:
            _give_up(f"the workdir's Prefect server went away and came back on another port ({back.url}: "
                     f"{record.port} was taken), which this command cannot follow")
        log.warning("the workdir's Prefect server is back on %s", back.url)
        record = back


def _give_up(why: str) -> NoReturn:
    """End this command now with one line: its server is gone for good.

    Why a hard exit: without its server, Prefect's client fails each call only after about a minute of
    retries, and at exit its events worker tries every queued event again, about 7 s each — a run that lost its
    server mid-describe ended after 43 minutes (issue 34; 9.5 minutes here with the port taken). Nothing of
    ours is lost by it: an upload counts only once the ledger has it, a file cut off mid-transfer is decided
    by its remote size on the next run (the same as the kill tests), the dead-letter store commits each write;
    the run's record is marked Crashed when the server comes back (:func:`server_keeper.crash_orphans`)."""
    sys.stdout.flush()
    sys.stderr.write(f"error: {why}. The run stopped here; nothing is lost (what was uploaded is in the ledger). "
                     "Run the same command again to finish it: it brings the server back.\n")
    sys.stderr.flush()
    os._exit(1)


def stop(home: Path, *, force: bool = False, timeout_s: float = 30.0) -> ServerRecord | None:
    """Stop the workdir's server and remove its record; the record it had when it was running, else None.
    ConfigError naming the commands that use it, unless ``force``."""
    check_home(home)
    with locked(home):
        users = server_users.live(home, but_me=True)
        if users and _current(home) and not force:
            raise ConfigError(f"the workdir's server for {home} is in use by {server_users.describe(users)}: it "
                              "stops by itself once they end and it has been idle; `microstock server stop "
                              "--force` stops it now (they then stop too, each with how to go on)")
        if users:  # forced: their watch threads end them with one line instead of bringing the server back
            stopped_path(home).write_text(f"{os.getpid()}\n", encoding="utf-8")
        return _stop_keeper(home, timeout_s)


def _stop_keeper(home: Path, timeout_s: float = 30.0) -> ServerRecord | None:
    """With the lock held: SIGTERM this home's keeper (SIGKILL after ``timeout_s``), drop the record. A pid
    that is not this home's keeper is never signalled."""
    record = _current(home)
    if record is None:
        return None
    try:
        os.kill(record.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # gone, and its pid another user's by now
        pass
    deadline = time.monotonic() + timeout_s
    while is_keeper(record.pid, home) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_keeper(record.pid, home):
        try:
            os.killpg(record.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # it exited between the check and the kill
            pass
    record_path(home).unlink(missing_ok=True)
    return record


@dataclass(frozen=True)
class Listed:
    """A workdir server of this user's: its home, its record when it runs (else the port it last had), the
    memory its keeper and server hold (resident, MB), the commands using it."""

    home: Path
    record: ServerRecord | None
    port: int | None
    memory_mb: float
    users: list[server_users.User]


def _memory_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the keeper and its server), in MB."""
    total = 0
    for who in family(pid):
        try:
            for line in Path(f"/proc/{who}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def servers() -> list[Listed]:
    """This user's workdir servers (every home one ever started in), running (its auth file damaged too) or not."""
    out = []
    for home in known_homes():
        try:
            record = running(home)
        except ConfigError:  # it runs, its auth file damaged: `server status` there says how on
            record = read_record(home)
        out.append(Listed(home, record, record.port if record else last_port(home),
                          _memory_mb(record.pid) if record else 0.0, server_users.live(home)))
    return out
