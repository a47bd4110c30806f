"""A Prefect home whose database is already made: what a server's first start leaves, without paying for it.

Each server started in a new home (a workdir server, or a command's ephemeral server) first runs Prefect's ~100
database migrations: ~4 s of CPU of the ~9 s a first start costs on this machine (`prefect server database upgrade
-y`: 7.4 s in an empty home, 3.5 s again once it is made; docs/BENCHMARKS.md, stop 51), and about twenty tests
start one in a new home. :func:`migrated_home` gives such a test a home holding a copy of a database migrated
once per test session, as every start after a contributor's first finds it. A test whose subject is the first
start itself (where the database is made) starts in an empty home instead.

The copy is Prefect's own: made by Prefect's own command with this venv's Prefect, in one file (SQLite's backup,
no ``-wal`` beside it), shared by the session's xdist workers under a lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tasks.orchestration.prefect_settings import home_settings

#: Where the session's copy is made: beside the session's temporary folders (``pytest-N/``, shared by its xdist
#: workers), set by tests/conftest.py; a lone call makes its own under the system's temporary folder.
SESSION_DIR = Path(tempfile.gettempdir())


def _template() -> Path:
    """The session's migrated database, made by the first caller (the others wait on the lock)."""
    made = SESSION_DIR / "migrated-prefect.db"
    with open(SESSION_DIR / "migrated-prefect.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            home = Path(tempfile.mkdtemp(prefix="migrating-", dir=SESSION_DIR))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env.update(home_settings(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
            subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                           check=True, capture_output=True, timeout=300)
            with sqlite3.connect(home / "prefect.db") as source, sqlite3.connect(made.with_suffix(".part")) as copy:
                source.backup(copy)
            made.with_suffix(".part").rename(made)
            shutil.rmtree(home, ignore_errors=True)
    return made


def migrated_home(home: Path) -> Path:
    """``home`` (made, mode 0700, as a command makes it) holding a copy of the session's migrated database
    (mode 0600); returns ``home``."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(_template(), home / "prefect.db")
    os.chmod(home / "prefect.db", 0o600)
    return home
