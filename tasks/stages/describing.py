"""What every describe call of one stage run goes through and shares.

:class:`DescriberGate` is the one seam between the describe task and the
describer: it waits for the describer's quota (its ``limiter``), pauses every
caller when the service asks for time, and closes for the rest of the run on
the first :class:`~tasks.core.errors.StageStopped`. :class:`DescribeRun` bundles
what the stage's tasks share (workdir, settings, gate, dead-letter store) and
parks a job the same way from the hook and from the stage's backstop.
"""

from __future__ import annotations

import threading
from typing import Any

from tasks.core.errors import RateLimited, StageStopped, error_class_of_parked
from tasks.core.records import Asset, Metadata
from tasks.core.retry import requested_or_default
from tasks.core.secrets import gemini_key, redact
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.observe import events
from tasks.stages.describers import Describer, select_describer
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob


class DescriberGate:
    """The one place every describe call to the model passes through.

    It holds the stage's stop switch: after the first StageStopped (daily
    quota used up, key refused) it is closed and no further call is made
    this run. With a describer that has a ``limiter`` (Gemini: the process's
    shared :class:`~tasks.gemini.ratelimit.RateLimiter`) every call, retries
    included, waits for its start within the quota and a concurrency place;
    a RateLimited answer pauses every caller of the limiter for the time the
    service asked (``pause_s`` when the 429 says nothing).
    """

    def __init__(self, describer: Describer, pause_s: float = 0.0) -> None:
        self.describer = describer
        self.limiter = describer.limiter
        self.pause_s = pause_s
        self._lock = threading.Lock()
        self.stopped: StageStopped | None = None

    def describe(self, asset: Asset) -> Metadata:
        try:
            if self.limiter is None:
                return self.describer.describe(asset)
            with self.limiter.slot():
                return self.describer.describe(asset)
        except RateLimited as exc:
            if self.limiter is not None:
                self.limiter.pause(requested_or_default(exc, self.pause_s))
            raise
        except StageStopped as exc:
            self.stop(exc)
            raise

    def stop(self, exc: StageStopped) -> None:
        """Close the gate; the first reason given is kept."""
        with self._lock:
            if self.stopped is None:
                self.stopped = exc


class DescribeRun:
    """What the describe tasks of one stage run share (passed to every task, never serialized)."""

    def __init__(self, wd: Workdir, settings: Settings, describer: Describer, store: DeadLetterStore,
                 secret: str | None = None) -> None:
        self.wd = wd
        self.settings = settings
        self._secret = secret
        self.gate = DescriberGate(describer, pause_s=settings.gemini.retry_delay_s)
        self.store = store
        #: asset name → attempts made this run (the backstop's attempt count).
        self.attempts: dict[str, int] = {}

    @classmethod
    def start(cls, wd: Workdir, settings: Settings, store: DeadLetterStore) -> "DescribeRun":
        """A run with the describer the key selects (``tasks.core.secrets.gemini_key``)."""
        key = gemini_key()
        return cls(wd, settings, select_describer(settings, key), store, secret=key)

    def __repr__(self) -> str:  # shown by Prefect in parameter reprs; never the describer's key
        return f"DescribeRun({self.gate.describer.name})"

    @property
    def describer(self) -> Describer:
        return self.gate.describer

    def payload(self, asset: Asset) -> dict[str, Any]:
        """What a replay needs to retry the job: never the key, never the image bytes."""
        gemini = self.settings.gemini
        return {
            "asset": asset.name,
            "asset_id": asset.asset_id,
            "describer": self.describer.name,
            "model": self.describer.model,
            "language": gemini.language,
            "timeout_s": gemini.timeout_s,
            "max_attempts": gemini.max_attempts,
            **self.describer.replay_payload(),
        }

    def redact(self, text: str) -> str:
        """``text`` without the key this run uses (from the environment or a Secret block)."""
        return redact(text, self._secret)

    def park(self, asset: Asset, exc: BaseException, attempts: int, task_run_id: str | None) -> ParkedJob:
        """Park the asset's job under the class of ``exc``, and emit ``microstock.job.parked``."""
        job = self.store.park(
            asset.asset_id,
            payload=self.payload(asset),
            model=self.describer.model,
            error_class=error_class_of_parked(exc),
            error_message=self.redact(str(exc) or type(exc).__name__),
            attempts=attempts,
            asset_name=asset.name,
            task_run_id=task_run_id,
        )
        events.job_parked(asset.asset_id, asset.name, job.error_class, job.attempts, job.model)
        return job
