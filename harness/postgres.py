"""A PostgreSQL of its own: ``initdb`` and ``pg_ctl`` of the OS's PostgreSQL, loopback only.

For ``microstock cluster up`` (the Prefect server's database and the shared
dead-letter store) and for the tests that need a real PostgreSQL. The data
directory is created with ``initdb`` the first time; the superuser
``microstock`` gets a generated password (``--pwfile``, the file removed at
once) and every TCP login needs it (``scram-sha-256``); the server listens on
``127.0.0.1:<port>`` and on no Unix socket.

PostgreSQL refuses to run as root: when this process is root, every
PostgreSQL program runs as the ``postgres`` user the OS package creates, and
the data directory is handed to it. The password is never on a command
line, in a log or in a committed file: callers keep it in memory or in a
file of mode 0600 (:mod:`harness.cluster`).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from sqlalchemy import URL, create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from tasks.core.errors import ConfigError

HOST = "127.0.0.1"
SUPERUSER = "microstock"
#: Where Debian's (and Ubuntu's) postgresql packages put initdb, pg_ctl and postgres.
DEBIAN_BIN = Path("/usr/lib/postgresql")
OS_USER = "postgres"


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb``, else the folder of ``initdb`` on PATH."""
    versions = sorted((p for p in DEBIAN_BIN.glob("*/bin") if (p / "initdb").is_file()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def generate_password() -> str:
    """A password for a role: 32 URL-safe random characters."""
    return secrets.token_urlsafe(24)


def _run_as() -> dict:
    """``subprocess`` arguments that drop root to the ``postgres`` user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam(OS_USER)
    except KeyError:
        raise ConfigError("PostgreSQL refuses to run as root and there is no 'postgres' user: "
                          "install the OS package (apt-get install postgresql) or run as another user") from None
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


class Postgres:
    """One PostgreSQL server with its data in ``<home>/data`` and its log in ``<home>/postgres.log``.

    ``home`` must be reachable by the ``postgres`` user when running as root
    (a folder under /tmp is; a pytest ``tmp_path`` is not: it is mode 0700).
    """

    def __init__(self, home: Path, port: int, password: str, *, bin_dir: Path | None = None) -> None:
        self.home = Path(home)
        self.port = port
        self.password = password
        self.bin_dir = bin_dir or find_bin_dir()
        if self.bin_dir is None:
            raise ConfigError("PostgreSQL's server programs (initdb, pg_ctl) are not installed: "
                              "`make postgres` installs Debian's package (apt-get install postgresql)")

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / "postgres.log"

    def url(self, database: str, driver: str = "psycopg") -> URL:
        """A SQLAlchemy URL for ``database`` with the password (render it with ``hide_password``)."""
        return URL.create(f"postgresql+{driver}", username=SUPERUSER, password=self.password,
                          host=HOST, port=self.port, database=database)

    def login_url(self, database: str, driver: str = "psycopg") -> str:
        """A URL for ``database`` without the password: the login finds it in the ``PGPASSFILE`` of
        :meth:`write_pgpass`."""
        return f"postgresql+{driver}://{SUPERUSER}@{HOST}:{self.port}/{database}"

    def write_pgpass(self, path: Path) -> Path:
        """A libpq password file (mode 0600, written so) holding the superuser's password for this server; ``path``."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{HOST}:{self.port}:*:{SUPERUSER}:{self.password}\n")
        return Path(path)

    def prefect_server_env(self, pgpass: Path, database: str = "prefect") -> dict[str, str]:
        """What a ``prefect server start`` needs to keep its database here (``database`` created first)."""
        self.create_database(database)
        return {"PGPASSFILE": str(self.write_pgpass(pgpass)),
                "PREFECT_SERVER_DATABASE_CONNECTION_URL": self.login_url(database, "asyncpg")}

    def _run(self, *args: str) -> None:
        result = subprocess.run([str(self.bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=120, **_run_as())
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
            raise ConfigError(f"PostgreSQL {args[0]} failed (log {self.log_path}): {' | '.join(tail)}")

    def _give_home_to_postgres(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        run_as = _run_as()
        if run_as:
            closed = [p for p in self.home.resolve().parents if not os.stat(p).st_mode & 0o001]
            if closed:
                raise ConfigError(f"the postgres user cannot enter {closed[0]} "
                                  f"(mode {oct(os.stat(closed[0]).st_mode)[-3:]}):"
                                  f" put PostgreSQL's folder elsewhere, e.g. under /tmp")
            os.chown(self.home, run_as["user"], run_as["group"])
            for path in self.home.rglob("*"):
                os.chown(path, run_as["user"], run_as["group"], follow_symlinks=False)

    def init(self) -> None:
        """``initdb`` once: superuser ``microstock`` with the password, scram-sha-256 for every login."""
        if (self.data_dir / "PG_VERSION").is_file():
            return
        self._give_home_to_postgres()
        pwfile = self.home / "initdb.pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        run_as = _run_as()
        if run_as:
            os.chown(pwfile, run_as["user"], run_as["group"])
        try:
            self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, f"--pwfile={pwfile}",
                      "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8",
                      "--locale=C.UTF-8", "--no-instructions")
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self) -> None:
        """Initialise if needed and start; returns once PostgreSQL accepts connections."""
        self.init()
        self._give_home_to_postgres()
        options = f"-c listen_addresses={HOST} -c port={self.port} -c unix_socket_directories=''"
        self._run("pg_ctl", "start", "-D", str(self.data_dir), "-l", str(self.log_path), "-w", "-t", "60",
                  "-o", options)

    def stop(self) -> None:
        """``pg_ctl stop -m fast``; nothing when it is not running."""
        if (self.data_dir / "postmaster.pid").is_file():
            self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60")

    def create_database(self, name: str) -> None:
        """``CREATE DATABASE name`` unless it exists."""
        engine = create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as con:
                if con.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None:
                    con.execute(text(f'CREATE DATABASE "{name}"'))
        except DBAPIError as exc:
            raise ConfigError(f"PostgreSQL on {HOST}:{self.port}: cannot create database {name}: "
                              f"{str(exc.orig).strip().splitlines()[0]}") from None
        finally:
            engine.dispose()
