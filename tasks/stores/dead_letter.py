"""The dead-letter store: describe jobs that could not succeed, parked for replay.

One small interface, :class:`DeadLetterStore`, with every method's contract
in its docstring. Its backend is :mod:`tasks.stores.dead_letter_sql` (SQLite
at ``<workdir>/dead_letter.db`` by default, or a studio's shared PostgreSQL);
:func:`tasks.stores.dead_letter_open.open_store` picks the workdir's. The
contract tests run on both and on an in-memory store of the tests' own.

Table ``dead_letter`` keeps the columns of the original design (``job_id`` unique, ``payload_json``, ``model``,
``error_class``, ``error_message``, ``attempts``, ``first_seen``,
``last_seen`` in Unix seconds, ``status`` parked|recovered), so its queries
keep working, plus ``asset_name``, ``task_run_id`` (the Prefect task run that
parked the job last), ``claimed_by`` / ``claimed_at`` (a replay holding the
job) and ``account`` (``''`` in a workdir's SQLite file).

A job is an asset's describe call; its ``job_id`` is the asset's content hash.
``payload_json`` holds what a replay needs (asset name and hash, model,
prompt, the settings that matter) — never a key, never image bytes: the text
written to a store passes :func:`tasks.core.secrets.redact` first. A store
reads the time from its ``clock`` (``time.time`` unless told otherwise).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from tasks.core.printable import printable

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
        """One line for ``microstock dead-letter list``: job id, error class, attempts, first and last seen, status,
        asset."""
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
        # one line each, whatever a class holds (a store may be shared): the markdown's code block relies on it
        lines += [f"  {n:4d}  {printable(error_class)}" for error_class, n in self.by_class]
        if self.oldest_first_seen is not None:
            age = (time.time() if now is None else now) - self.oldest_first_seen
            lines.append(f"  oldest parked job: {format_age(age)} old")
        return "\n".join(lines)



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


class DeadLetterStore(ABC):
    """Where describe jobs that could not succeed wait for a replay.

    Every method is safe to call from several threads and processes at once.
    Errors reaching the store's file or server are raised as
    :class:`~tasks.core.errors.StoreUnavailable`, whose message names the store.
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
    def list(self, *, status: Status | None = None, error_class: str | None = None,
             limit: int | None = None) -> list[ParkedJob]:
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
