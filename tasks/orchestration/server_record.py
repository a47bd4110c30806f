"""The workdir server's files in its Prefect home, each read defended, and the user's list of workdir servers.

In ``<PREFECT_HOME>`` (mode 0700, files 0600):

- ``server.json``: the running server's record (:class:`ServerRecord`), gone when it stops;
- ``server.port``: the port it last ran on, kept, so that a server brought back takes the same address (the
  addresses a run printed open again);
- ``server.auth``: the auth string (the UI's login), made once;
- ``server.lock``: the lock one command at a time starts or stops the server under;
- ``server.stopped``: a forced stop's word to the commands that used it (they end, not restart it);
- ``server.log``: the keeper's and the server's output; ``users/``: :mod:`server_users`.

Damage costs one line, never a second server on one database: a record that is
not JSON, has wrong fields or types, or is a folder is set aside
(``server.json.damaged-<UTC>``, never deleted) and the live keeper, if one
runs, is found from the process table instead (:func:`find_keeper`); a folder
where the lock, port or auth file belongs is set aside the same way; a home
that cannot be written is a :class:`ConfigError` naming it and the fix.

The user's workdir servers (``server list``, ``server stop --all``) are the
homes listed in ``$XDG_STATE_HOME/microstock/servers`` (default
``~/.local/state``), one a line, added when a server first starts there.

Nothing here imports Prefect.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.core.errors import ConfigError
from tasks.core.files import check_writable
from tasks.core.state_files import read_file, set_aside
from tasks.orchestration.local_server import AUTH_SHAPE, HOST, new_auth_string
from tasks.orchestration.server_proof import own_process

#: The keeper's module, as it appears on its command line (how a live keeper is told from a reused pid).
KEEPER = "tasks.orchestration.server_keeper"


class ServerRecord(BaseModel):
    """What ``server.json`` says: the keeper's pid, the server's port, when it started, its idle limit."""

    model_config = ConfigDict(frozen=True, strict=True)

    pid: int = Field(gt=0)
    port: int = Field(gt=0, lt=65536)
    started: str
    idle_s: float = Field(gt=0)

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


def port_path(home: Path) -> Path:
    return home / "server.port"


def lock_path(home: Path) -> Path:
    return home / "server.lock"


def stopped_path(home: Path) -> Path:
    """Written by a forced ``server stop`` under running commands: they end instead of bringing it back."""
    return home / "server.stopped"


def _not_a_file(path: Path) -> bool:
    return path.exists() and not path.is_file()


def check_home(home: Path) -> list[str]:
    """Make the home usable for a server: created 0700, folders where a file belongs set aside; one line for
    each thing set aside (said by the command). ConfigError naming the home and the fix when it cannot be
    written."""
    notes = []
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path in (record_path(home), lock_path(home), port_path(home), auth_path(home), log_path(home)):
            if _not_a_file(path):
                try:
                    notes.append(f"{path} was not a file: set aside as {set_aside(path).name}")
                except FileNotFoundError:  # another command starting at the same moment set it aside first
                    pass
        check_writable(home)  # each command its own probe: one shared name failed the slower one's removal
    except OSError as exc:
        raise ConfigError(f"the workdir's Prefect home {home} cannot be written ({exc.strerror or exc}): make it "
                          f"writable for you (chmod u+rwx {home}) or point PREFECT_HOME elsewhere") from exc
    return notes


def make_private(home: Path) -> None:
    """The home 0700 and what is in it 0600: the database holds the Secret blocks' encryption key (a home made
    before the server required this is closed on the next start)."""
    os.chmod(home, 0o700)
    for path in home.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)


def _auth(raw: bytes) -> str:
    text = raw.decode("utf-8").strip()
    if not AUTH_SHAPE.fullmatch(text):  # never the text itself in the message: it is the secret, or most of it
        raise ValueError(f"not `microstock:` and 32 URL-safe characters ({len(text)} characters)")
    return text


def auth_string(home: Path) -> str | None:
    """The workdir server's auth string; None before a server was first started, or when the file is damaged
    (cut short, a bad byte, a folder: set aside as ``server.auth.damaged-<UTC>`` with one warning, read
    defended as every state file is)."""
    return read_file(auth_path(home), _auth, "a new one is made when the workdir's server next starts (the "
                                             "UI's login then asks for the new one)")


def ensure_auth(home: Path) -> None:
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


def read_record(home: Path) -> ServerRecord | None:
    """The record, None when there is none; a damaged one is set aside and reads as none."""
    path = record_path(home)
    try:
        return ServerRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError):
        try:
            set_aside(path)
        except OSError:
            pass
        return None


def write_record(home: Path, record: ServerRecord) -> None:
    tmp = record_path(home).with_suffix(".tmp")
    tmp.write_text(record.model_dump_json(), encoding="utf-8")
    os.replace(tmp, record_path(home))
    port_path(home).write_text(f"{record.port}\n", encoding="utf-8")


def last_port(home: Path) -> int | None:
    """The port the server last ran on (None when never, or the file is damaged)."""
    try:
        port = int(port_path(home).read_text(encoding="utf-8").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return port if 0 < port < 65536 else None


def _keeper_args(pid: int) -> list[str] | None:
    """The command line of ``pid`` when it is a process of this user's, else None: another user's process is
    never a keeper, whatever its command line says (issue 50: one named itself this home's keeper to be sent
    the auth string)."""
    if not own_process(pid):
        return None
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return None


def is_keeper(pid: int, home: Path) -> bool:
    """True when ``pid`` is alive, this user's, and the keeper of ``home`` (not a process that reused the
    pid)."""
    args = _keeper_args(pid)
    return bool(args) and KEEPER in args and str(home) in args


def find_keeper(home: Path) -> ServerRecord | None:
    """The record of a keeper of ``home`` found among this user's processes (its command line is
    ``python -m KEEPER HOME PORT IDLE_S``): how a lost or damaged record is rebuilt rather than a second server
    started on the same database."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = _keeper_args(int(entry.name))
        if not args or KEEPER not in args:
            continue
        at = args.index(KEEPER)
        try:
            if args[at + 1] != str(home):
                continue
            started = datetime.fromtimestamp(entry.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
            return ServerRecord(pid=int(entry.name), port=int(args[at + 2]), started=started,
                                idle_s=float(args[at + 3]))
        except (IndexError, ValueError, ValidationError, OSError):
            continue
    return None


@contextmanager
def locked(home: Path) -> Iterator[None]:
    """The workdir's server lock: one command at a time starts or stops its server (the keeper too, when it
    finds itself idle)."""
    with open(lock_path(home), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def servers_list_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "microstock" / "servers"


def remember(home: Path) -> None:
    """Add ``home`` to the user's list of workdir servers (once)."""
    path = servers_list_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(path, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            if str(home) not in fh.read().splitlines():
                fh.write(f"{home}\n")
    except (OSError, UnicodeDecodeError):  # the list only informs `server list`: never stops a command
        pass


def known_homes() -> list[Path]:
    """The homes in the user's list that still exist (a damaged line is skipped)."""
    try:
        lines = servers_list_path().read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    homes = [Path(line) for line in dict.fromkeys(lines) if line.startswith("/")]
    return [h for h in homes if h.is_dir()]
