"""The dead-letter store in one SQLite file: ``<workdir>/dead_letter.db`` (the default backend).

The SQL is plain (``INSERT … ON CONFLICT … DO UPDATE``, ``UPDATE … WHERE``
guards for claims); only connecting, WAL and the write lock (``BEGIN
IMMEDIATE``) are SQLite's.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.core.errors import StoreUnavailable
from tasks.core.secrets import redact
from tasks.core.settings import load_settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter import CLAIM_TIMEOUT_S, DeadLetterStore, ParkedJob, Summary
from tasks.stores.dead_letter_postgres import PostgresDeadLetterStore

#: Override the workdir's ``dead_letter_url`` and ``account`` settings (set per deployment by
#: ``microstock accounts deploy``).
DEAD_LETTER_URL_ENV = "MICROSTOCK_DEAD_LETTER_URL"
ACCOUNT_ENV = "MICROSTOCK_ACCOUNT"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dead_letter (
    job_id        TEXT PRIMARY KEY,
    payload_json  TEXT NOT NULL,
    model         TEXT NOT NULL,
    error_class   TEXT NOT NULL,
    error_message TEXT NOT NULL,
    attempts      INTEGER NOT NULL,
    first_seen    INTEGER NOT NULL,
    last_seen     INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'parked'
)
"""
#: Added to the original design's table; also added to a table created by it.
_EXTRA_COLUMNS = {"asset_name": "TEXT NOT NULL DEFAULT ''", "task_run_id": "TEXT", "claimed_by": "TEXT", "claimed_at": "INTEGER"}
_INDEX = "CREATE INDEX IF NOT EXISTS dead_letter_status ON dead_letter (status, last_seen)"


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class SQLiteDeadLetterStore(DeadLetterStore):
    """The store in one SQLite file (WAL mode, busy timeout), one short connection per call.

    A connection per call keeps the store safe across threads and forked
    processes; every write is one transaction that takes the write lock up
    front (``BEGIN IMMEDIATE``), so concurrent writers queue for up to
    ``busy_timeout_s`` instead of failing halfway.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        with self._write() as con:
            con.execute(_SCHEMA)
            have = {row[1] for row in con.execute("PRAGMA table_info(dead_letter)")}
            for name, decl in _EXTRA_COLUMNS.items():
                if name not in have:
                    con.execute(f"ALTER TABLE dead_letter ADD COLUMN {name} {decl}")
            con.execute(_INDEX)

    # --- connections --------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            con = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        try:
            con.row_factory = sqlite3.Row
            if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            yield con
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreUnavailable(
                f"{self.path}: the dead-letter store is locked by another process "
                f"(waited {self.busy_timeout_s:g} s); the affected jobs stay pending for the next run"
            )
        return StoreUnavailable(f"{self.path}: cannot use the dead-letter store: {text}")

    @staticmethod
    def _row(row: sqlite3.Row) -> ParkedJob:
        values = dict(row)
        payload = json.loads(values.pop("payload_json"))
        return ParkedJob(payload=payload, **values)

    # --- the interface ------------------------------------------------------------

    def park(self, job_id, *, payload, model, error_class, error_message, attempts, asset_name="", task_run_id=None):
        now = int(time.time())
        payload_json = redact(json.dumps(payload, sort_keys=True, ensure_ascii=False))
        with self._write() as con:
            con.execute(
                """
                INSERT INTO dead_letter (job_id, payload_json, model, error_class, error_message, attempts,
                                         first_seen, last_seen, status, asset_name, task_run_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'parked', ?, ?)
                ON CONFLICT (job_id) DO UPDATE SET
                    payload_json = excluded.payload_json,
                    model = excluded.model,
                    error_class = excluded.error_class,
                    error_message = excluded.error_message,
                    attempts = dead_letter.attempts + excluded.attempts,
                    last_seen = excluded.last_seen,
                    status = 'parked',
                    asset_name = excluded.asset_name,
                    task_run_id = excluded.task_run_id
                """,
                (job_id, payload_json, model, error_class, redact(error_message), attempts,
                 now, now, asset_name, task_run_id),
            )
            row = con.execute("SELECT * FROM dead_letter WHERE job_id = ?", (job_id,)).fetchone()
        return self._row(row)

    def get(self, job_id):
        with self._connect() as con:
            row = con.execute("SELECT * FROM dead_letter WHERE job_id = ?", (job_id,)).fetchone()
        return self._row(row) if row else None

    def list(self, *, status=None, error_class=None, limit=None):
        sql, args = "SELECT * FROM dead_letter WHERE 1 = 1", []
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        if error_class:
            sql += " AND error_class LIKE ? ESCAPE '\\'"
            args.append(_like_prefix(error_class))
        sql += " ORDER BY last_seen, job_id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._connect() as con:
            return [self._row(r) for r in con.execute(sql, args)]

    def claim(self, claimant, *, limit, error_class=None):
        now = int(time.time())
        sql = (
            "SELECT job_id FROM dead_letter WHERE status = 'parked'"
            " AND (claimed_by IS NULL OR claimed_at < ?)"
        )
        args: list[Any] = [now - CLAIM_TIMEOUT_S]
        if error_class:
            sql += " AND error_class LIKE ? ESCAPE '\\'"
            args.append(_like_prefix(error_class))
        sql += " ORDER BY last_seen, job_id LIMIT ?"
        args.append(limit)
        with self._write() as con:
            ids = [r[0] for r in con.execute(sql, args)]
            for job_id in ids:
                con.execute("UPDATE dead_letter SET claimed_by = ?, claimed_at = ? WHERE job_id = ?", (claimant, now, job_id))
            rows = [con.execute("SELECT * FROM dead_letter WHERE job_id = ?", (j,)).fetchone() for j in ids]
        return [self._row(r) for r in rows]

    def mark_recovered(self, job_id, claimant):
        with self._write() as con:
            cur = con.execute(
                "UPDATE dead_letter SET status = 'recovered', last_seen = ?, claimed_by = NULL, claimed_at = NULL"
                " WHERE job_id = ? AND claimed_by = ?",
                (int(time.time()), job_id, claimant),
            )
        return cur.rowcount == 1

    def release(self, job_id, claimant, *, error_message=None):
        with self._write() as con:
            if error_message is None:
                cur = con.execute(
                    "UPDATE dead_letter SET claimed_by = NULL, claimed_at = NULL WHERE job_id = ? AND claimed_by = ?",
                    (job_id, claimant),
                )
            else:
                cur = con.execute(
                    "UPDATE dead_letter SET claimed_by = NULL, claimed_at = NULL, error_message = ?, last_seen = ?"
                    " WHERE job_id = ? AND claimed_by = ?",
                    (redact(error_message), int(time.time()), job_id, claimant),
                )
        return cur.rowcount == 1

    def summary(self):
        with self._connect() as con:
            rows = con.execute(
                "SELECT error_class, COUNT(*) AS n FROM dead_letter WHERE status = 'parked'"
                " GROUP BY error_class ORDER BY n DESC, error_class"
            ).fetchall()
            oldest = con.execute("SELECT MIN(first_seen) FROM dead_letter WHERE status = 'parked'").fetchone()[0]
        return Summary(by_class=[(r[0], r[1]) for r in rows], oldest_first_seen=oldest)


def open_store(wd: Workdir, *, busy_timeout_s: float = 10.0) -> DeadLetterStore:
    """The workdir's store: SQLite at ``<workdir>/dead_letter.db`` (created on first use), unless a
    ``dead_letter_url`` is set ($MICROSTOCK_DEAD_LETTER_URL, else the workdir's microstock.toml): then the
    account's view of the shared PostgreSQL store ($MICROSTOCK_ACCOUNT, else the ``account`` setting)."""
    url, account = os.environ.get(DEAD_LETTER_URL_ENV, ""), os.environ.get(ACCOUNT_ENV, "")
    if not url or not account:
        settings = load_settings(wd.config_file)
        url, account = url or settings.dead_letter_url, account or settings.account
    if url:
        return PostgresDeadLetterStore(url, account)
    return SQLiteDeadLetterStore(wd.dead_letter_db, busy_timeout_s=busy_timeout_s)
