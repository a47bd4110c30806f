"""The dead-letter store on PostgreSQL: one table for every account of a studio.

Chosen by a ``dead_letter_url`` (``postgresql+psycopg://user@host:port/db``)
in the settings or ``$MICROSTOCK_DEAD_LETTER_URL``; see
:func:`tasks.stores.dead_letter_sqlite.open_store`. The password is not
in the URL: libpq reads it from ``~/.pgpass``, ``$PGPASSFILE`` or
``$PGPASSWORD`` (messages show the URL with any password hidden).

The table is SQLite's plus ``account``: a job is ``(account, job_id)``, so
the same image in two accounts is two jobs. A store object is one account's
view; :meth:`SharedDeadLetters.summaries` reads them all.
Claims take rows with ``FOR UPDATE SKIP LOCKED``, so concurrent replays on
any number of machines never share a job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import URL, Connection, create_engine, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from tasks.core.errors import ConfigError, StoreUnavailable
from tasks.core.secrets import redact
from tasks.stores.dead_letter import CLAIM_TIMEOUT_S, DeadLetterStore, ParkedJob, Summary

_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS dead_letter (
        account       TEXT NOT NULL,
        job_id        TEXT NOT NULL,
        payload_json  TEXT NOT NULL,
        model         TEXT NOT NULL,
        error_class   TEXT NOT NULL,
        error_message TEXT NOT NULL,
        attempts      INTEGER NOT NULL,
        first_seen    BIGINT NOT NULL,
        last_seen     BIGINT NOT NULL,
        status        TEXT NOT NULL DEFAULT 'parked',
        asset_name    TEXT NOT NULL DEFAULT '',
        task_run_id   TEXT,
        claimed_by    TEXT,
        claimed_at    BIGINT,
        PRIMARY KEY (account, job_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS dead_letter_status ON dead_letter (account, status, last_seen)",
]
#: Serialises schema creation: two processes creating the table at once would race in the catalog.
_SCHEMA_LOCK = 0x6D73_646C  # "msdl"
_COLUMNS = ("job_id, payload_json, model, error_class, error_message, attempts, first_seen, last_seen, status, "
            "asset_name, task_run_id, claimed_by, claimed_at")


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def parse_url(url: str | URL) -> URL:
    """The URL as SQLAlchemy's; ConfigError unless it is ``postgresql+psycopg://…`` (the driver this store uses)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError("dead_letter_url: not a database URL (expected postgresql+psycopg://user@host:port/db)") from None
    if parsed.drivername != "postgresql+psycopg":
        raise ConfigError(f"dead_letter_url: {parsed.drivername!r} is not supported "
                          "(expected postgresql+psycopg://user@host:port/db)")
    return parsed


class SharedDeadLetters:
    """The shared database itself: connections (one short one per call), the table, and what spans accounts.

    A connection per call (no pool) keeps it safe across threads and forked
    processes, as SQLite's store is. Raises ConfigError for an unusable URL
    or a missing driver (``pip install 'prefect-microstock[cluster]'``),
    StoreUnavailable when the server cannot be reached or refuses the login.
    """

    def __init__(self, url: str | URL, *, account: str | None = None, connect_timeout_s: int = 10) -> None:
        self.url = parse_url(url)
        #: Only for messages: the account a store works for.
        self.account = account
        try:
            self._engine = create_engine(self.url, poolclass=NullPool,
                                         connect_args={"connect_timeout": connect_timeout_s})
        except (ImportError, NoSuchModuleError):
            raise ConfigError("dead_letter_url needs the psycopg driver: pip install 'prefect-microstock[cluster]'") from None
        with self.write() as con:
            con.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            for statement in _SCHEMA:
                con.execute(text(statement))

    @property
    def name(self) -> str:
        """The database's address without a password (and the account), for messages."""
        where = self.url.render_as_string(hide_password=True)
        return where if self.account is None else f"{where} (account {self.account})"

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as con:
                yield con
        except DBAPIError as exc:
            raise self._unavailable(exc) from None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction, committed when the block ends without an exception."""
        try:
            with self._engine.begin() as con:
                yield con
        except DBAPIError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: DBAPIError) -> StoreUnavailable:
        reason = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__
        if self.url.password:
            reason = reason.replace(self.url.password, "***")
        return StoreUnavailable(f"{self.name}: cannot use the dead-letter store: {redact(reason)}")

    def summaries(self, account: str | None = None) -> dict[str, Summary]:
        """Parked jobs per account (only ``account`` when given), by name; accounts with none are left out."""
        where = "status = 'parked'" + ("" if account is None else " AND account = :a")
        with self.connect() as con:
            rows = con.execute(text(
                f"SELECT account, error_class, COUNT(*) AS n, MIN(first_seen) AS oldest FROM dead_letter WHERE {where}"
                " GROUP BY account, error_class ORDER BY account, n DESC, error_class"), {"a": account}).all()
        out: dict[str, Summary] = {}
        for name, error_class, n, oldest in rows:
            before = out.get(name, Summary())
            first = oldest if before.oldest_first_seen is None else min(before.oldest_first_seen, oldest)
            out[name] = Summary(by_class=[*before.by_class, (error_class, n)], oldest_first_seen=first)
        return out


class PostgresDeadLetterStore(DeadLetterStore):
    """One account's dead letters in the shared table (:class:`SharedDeadLetters`)."""

    def __init__(self, url: str | URL, account: str, *, connect_timeout_s: int = 10) -> None:
        if not account:
            raise ConfigError("the PostgreSQL dead-letter store needs an account name (setting `account` "
                              "or $MICROSTOCK_ACCOUNT)")
        self.account = account
        self.db = SharedDeadLetters(url, account=account, connect_timeout_s=connect_timeout_s)
        self.url = self.db.url
        self._connect, self._write = self.db.connect, self.db.write

    @staticmethod
    def _row(row: Any) -> ParkedJob:
        values = dict(row._mapping)
        payload = json.loads(values.pop("payload_json"))
        return ParkedJob(payload=payload, **values)

    def _select_one(self, con: Connection, job_id: str) -> Any:
        return con.execute(text(f"SELECT {_COLUMNS} FROM dead_letter WHERE account = :a AND job_id = :j"),
                           {"a": self.account, "j": job_id}).first()

    # --- the interface ------------------------------------------------------------

    def park(self, job_id, *, payload, model, error_class, error_message, attempts, asset_name="", task_run_id=None):
        now = int(time.time())
        params = {"a": self.account, "j": job_id, "p": redact(json.dumps(payload, sort_keys=True, ensure_ascii=False)),
                  "m": model, "c": error_class, "e": redact(error_message), "n": attempts, "now": now,
                  "name": asset_name, "t": task_run_id}
        with self._write() as con:
            con.execute(text(
                """
                INSERT INTO dead_letter (account, job_id, payload_json, model, error_class, error_message, attempts,
                                         first_seen, last_seen, status, asset_name, task_run_id)
                VALUES (:a, :j, :p, :m, :c, :e, :n, :now, :now, 'parked', :name, :t)
                ON CONFLICT (account, job_id) DO UPDATE SET
                    payload_json = excluded.payload_json,
                    model = excluded.model,
                    error_class = excluded.error_class,
                    error_message = excluded.error_message,
                    attempts = dead_letter.attempts + excluded.attempts,
                    last_seen = excluded.last_seen,
                    status = 'parked',
                    asset_name = excluded.asset_name,
                    task_run_id = excluded.task_run_id
                """), params)
            row = self._select_one(con, job_id)
        return self._row(row)

    def get(self, job_id):
        with self._connect() as con:
            row = self._select_one(con, job_id)
        return self._row(row) if row else None

    def list(self, *, status=None, error_class=None, limit=None):
        sql, args = f"SELECT {_COLUMNS} FROM dead_letter WHERE account = :a", {"a": self.account}
        if status is not None:
            sql += " AND status = :s"
            args["s"] = status
        if error_class:
            sql += " AND error_class LIKE :c ESCAPE '\\'"
            args["c"] = _like_prefix(error_class)
        sql += " ORDER BY last_seen, job_id"
        if limit is not None:
            sql += " LIMIT :limit"
            args["limit"] = limit
        with self._connect() as con:
            return [self._row(r) for r in con.execute(text(sql), args)]

    def claim(self, claimant, *, limit, error_class=None):
        now = int(time.time())
        where = "account = :a AND status = 'parked' AND (claimed_by IS NULL OR claimed_at < :stale)"
        args: dict[str, Any] = {"a": self.account, "stale": now - CLAIM_TIMEOUT_S, "limit": limit,
                                "who": claimant, "now": now}
        if error_class:
            where += " AND error_class LIKE :c ESCAPE '\\'"
            args["c"] = _like_prefix(error_class)
        with self._write() as con:
            rows = con.execute(text(
                # MATERIALIZED: picked once; a plan that re-ran the subquery per row could take more than limit.
                f"""
                WITH picked AS MATERIALIZED (
                    SELECT job_id FROM dead_letter WHERE {where}
                    ORDER BY last_seen, job_id LIMIT :limit FOR UPDATE SKIP LOCKED)
                UPDATE dead_letter SET claimed_by = :who, claimed_at = :now
                FROM picked WHERE dead_letter.account = :a AND dead_letter.job_id = picked.job_id
                RETURNING {", ".join("dead_letter." + c.strip() for c in _COLUMNS.split(","))}
                """), args).all()
        return sorted((self._row(r) for r in rows), key=lambda j: (j.last_seen, j.job_id))

    def mark_recovered(self, job_id, claimant):
        with self._write() as con:
            result = con.execute(text(
                "UPDATE dead_letter SET status = 'recovered', last_seen = :now, claimed_by = NULL, claimed_at = NULL"
                " WHERE account = :a AND job_id = :j AND claimed_by = :who"),
                {"now": int(time.time()), "a": self.account, "j": job_id, "who": claimant})
        return result.rowcount == 1

    def release(self, job_id, claimant, *, error_message=None):
        args = {"a": self.account, "j": job_id, "who": claimant}
        if error_message is None:
            sql = "UPDATE dead_letter SET claimed_by = NULL, claimed_at = NULL"
        else:
            sql = "UPDATE dead_letter SET claimed_by = NULL, claimed_at = NULL, error_message = :e, last_seen = :now"
            args.update(e=redact(error_message), now=int(time.time()))
        with self._write() as con:
            result = con.execute(text(sql + " WHERE account = :a AND job_id = :j AND claimed_by = :who"), args)
        return result.rowcount == 1

    def summary(self):
        return self.db.summaries(self.account).get(self.account, Summary())
