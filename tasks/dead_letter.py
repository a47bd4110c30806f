"""The dead-letter store: describe jobs that could not succeed, parked for replay.

One small interface, :class:`DeadLetterStore`, with every method's contract
in its docstring, and one backend, :class:`SQLiteDeadLetterStore`, at
``<workdir>/dead_letter.db``. Table ``dead_letter`` keeps the columns of the
original design (``job_id`` unique, ``payload_json``, ``model``,
``error_class``, ``error_message``, ``attempts``, ``first_seen``,
``last_seen`` in Unix seconds, ``status`` parked|recovered), so its queries
keep working, plus ``asset_name``, ``task_run_id`` (the Prefect task run that
parked the job last) and ``claimed_by`` / ``claimed_at`` (a replay holding the
job).

A job is an asset's describe call; its ``job_id`` is the asset's content hash.
``payload_json`` holds what a replay needs (asset name and hash, model,
prompt, the settings that matter) — never a key, never image bytes: the text
written here passes :func:`redact` first.

The SQL is plain (``INSERT … ON CONFLICT … DO UPDATE``, ``UPDATE … WHERE``
guards for claims), so a PostgreSQL backend could implement the same
interface with the same statements; only connecting, WAL and the write lock
(``BEGIN IMMEDIATE``) are SQLite's.
"""

from __future__ import annotations

import json
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tasks.config import gemini_api_key
from tasks.secrets import redact as redact_secrets
from tasks.failures import InvalidOutput, MicrostockError, StoreUnavailable, TransientError
from tasks.workdir import Workdir

Status = Literal["parked", "recovered"]

#: A replay that died keeps its claims; after this long another replay may take them.
CLAIM_TIMEOUT_S = 3600


@dataclass(frozen=True)
class ParkedJob:
    """One row of the store."""

    job_id: str
    payload: dict[str, Any]
    model: str
    error_class: str
    error_message: str
    attempts: int
    first_seen: int
    last_seen: int
    status: Status
    asset_name: str = ""
    task_run_id: str | None = None
    claimed_by: str | None = None
    claimed_at: int | None = None

    def line(self) -> str:
        """One line for ``microstock dead-letter list``: job id, error class, attempts, first and last seen, status, asset."""
        return (f"{self.job_id}  {self.error_class}  attempts={self.attempts}  first_seen={utc(self.first_seen)}"
                f"  last_seen={utc(self.last_seen)}  {self.status}  {self.asset_name}")


@dataclass(frozen=True)
class Summary:
    """What is parked: count per error class (largest first) and the oldest job."""

    by_class: list[tuple[str, int]] = field(default_factory=list)
    #: ``first_seen`` of the oldest parked job, None when nothing is parked.
    oldest_first_seen: int | None = None

    @property
    def parked(self) -> int:
        return sum(n for _, n in self.by_class)

    def text(self, now: float | None = None) -> str:
        """The original design's report, plus the age of the oldest parked job."""
        if not self.by_class:
            return "dead-letter: clean (0 parked)"
        lines = [f"dead-letter: {self.parked} parked"]
        lines += [f"  {n:4d}  {error_class}" for error_class, n in self.by_class]
        if self.oldest_first_seen is not None:
            age = (time.time() if now is None else now) - self.oldest_first_seen
            lines.append(f"  oldest parked job: {format_age(age)} old")
        return "\n".join(lines)

    def markdown(self, store: Path, now: float | None = None) -> str:
        """The text above as a Prefect markdown artifact, with a table per error class and how to replay."""
        out = ["# Dead-letter summary", "", "```", self.text(now), "```", "", f"Store: `{store}`"]
        if self.by_class:
            out += ["", "| error class | parked |", "|---|---:|"]
            out += [f"| `{error_class}` | {n} |" for error_class, n in self.by_class]
            out += ["", "See them with `microstock dead-letter list`; replay with `microstock replay` "
                        "(dry run) and `microstock replay --apply`."]
        return "\n".join(out)


def utc(unix_seconds: float) -> str:
    """``2026-11-30T06:51:44Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_seconds))


def format_age(seconds: float) -> str:
    """``45s``, ``12m``, ``3h 05m``, ``2d 04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def redact(text: str) -> str:
    """``text`` with the Gemini API key from the environment, and anything key-shaped, replaced by ``***``."""
    return redact_secrets(text, gemini_api_key())


def parked_error_class(exc: BaseException) -> str:
    """The ``error_class`` a failed describe job is parked under.

    ``blocked:<REASON>`` and ``permanent:<code>`` as the describer said;
    ``invalid_output`` when the model never gave usable metadata; other
    transient failures whose attempts ran out become ``exhausted:<code>``
    (``exhausted:429``, ``exhausted:503``, ``exhausted:timeout``); anything
    unexpected is ``unknown:<ExceptionType>``.
    """
    if isinstance(exc, InvalidOutput):
        return exc.error_class
    if isinstance(exc, TransientError):
        return "exhausted:" + exc.error_class.rpartition(":")[2]
    if isinstance(exc, MicrostockError):
        return exc.error_class
    return f"unknown:{type(exc).__name__}"


class DeadLetterStore(ABC):
    """Where describe jobs that could not succeed wait for a replay.

    Every method is safe to call from several threads and processes at once.
    Errors reaching the store's file or server are raised as
    :class:`~tasks.failures.StoreUnavailable`, whose message names the store.
    """

    @abstractmethod
    def park(
        self,
        job_id: str,
        *,
        payload: dict[str, Any],
        model: str,
        error_class: str,
        error_message: str,
        attempts: int,
        asset_name: str = "",
        task_run_id: str | None = None,
    ) -> ParkedJob:
        """Park a job, or update it if it is already in the store; return the row.

        There is never more than one row per ``job_id``. Parking again adds
        ``attempts`` to the stored count, keeps ``first_seen``, sets
        ``last_seen`` to now, replaces payload, model, error class and message
        and sets ``status`` to ``parked``. A replay's claim on the job is kept
        (the replay releases it). ``payload`` and ``error_message`` are stored
        with any API key redacted.
        """

    @abstractmethod
    def get(self, job_id: str) -> ParkedJob | None:
        """The job's row, or None when the store never saw it."""

    @abstractmethod
    def list(self, *, status: Status | None = None, error_class: str | None = None, limit: int | None = None) -> list[ParkedJob]:
        """Jobs oldest ``last_seen`` first, optionally only one status and/or
        error classes starting with ``error_class`` (``exhausted`` matches
        ``exhausted:503``), at most ``limit`` of them. Claims are ignored."""

    @abstractmethod
    def claim(self, claimant: str, *, limit: int, error_class: str | None = None) -> list[ParkedJob]:
        """Take up to ``limit`` parked jobs for ``claimant`` to replay, oldest ``last_seen`` first.

        Atomic: a job is handed to one claimant only, however many replays
        claim at once. Jobs already claimed are skipped unless their claim is
        older than :data:`CLAIM_TIMEOUT_S` (the replay holding it died).
        ``error_class`` limits the claim to classes starting with it.
        """

    @abstractmethod
    def mark_recovered(self, job_id: str, claimant: str) -> bool:
        """Set a job claimed by ``claimant`` to ``recovered`` (last_seen = now) and drop the claim.

        Returns False, changing nothing, when ``claimant`` does not hold the job.
        """

    @abstractmethod
    def release(self, job_id: str, claimant: str, *, error_message: str | None = None) -> bool:
        """Give back a job ``claimant`` holds; it stays ``parked`` for a later replay.

        With ``error_message`` (the replay failed without re-parking the job,
        e.g. its image is gone), also record that message and set
        ``last_seen`` to now. Returns False, changing nothing, when
        ``claimant`` does not hold the job.
        """

    @abstractmethod
    def summary(self) -> Summary:
        """Parked jobs counted per error class (largest first), and the oldest one's ``first_seen``."""


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
            raise self._unavailable(exc) from None
        try:
            con.row_factory = sqlite3.Row
            if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            yield con
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None
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
    """The workdir's store (``<workdir>/dead_letter.db``), created on first use."""
    return SQLiteDeadLetterStore(wd.dead_letter_db, busy_timeout_s=busy_timeout_s)
