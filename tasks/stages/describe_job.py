"""One describe job: its attempts, its outcome, and what every job of a stage run shares.

:class:`DescriberGate` is the one seam between a job and the describer: it
passes every call through the describer's quota (its ``limiter``: rate,
concurrency, a 429's pause and call again, the run's
:class:`~tasks.gemini.ratelimit.WaitAllowance`) and the workdir's daily request
budget (:class:`~tasks.gemini.daybudget.DailyBudget`), and closes for the rest
of the run on the first :class:`~tasks.core.errors.StageStopped`.

:func:`attempt_job` makes one job's attempts under the one retry policy and
gives its :class:`Outcome` — the one shape a job's result has, from the
attempt to the stage's report. A job that failed for good is ``failed`` until
:meth:`DescribeRun.park` parks it: the one park, once per job and run,
whoever asks first (the plain job runner, the Prefect task's failure hook, the
stage's backstop for a hook that could not).

No Prefect here: a quota shared by processes (the server's, set up by the
Prefect side) is handed in as ``quota``, not looked up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tasks.agencies.keyword_rules import apply_keyword_rules
from tasks.agencies.protected import ProtectedNames
from tasks.core.errors import (
    MicrostockError,
    StageStopped,
    StoreUnavailable,
    TransientError,
    error_class_of_parked,
    unreachable,
)
from tasks.core.files import disk_full, disk_of
from tasks.core.printable import printable
from tasks.core.records import Asset, Metadata, read_sidecar, write_sidecar
from tasks.core.reports import DescribeReport
from tasks.core.retry import delay_before_retry
from tasks.core.secrets import redact
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.gemini.daybudget import FILE_NAME, DailyBudget
from tasks.gemini.ratelimit import CallTimes, RateLimiter, WaitAllowance
from tasks.images.provenance import is_ai_generated, provenance_of
from tasks.observe.events import Events
from tasks.stages.offline_describer import Describer, select_describer
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob

log = logging.getLogger(__name__)

#: ``quota(gemini settings, model)``: the limiter shared by processes for that model, or None.
QuotaFor = Callable[[GeminiSettings, str], RateLimiter | None]


@dataclass
class Outcome:
    """How one job ended.

    ``described`` (``metadata``, this attempt's ``times``); ``failed`` (``failure``: not to be tried again this
    run, to park; ``detail`` its first line); ``parked`` (``detail``: the error class); ``pending`` (``detail``:
    why — the stage stopped, the store could not be written). ``attempts``: the attempts this run made.
    """

    asset: Asset
    status: Literal["described", "failed", "parked", "pending"]
    detail: str = ""
    attempts: int = 0
    metadata: Metadata | None = None
    times: CallTimes = field(default_factory=CallTimes)
    failure: BaseException | None = None


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
        """The asset's metadata from the describer; ``times`` (when given) gets the time waited for the quota apart
        from the time in the describer's call (without a limiter, no wait: the call's time only)."""
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

    ``events``: where its parked jobs are told (the run's, ``RunContext.events``). ``quota``: a limiter shared by
    processes (the server's quota, :mod:`tasks.orchestration.shared_quota`) that replaces the describer's own when
    the describer has one; None keeps the describer's.
    """

    def __init__(self, wd: Workdir, settings: Settings, describer: Describer, store: DeadLetterStore,
                 events: Events, secret: str | None = None, quota: RateLimiter | None = None) -> None:
        self.wd = wd
        self.settings = settings
        self._secret = secret
        gemini = settings.gemini
        budget = DailyBudget(wd.root / FILE_NAME, describer.model,
                             gemini.requests_per_day) if describer.limiter and describer.gemini_quota else None
        self.gate = DescriberGate(describer, WaitAllowance(gemini.rate_limit_wait_s), budget)
        if describer.limiter is not None and describer.gemini_quota and quota is not None:  # Gemini's, shared
            self.gate.limiter = quota
        self.store = store
        self.events = events
        #: asset name → attempts made this run (counted by the attempt loop, read when parking).
        self.attempts: dict[str, int] = {}
        #: asset name → its job as parked by this run (a job is parked once per run).
        self.parked: dict[str, ParkedJob] = {}
        #: Whether a call of this run got an answer from the describer (any answer: metadata, a refusal, an
        #: HTTP error). Until one does, a job that cannot reach it at all stops the stage (:func:`attempt_job`).
        self.reached = False
        self._park_lock = threading.Lock()
        #: The shipped protected names with the contributor's own, less their allowed ones (read once a run).
        self.names = ProtectedNames.of(settings.keywords)

    @classmethod
    def start(cls, ctx: RunContext, describer: Describer | None = None,
              quota: QuotaFor | None = None) -> "DescribeRun":
        """A run of ``ctx`` with ``describer``, else the one its key selects; ``quota(settings.gemini, model)``
        gives the limiter shared by processes, if any."""
        describer = describer or select_describer(ctx.settings, ctx.gemini_key, ctx.openai_key)
        gemini = describer.limiter is not None and describer.gemini_quota
        shared = quota(ctx.settings.gemini, describer.model) if quota is not None and gemini else None
        secret = ctx.gemini_key if gemini else ctx.openai_key
        return cls(ctx.wd, ctx.settings, describer, ctx.store, ctx.events, secret=secret, quota=shared)

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

    def reason(self, exc: BaseException) -> str:
        """The first line of ``exc``'s message, redacted, at most 300 characters: what a log line or a state says."""
        message = exc.message if isinstance(exc, MicrostockError) else str(exc)
        return ((self.redact(message).splitlines() or [type(exc).__name__])[0])[:300]

    def save(self, asset: Asset, metadata: Metadata) -> None:
        """Write the asset's sidecar: the metadata after the contributor's keyword rules
        (:mod:`tasks.agencies.keyword_rules`), its provenance and the AI label the agencies' rules need.

        The one way a describe answer becomes a sidecar, in sync and batch mode alike, whichever describer wrote it.
        A full disk (ENOSPC, EDQUOT) is not the asset's failure: StageStopped ``disk_full``, one line naming the disk
        and that this answer could not be kept (the asset stays pending; the next run describes it again); so is a
        sidecar lock that cannot be opened (StageStopped naming it: no sidecar could be written).
        """
        metadata, changes = apply_keyword_rules(metadata, self.settings.keywords, self.names)
        for line in changes.lines():
            log.info("%s: keywords: %s", printable(asset.name), line)
        own_ai = self.settings.pack.label_own_files_ai
        provenance = provenance_of(asset.path)  # an image's EXIF or a clip's tags: generated, or the contributor's
        ai = is_ai_generated(provenance, own_ai)  # agencies' AI rules apply
        path = self.wd.sidecar(asset.name)
        paid = f", US${metadata.cost_usd:.4f} paid" if metadata.cost_usd else ""
        try:
            write_sidecar(path, asset, metadata.model_copy(update={"ai_generated": ai}), provenance)
        except StoreUnavailable as exc:  # assets/.sidecars.lock cannot be opened: no answer can be kept
            raise StageStopped(f"{exc.message}; the describe answer for {printable(asset.name)} could not be kept "
                               f"({self.describer.name}{paid}) and it stays pending with the assets not yet "
                               "described; describe stopped — make the lock a writable file again and run again",
                               kind="disk_full" if disk_full(exc.__cause__) else "store_unavailable") from None
        except OSError as exc:
            if not disk_full(exc):
                raise
            disk = disk_of(path)
            raise StageStopped(f"disk full: {disk} has no room left for {printable(path)} ({exc.strerror or exc}); "
                               f"the describe answer for {printable(asset.name)} could not be kept "
                               f"({self.describer.name}{paid}) and it stays pending with the assets not yet "
                               f"described; describe stopped — free space on {disk} and run again",
                               kind="disk_full") from None

    def park(self, asset: Asset, exc: BaseException, *, attempts: int | None = None,
             task_run_id: str | None = None) -> ParkedJob:
        """Park the asset's job under the class of ``exc`` — the one park — unless this run parked it already
        (then that job); emits ``microstock.job.parked``.

        ``attempts``: the attempts this run counted (sync describe), or the batch job's. StoreUnavailable when the
        store cannot be written: nothing is recorded, a later call tries again.
        """
        with self._park_lock:
            if asset.name in self.parked:
                return self.parked[asset.name]
            job = self.store.park(
                asset.asset_id,
                payload=self.payload(asset),
                model=self.describer.model,
                error_class=error_class_of_parked(exc),
                error_message=self.redact(str(exc) or type(exc).__name__),
                attempts=attempts if attempts is not None else self.attempts.get(asset.name, 1),
                asset_name=asset.name,
                task_run_id=task_run_id,
            )
            self.parked[asset.name] = job
        self.events.job_parked(asset.asset_id, asset.name, job.error_class, job.attempts, job.model)
        return job

    def settle(self, outcome: Outcome, task_run_id: str | None = None) -> Outcome:
        """``outcome`` as the stage reports it: a ``failed`` job parked (:meth:`park`; ``pending`` with the reason
        when the store cannot be written, logged in one line); any other outcome as it is."""
        if outcome.status != "failed":
            return outcome
        asset = outcome.asset
        try:
            job = self.park(asset, outcome.failure or RuntimeError(outcome.detail), task_run_id=task_run_id)
        except StoreUnavailable as err:
            log.error("could not park %s: %s", asset.name, err.message)
            return Outcome(asset, "pending", err.message, outcome.attempts)
        return Outcome(asset, "parked", job.error_class, job.attempts, failure=outcome.failure)


def attempt_job(run: DescribeRun, asset: Asset) -> Outcome:
    """Describe one asset and write its sidecar, trying a transient failure again up to ``gemini.max_attempts``
    attempts after the policy's delay (the one retry decision of sync describe).

    ``described``; ``failed`` for an expected failure not to try again (PermanentError, BadInput, transient ones
    past the attempts); ``pending`` when this job's call stopped the stage or the stage had stopped before it.

    The service unreachable (:func:`~tasks.core.errors.unreachable`: refused, DNS, no answer in time) through every
    attempt, while no call of this run has reached it, is not the asset's failure: the stage stops
    (StageStopped ``unreachable``), this job and the rest stay pending for the next run — nothing was answered,
    so nothing was paid — and the run reads Incomplete. Once the service has answered a call of the run, such a
    job parks as any other (a blip on one job, the others went through).
    ``run.attempts[asset.name]`` counts the attempts as they start. Anything unexpected (not a
    :class:`~tasks.core.errors.MicrostockError`: a bug) propagates, after the attempt that raised it.
    """
    try:
        return _attempts(run, asset)
    finally:
        run.describer.job_over(asset)  # what the attempts kept for each other (an uploaded clip) goes


def _attempts(run: DescribeRun, asset: Asset) -> Outcome:
    gemini = run.settings.gemini
    attempt = 0
    while True:
        attempt += 1
        if run.gate.stopped is not None:
            log.info("not calling the describer for %s: the stage stopped (%s)", asset.name, run.gate.stopped.message)
            return Outcome(asset, "pending", "stage stopped before this call", attempt - 1)
        run.attempts[asset.name] = attempt
        times = CallTimes()
        try:
            metadata = run.gate.describe(asset, times)
        except StageStopped as exc:
            return Outcome(asset, "pending", exc.message, attempt, failure=exc)
        except MicrostockError as exc:
            if not unreachable(exc):
                run.reached = True  # the service answered, if only to refuse
            elif run.gate.stopped is not None:  # stopped meanwhile, by another job that could not reach it either
                return Outcome(asset, "pending", run.gate.stopped.message, attempt)
            elif not run.reached and attempt >= gemini.max_attempts:
                stop = StageStopped(f"{run.describer.name} unreachable ({attempt} attempt(s), no call of this run "
                                    f"answered): {run.reason(exc)}; the assets not described stay pending for the "
                                    "next run", kind="unreachable")
                run.gate.stop(stop)
                return Outcome(asset, "pending", stop.message, attempt, failure=run.gate.stopped)
            if isinstance(exc, TransientError) and attempt < gemini.max_attempts:
                delay = delay_before_retry(gemini.retry_delay_s, attempt, exc)
                log.info("describe %s: attempt %d of %d failed (%s); trying again in %.1f s", asset.name, attempt,
                         gemini.max_attempts, run.reason(exc), delay)
                time.sleep(delay)
                continue
            return Outcome(asset, "failed", run.reason(exc), attempt, failure=exc)
        run.reached = True
        try:
            run.save(asset, metadata)
        except StageStopped as exc:  # the disk is full: this answer is lost, the rest stays pending
            run.gate.stop(exc)
            return Outcome(asset, "pending", exc.message, attempt, failure=exc)
        return Outcome(asset, "described", attempts=attempt, metadata=metadata, times=times)


def run_job(run: DescribeRun, asset: Asset) -> Outcome:
    """The plain job: :func:`attempt_job`, settled (:meth:`DescribeRun.settle`); a bug is parked with its
    traceback in the log, and the other jobs go on."""
    try:
        outcome = attempt_job(run, asset)
    except Exception as exc:  # a bug: parked, with its traceback in the log
        outcome = run.settle(Outcome(asset, "failed", run.reason(exc), run.attempts.get(asset.name, 1),
                                     failure=exc))
        if outcome.status == "parked":
            log.warning("parked %s as %s after %d attempt(s)", asset.name, outcome.detail, outcome.attempts,
                        exc_info=exc)
        return outcome
    return run.settle(outcome)


def sort_out(wd: Workdir, assets: list[Asset], parked: set[str], report: DescribeReport,
             sees: bool = False) -> list[Asset]:
    """The assets still to describe: no sidecar for their content — or, when the run's describer ``sees`` the
    picture, one whose words came from nothing but the file name (``Metadata.from_file_name``: held back until a
    describer sees it) —, not parked (ids in ``parked``), not described or parked by this run already; the others
    are noted in ``report`` (``already``, ``still_parked``)."""
    todo = []
    for asset in assets:
        if asset.name in report.described or asset.name in report.parked:
            continue
        sidecar = read_sidecar(wd.sidecar(asset.name))
        thin = sees and sidecar is not None and sidecar.metadata.from_file_name
        if sidecar is not None and sidecar.asset_id == asset.asset_id and not thin:
            report.already.append(asset.name)
        elif asset.asset_id in parked:
            report.still_parked.append(asset.name)
        else:
            todo.append(asset)
    return todo
