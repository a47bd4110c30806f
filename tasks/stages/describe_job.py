"""What every describe call of one stage run goes through and shares.

:class:`DescriberGate` is the one seam between the describe task and the
describer: it passes every call through the describer's quota (its
``limiter``: rate, concurrency, a 429's pause and call again, the run's
:class:`~tasks.gemini.ratelimit.WaitAllowance`) and the workdir's daily request
budget (:class:`~tasks.gemini.daybudget.DailyBudget`), and closes for the rest
of the run on the first :class:`~tasks.core.errors.StageStopped`. :class:`DescribeRun` bundles
what the stage's jobs share (workdir, settings, gate, dead-letter store) and
parks a job once per run (:meth:`DescribeRun.park_once`), whoever asks first:
the plain runner, the Prefect task's failure hook, or the stage's backstop.

No Prefect here: a quota shared by processes (the server's, set up by the
Prefect side) is handed in as ``quota``, not looked up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tasks.core.errors import StageStopped, error_class_of_parked
from tasks.core.records import Asset, Metadata, read_sidecar, write_sidecar
from tasks.core.reports import DescribeReport
from tasks.core.secrets import gemini_key, redact
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.gemini.daybudget import FILE_NAME, DailyBudget
from tasks.gemini.ratelimit import CallTimes, RateLimiter, WaitAllowance
from tasks.images.provenance import is_ai_generated, provenance_of
from tasks.observe import events
from tasks.stages.describers import Describer, select_describer
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob

#: ``quota(gemini settings, model)``: the limiter shared by processes for that model, or None.
QuotaFor = Callable[[GeminiSettings, str], RateLimiter | None]


class DescriberGate:
    """The one place every describe call to the model passes through.

    It holds the stage's stop switch: after the first StageStopped (daily
    quota or budget used up, key refused, model retired, location or request
    shape refused, 429 waits used up) it is closed and no further call is made
    this run. With a describer that has a ``limiter`` (Gemini: the process's
    shared :class:`~tasks.gemini.ratelimit.RateLimiter`) every call, retries
    included, goes through :meth:`~tasks.gemini.ratelimit.RateLimiter.call`:
    a start within the quota, ``budget.take()`` before it, and after a 429 a
    pause for every caller and the same call again, within ``waits``.
    """

    def __init__(self, describer: Describer, waits: WaitAllowance, budget: DailyBudget | None = None) -> None:
        self.describer = describer
        self.limiter = describer.limiter
        self.waits = waits
        self.budget = budget
        self._lock = threading.Lock()
        self.stopped: StageStopped | None = None

    def describe(self, asset: Asset, times: CallTimes | None = None) -> Metadata:
        """The asset's metadata from the describer; ``times`` (when given) gets the time waited for the quota
        apart from the time in the describer's call (without a limiter, no wait: the call's time only)."""
        times = times if times is not None else CallTimes()
        try:
            if self.limiter is None:
                began = time.monotonic()
                try:
                    return self.describer.describe(asset)
                finally:
                    times.call_s += time.monotonic() - began
            return self.limiter.call(lambda: self.describer.describe(asset), self.waits,
                                     self.budget.take if self.budget is not None else None, times)
        except StageStopped as exc:
            self.stop(exc)
            raise

    def stop(self, exc: StageStopped) -> None:
        """Close the gate; the first reason given is kept."""
        with self._lock:
            if self.stopped is None:
                self.stopped = exc


class DescribeRun:
    """What the describe jobs of one stage run share (passed to every job, never serialized).

    ``quota``: a limiter shared by processes (the server's quota, :mod:`tasks.orchestration.shared_quota`)
    that replaces the describer's own when the describer has one; None keeps the describer's.
    """

    def __init__(self, wd: Workdir, settings: Settings, describer: Describer, store: DeadLetterStore,
                 secret: str | None = None, quota: RateLimiter | None = None) -> None:
        self.wd = wd
        self.settings = settings
        self._secret = secret
        gemini = settings.gemini
        budget = DailyBudget(wd.root / FILE_NAME, describer.model,
                             gemini.requests_per_day) if describer.limiter else None
        self.gate = DescriberGate(describer, WaitAllowance(gemini.rate_limit_wait_s), budget)
        if describer.limiter is not None and quota is not None:  # Gemini: the quota shared by processes
            self.gate.limiter = quota
        self.store = store
        #: asset name → attempts made this run (counted by the attempt loop, read when parking).
        self.attempts: dict[str, int] = {}
        #: asset name → its job as parked by this run (a job is parked once per run).
        self.parked: dict[str, ParkedJob] = {}
        self._park_lock = threading.Lock()

    @classmethod
    def start(cls, wd: Workdir, settings: Settings, store: DeadLetterStore, describer: Describer | None = None,
              quota: QuotaFor | None = None) -> "DescribeRun":
        """A run with ``describer``, else the one the key selects (``tasks.core.secrets.gemini_key``);
        ``quota(settings.gemini, model)`` gives the limiter shared by processes, if any."""
        key = gemini_key()
        describer = describer or select_describer(settings, key)
        shared = quota(settings.gemini, describer.model) if quota is not None and describer.limiter else None
        return cls(wd, settings, describer, store, secret=key, quota=shared)

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

    def save(self, asset: Asset, metadata: Metadata) -> None:
        """Write the asset's sidecar: the metadata, its provenance and the AI label the agencies' rules need.

        The one way a describe answer becomes a sidecar, in sync and batch mode alike.
        """
        provenance = provenance_of(asset.path)
        ai = is_ai_generated(provenance, self.settings.pack.label_own_files_ai)  # agencies' AI rules apply to it
        write_sidecar(self.wd.sidecar(asset.name), asset, metadata.model_copy(update={"ai_generated": ai}), provenance)

    def park_once(self, asset: Asset, exc: BaseException, task_run_id: str | None = None) -> tuple[ParkedJob, bool]:
        """Park the asset's job with the attempts this run made, unless this run parked it already.

        The one park path of sync describe: the plain runner, the Prefect task's ``on_failure`` hook and
        the stage's backstop (a failure the hook could not record, a crashed task run) all come here, so
        a job is parked exactly once. Returns the job and whether this call parked it. StoreUnavailable
        when the store cannot be written (nothing is recorded: a later call tries again).
        """
        with self._park_lock:
            if asset.name in self.parked:
                return self.parked[asset.name], False
            job = self.park(asset, exc, self.attempts.get(asset.name, 1), task_run_id)
            self.parked[asset.name] = job
            return job, True

    def park(self, asset: Asset, exc: BaseException, attempts: int, task_run_id: str | None) -> ParkedJob:
        """Park the asset's job under the class of ``exc``, and emit ``microstock.job.parked`` (batch mode
        parks through here directly: its attempts are its jobs')."""
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


def sort_out(wd: Workdir, assets: list[Asset], parked: set[str], report: DescribeReport) -> list[Asset]:
    """The assets still to describe: no sidecar for their content, not parked (ids in ``parked``), not
    described or parked by this run already; the others are noted in ``report`` (``already``, ``still_parked``)."""
    todo = []
    for asset in assets:
        if asset.name in report.described or asset.name in report.parked:
            continue
        sidecar = read_sidecar(wd.sidecar(asset.name))
        if sidecar is not None and sidecar.asset_id == asset.asset_id:
            report.already.append(asset.name)
        elif asset.asset_id in parked:
            report.still_parked.append(asset.name)
        else:
            todo.append(asset)
    return todo
