"""A real PostgreSQL for the tests: started once per session on a free loopback port, stopped at the end.

Its data lives in a fresh folder under /tmp (the ``postgres`` user, which
PostgreSQL runs as when the tests run as root, cannot enter pytest's 0700
``tmp_path``); the superuser's password is generated here and stays in
memory. Without PostgreSQL's programs or the psycopg driver the tests that
need it are skipped with the reason — unless ``MICROSTOCK_REQUIRE_POSTGRES=1``
(set by CI), where that is a failure: CI must never skip them silently.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.postgres import Postgres, find_bin_dir, generate_password
from tasks.orchestration.local_server import free_port


def _missing() -> str | None:
    if find_bin_dir() is None:
        return "PostgreSQL's server programs (initdb, pg_ctl) are not installed: run `make postgres`"
    if importlib.util.find_spec("psycopg") is None:
        return "the psycopg driver is not installed: pip install -e '.[test,cluster]'"
    return None


def require_postgres() -> None:
    """Skip the test, with the reason, when PostgreSQL cannot run here; fail instead under CI."""
    reason = _missing()
    if reason:
        if os.environ.get("MICROSTOCK_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"MICROSTOCK_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)


def start_postgres() -> Iterator[Postgres]:
    """A started server (after :func:`require_postgres`), stopped and its data removed after."""
    require_postgres()
    home = Path(tempfile.mkdtemp(prefix="microstock-pg-"))
    server = Postgres(home, free_port(), generate_password())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    yield from start_postgres()
