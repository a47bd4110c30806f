"""The workdir's record of its Gemini batch jobs: ``batch_jobs.jsonl``, append-only.

Contract (docs/INTERFACE.md):

* Before a job is created at Gemini, :meth:`BatchJobs.intend` appends an
  **intent**: the job's deterministic display name (:func:`display_name`),
  its assets (id → name), the try number and the time. After the create call
  returns, :meth:`BatchJobs.submitted` appends the **job name** Gemini gave
  it. When a job is collected or gives up, :meth:`BatchJobs.end` appends its
  **end** (the final state and what became of its assets). Each append is one
  ``write`` under an exclusive ``fcntl`` lock, then ``fsync`` — the ledger's
  discipline, :func:`tasks.core.files.locked_append` — so a line is on disk before the caller goes on, and the intent
  is on disk before the create request is sent.
* A record is **live** from its intent until its end. An asset is in at most
  one live record: the describe stage submits only assets that are in none.
* An intent without a job name after a crash is resolved by its display name
  (the stage looks the name up among the account's jobs and adopts the job,
  or creates it under the same name when the create never happened), so a
  crash between create and record never makes a second job.
* :meth:`BatchJobs.exclusive` is held by the one run that collects and
  submits; a second run at the same time leaves the jobs to it.

Why JSON lines rather than SQLite: a workdir has a handful of jobs (one per
20 MB of requests), each written three times in its life, never updated in
place; an append-only text file a contributor can read (``cat``) and back up
with the workdir, under the same lock-and-fsync rule as the ledger, is all
that needs. A torn last line (a crash mid-append) is ignored when read; the
next append starts on a line of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from tasks.core.errors import StoreUnavailable
from tasks.core.files import exclusive_lock, locked_append
from tasks.core.state_files import read_lines
from tasks.core.workdir import Workdir

FILE_NAME = "batch_jobs.jsonl"
LOCK_NAME = ".batch_jobs.lock"
#: Final states of a job that gave no answers: its assets go back to pending (up to a limit).
ENDED_UNANSWERED = ("expired", "cancelled", "failed", "missing")
#: Every display name this project gives a job starts with this.
PREFIX = "microstock"


def workdir_key(wd: Workdir) -> str:
    """Eight hex digits naming the workdir (its resolved path), so two workdirs on one account never mix jobs."""
    return hashlib.sha256(str(wd.root.resolve()).encode()).hexdigest()[:8]


def workdir_prefix(wd: Workdir) -> str:
    """``microstock-<workdir key>-``: the start of every display name of this workdir's jobs."""
    return f"{PREFIX}-{workdir_key(wd)}-"


def display_name(wd: Workdir, asset_ids: list[str], try_number: int) -> str:
    """``microstock-<workdir key>-<12 hex of the sorted asset ids>-<try>``: the same assets and try, the same name."""
    digest = hashlib.sha256("\n".join(sorted(asset_ids)).encode()).hexdigest()[:12]
    return f"{workdir_prefix(wd)}{digest}-{try_number}"


def _after_torn_line(fd: int, size: int) -> bytes:
    """A newline when the file ends in a torn line: that line stays alone on its line (and is ignored)."""
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobLine(BaseModel):
    """One line of ``batch_jobs.jsonl`` as :class:`BatchJobs` appends it: an ``intent`` (``assets``, ``try``),
    a ``submitted`` (``job``) or an ``end`` (``state``, ``counts``) of the job ``display_name``."""

    event: Literal["intent", "submitted", "end"]
    display_name: str
    at: str
    assets: dict[str, str] | None = None
    try_number: int = Field(0, alias="try")
    job: str | None = None
    state: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _whole(self) -> "JobLine":
        what, value = {"intent": ("assets", self.assets), "submitted": ("job", self.job),
                       "end": ("state", self.state)}[self.event]
        if value is None:
            raise ValueError(f"an {self.event} line without its {what}")
        return self


@dataclass
class JobRecord:
    """One job as the workdir knows it (folded from its lines)."""

    display_name: str
    #: asset id → asset name, as submitted.
    assets: dict[str, str]
    try_number: int
    intended_at: str
    #: Gemini's name (``batches/…``); None until the create call returned (or the job was adopted).
    job_name: str | None = None
    submitted_at: str | None = None
    #: The final state (``succeeded``, ``expired``, ``cancelled``, ``failed``, ``missing``; ``abandoned``: the
    #: create never happened; ``refused``: Gemini refused the create, the assets were parked); None while live.
    ended: str | None = None
    ended_at: str | None = None
    #: What the end did: ``described``, ``parked``, ``returned`` (to pending) → count.
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.ended is None


class BatchJobs:
    """``<workdir>/batch_jobs.jsonl``: intents, job names and ends, appended and fsynced under a lock."""

    def __init__(self, wd: Workdir) -> None:
        self.wd = wd
        self.path = wd.root / FILE_NAME

    # --- reading -----------------------------------------------------------------------

    def records(self) -> list[JobRecord]:
        """Every job ever recorded, in the order of their intents (a missing file: none)."""
        def unreadable(why: str) -> StoreUnavailable:  # jobs paid for are in it: never set aside, never rebuilt
            return StoreUnavailable(f"{self.path}: cannot read the batch jobs ({why}) — make it a readable file again "
                                    "(never delete it: it names the jobs Gemini has)")

        found: dict[str, JobRecord] = {}
        # a torn last line or a hand edit is skipped and named: not a record
        for line in read_lines(self.path, JobLine.model_validate, stop=unreadable):
            name = line.display_name
            if line.event == "intent":
                found[name] = JobRecord(name, line.assets or {}, line.try_number, line.at)
            elif name in found and line.event == "submitted":
                found[name].job_name, found[name].submitted_at = line.job, line.at
            elif name in found and line.event == "end":
                found[name].ended, found[name].ended_at = line.state, line.at
                found[name].counts = line.counts
        return list(found.values())

    def live(self) -> list[JobRecord]:
        return [r for r in self.records() if r.live]

    def find(self, name: str) -> JobRecord | None:
        """The record whose job name or display name is ``name`` (the newest when several)."""
        hits = [r for r in self.records() if name in (r.job_name, r.display_name)]
        return hits[-1] if hits else None

    def ended_tries(self, records: list[JobRecord] | None = None) -> dict[str, int]:
        """asset id → how many jobs holding it ended without answering (expired, cancelled, failed, missing:
        Gemini no longer knows it)."""
        tries: dict[str, int] = {}
        for r in self.records() if records is None else records:
            if r.ended in ENDED_UNANSWERED:
                for asset_id in r.assets:
                    tries[asset_id] = tries.get(asset_id, 0) + 1
        return tries

    # --- writing ------------------------------------------------------------------------

    def intend(self, display_name: str, assets: Mapping[str, str], try_number: int) -> None:
        """Record that a job of ``assets`` is about to be created under ``display_name`` (before the call)."""
        self._append({"event": "intent", "display_name": display_name, "try": try_number,
                      "assets": dict(assets), "at": _now()})

    def submitted(self, display_name: str, job_name: str) -> None:
        """Record the name Gemini gave the job (after the create call returned, or on adoption)."""
        self._append({"event": "submitted", "display_name": display_name, "job": job_name, "at": _now()})

    def end(self, display_name: str, state: str, counts: Mapping[str, int] | None = None) -> None:
        """Record that the job is no longer live: its final ``state`` and what became of its assets."""
        self._append({"event": "end", "display_name": display_name, "state": state,
                      "counts": dict(counts or {}), "at": _now()})

    def _append(self, item: dict) -> None:
        line = (json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        locked_append(self.path, line, "the batch jobs", before=_after_torn_line)

    # --- one collector at a time ---------------------------------------------------------

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold ``.batch_jobs.lock`` while collecting and submitting; StoreUnavailable at once when another run does.

        The lock dies with the process, so a crash never leaves it held.
        """
        busy = StoreUnavailable("another run is collecting and submitting batch jobs right now; this run leaves "
                                "them to it")
        with exclusive_lock(self.wd.root / LOCK_NAME, "collecting and submitting batch jobs", busy=busy):
            yield

