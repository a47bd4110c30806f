"""The describe stage: one metadata sidecar per asset, each job's attempts under the one retry policy,
parked when it cannot succeed. Plain Python: how each job runs is handed in (:class:`DescribeWith`).

An asset with a sidecar is described and never described again; an asset
whose job is parked in the dead-letter store waits for a replay and is not
called again by a normal run. Every other asset is one job, at most
``gemini.concurrency`` at a time. How the jobs run is a collaborator: the
plain runner here (:func:`run_in_threads`: a thread per job in flight), or
the Prefect one (:mod:`tasks.orchestration.describe_runs`: a ``describe``
task run per asset). Both run :func:`attempt_job` and park through
:meth:`~tasks.stages.describing.DescribeRun.park_once`.

What happens to a failure depends only on its :mod:`tasks.core.errors` class:

* RateLimited (429) never reaches the loop: the gate's call through the
  shared rate limiter holds back every Gemini call of the process for what
  the service asked (RetryInfo, the message's "retry in Ns", else 60 s) and
  calls again within the same attempt; only the run's total wait is bounded
  (``gemini.rate_limit_wait_s``, then StageStopped).
* TransientError — tried again, up to ``gemini.max_attempts`` attempts in
  all, after the delays of :mod:`tasks.core.retry` (``gemini.retry_delay_s``
  doubling, with jitter; at least what the service asked).
* PermanentError, BadInput — no retry: parked with the attempts made. Anything
  unexpected (a bug) is parked too, with its traceback in the log.
* StageStopped (daily quota or budget, refused key, retired model, refused
  location or request shape, 429 waits used up) — no retry, not parked: the
  :class:`~tasks.stages.describing.DescriberGate` closes, no further call is
  made this run, the assets not yet described stay pending for the next run.

Every job ends described, parked or pending (a store that cannot be written
leaves the job pending, and the others go on).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Literal

from tasks.core.errors import MicrostockError, StageStopped, StoreUnavailable, TransientError
from tasks.core.records import Asset, Metadata, Usage
from tasks.core.reports import DescribeReport
from tasks.core.retry import delay_before_retry
from tasks.core.secrets import gemini_key
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.ratelimit import CallTimes
from tasks.observe.progress import StageProgress
from tasks.stages.batch_describe import CollectJob, collect_job, describe_in_batches
from tasks.stages.describers import Describer
from tasks.stages.describing import DescribeRun, QuotaFor, sort_out
from tasks.stores.dead_letter import ParkedJob
from tasks.stores.dead_letter_open import open_store

log = logging.getLogger(__name__)


# --- one job: its attempts ------------------------------------------------------------------


@dataclass
class Attempted:
    """How one job's attempts ended: described (``metadata``, this attempt's ``times``), an expected
    ``failure`` not to try again (to park), ``stopped`` (this job's call stopped the stage: pending), or
    ``not_called`` (the stage had stopped before its next call: pending)."""

    attempts: int
    metadata: Metadata | None = None
    times: CallTimes = field(default_factory=CallTimes)
    failure: MicrostockError | None = None
    stopped: StageStopped | None = None
    not_called: bool = False


def attempt_job(run: DescribeRun, asset: Asset) -> Attempted:
    """Describe one asset and write its sidecar, trying a transient failure again up to
    ``gemini.max_attempts`` attempts after the policy's delay (the one retry decision of sync describe).

    ``run.attempts[asset.name]`` counts the attempts as they start. Anything unexpected (not a
    :class:`~tasks.core.errors.MicrostockError`) propagates, after the attempt that raised it.
    """
    gemini = run.settings.gemini
    attempt = 0
    while True:
        attempt += 1
        if run.gate.stopped is not None:
            log.info("not calling the describer for %s: the stage stopped (%s)", asset.name, run.gate.stopped.message)
            return Attempted(attempt - 1, not_called=True)
        run.attempts[asset.name] = attempt
        times = CallTimes()
        try:
            metadata = run.gate.describe(asset, times)
        except StageStopped as exc:
            return Attempted(attempt, stopped=exc)
        except MicrostockError as exc:
            if isinstance(exc, TransientError) and attempt < gemini.max_attempts:
                delay = delay_before_retry(gemini.retry_delay_s, attempt, exc)
                reason = (run.redact(exc.message).splitlines() or [type(exc).__name__])[0]
                log.info("describe %s: attempt %d of %d failed (%s); trying again in %.1f s", asset.name, attempt,
                         gemini.max_attempts, reason[:300], delay)
                time.sleep(delay)
                continue
            return Attempted(attempt, failure=exc)
        run.save(asset, metadata)
        return Attempted(attempt, metadata=metadata, times=times)


# --- many jobs ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """How one job ended: ``described``, ``parked`` (detail = error class) or ``pending`` (detail = why)."""

    asset: Asset
    status: Literal["described", "parked", "pending"]
    detail: str = ""
    tokens: int = 0
    usage: Usage | None = None
    cost_usd: float | None = None


def described(asset: Asset, metadata: Metadata | None) -> Outcome:
    """The outcome of a job that ended with ``metadata`` (None: the stage stopped before its call)."""
    if metadata is None:
        return Outcome(asset, "pending", "stage stopped before this call")
    return Outcome(asset, "described", tokens=metadata.tokens, usage=metadata.usage, cost_usd=metadata.cost_usd)


def park(run: DescribeRun, asset: Asset, exc: BaseException) -> ParkedJob:
    """Park the job (:meth:`~tasks.stages.describing.DescribeRun.park_once`); a store that cannot be written is
    logged in one line, and its StoreUnavailable raised (the job stays pending)."""
    try:
        job, _ = run.park_once(asset, exc)
    except StoreUnavailable as err:
        log.error("could not park %s: %s", asset.name, err.message)
        raise
    return job


def settle_attempted(run: DescribeRun, asset: Asset, attempted: Attempted) -> Outcome:
    """The outcome of a job's attempts in the plain runner: an expected failure is parked here."""
    if attempted.stopped is not None:
        return Outcome(asset, "pending", attempted.stopped.message)
    if attempted.failure is not None:
        return Outcome(asset, "parked", park(run, asset, attempted.failure).error_class)
    return described(asset, attempted.metadata)


#: ``on_done(asset, settle)``: called in the stage's thread as each job finishes; ``settle()`` gives its outcome
#: (and may raise, e.g. StoreUnavailable when the job cannot be parked).
OnDone = Callable[[Asset, Callable[[], Outcome]], None]

#: How to run the jobs: ``runner(run, assets, on_done)`` runs each asset's job (at most ``gemini.concurrency`` at
#: once, none started once the gate is closed) and returns the assets never started.
JobRunner = Callable[[DescribeRun, list[Asset], OnDone], list[Asset]]


def run_in_threads(run: DescribeRun, assets: list[Asset], on_done: OnDone) -> list[Asset]:
    """The plain runner: each job's :func:`attempt_job` in a thread, at most ``gemini.concurrency`` at once."""

    def settle(asset: Asset, future: Future) -> Outcome:
        try:
            attempted = future.result()
        except Exception as exc:  # a bug: parked, with its traceback in the log
            job = park(run, asset, exc)
            log.warning("parked %s as %s after %d attempt(s)", asset.name, job.error_class, job.attempts,
                        exc_info=exc)
            return Outcome(asset, "parked", job.error_class)
        return settle_attempted(run, asset, attempted)

    queue = list(reversed(assets))  # pop() from the end takes them in order
    in_flight: dict[Future, Asset] = {}
    with ThreadPoolExecutor(max(1, run.settings.gemini.concurrency), thread_name_prefix="describe") as pool:
        while queue or in_flight:
            while queue and len(in_flight) < run.settings.gemini.concurrency and run.gate.stopped is None:
                asset = queue.pop()
                in_flight[pool.submit(attempt_job, run, asset)] = asset
            if not in_flight:
                break
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                asset = in_flight.pop(future)
                on_done(asset, lambda asset=asset, future=future: settle(asset, future))
    queue.reverse()
    return queue


def describe_jobs(run: DescribeRun, assets: list[Asset], runner: JobRunner) -> list[Outcome]:
    """Run the jobs of ``assets`` with ``runner``; one outcome per asset, in order.

    The assets never started (the gate closed) are pending. A job whose outcome cannot be settled
    (e.g. the store is locked past its timeout) is pending with that reason, and the others go on.
    """
    outcomes: dict[str, Outcome] = {}
    lock = threading.Lock()

    def settle_one(asset: Asset, settle: Callable[[], Outcome]) -> None:
        try:
            outcome = settle()
        except StoreUnavailable as exc:
            outcome = Outcome(asset, "pending", exc.message)
        except Exception as exc:  # one job's bookkeeping must not stop the others
            log.error("describe %s: could not settle the job (%s: %s); it stays pending",
                      asset.name, type(exc).__name__, run.redact(str(exc)))
            outcome = Outcome(asset, "pending", f"{type(exc).__name__}: {run.redact(str(exc))}")
        with lock:
            outcomes[asset.name] = outcome
        progress.advance()

    with StageProgress("describe", len(assets)) as progress:
        for asset in runner(run, assets, settle_one):
            outcomes[asset.name] = Outcome(asset, "pending", "stage stopped before this call")
            progress.advance()
    if run.gate.stopped is not None:
        waiting = sum(1 for o in outcomes.values() if o.status == "pending")
        log.error("describe stopped: %s. No further Gemini calls this run; %d asset(s) left pending for the next run.",
                  run.gate.stopped.message, waiting)
    return [outcomes[a.name] for a in assets]


# --- the stage ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DescribeWith:
    """The describe stage's collaborators: how each job runs, how a finished batch job is collected, the
    quota shared by processes, and a describer to use instead of the one the settings select (only a test
    sets it today: the Prefect side and replay take the settings' own).

    The defaults are plain Python; :data:`tasks.orchestration.describe_runs.IN_PREFECT` gives Prefect's.
    """

    jobs: JobRunner = run_in_threads
    collect: CollectJob = collect_job
    quota: QuotaFor | None = None
    describer: Describer | None = None


def describe_stage(wd: Workdir, settings: Settings, assets: list[Asset],
                   how: DescribeWith = DescribeWith()) -> DescribeReport:
    """Describe every asset that has no sidecar and is not parked; never raises for one job's failure.

    With ``gemini.mode = "batch"`` (and a key) :func:`~tasks.stages.batch_describe.describe_in_batches`
    does it instead: collect the finished batch jobs, submit the rest.
    """
    report = DescribeReport()
    try:
        store = open_store(wd)
        parked = {job.job_id for job in store.list(status="parked")}
    except StoreUnavailable as exc:
        store, parked, report.stopped = None, set(), exc.message
    if store is not None and settings.gemini.mode == "batch":
        key = gemini_key()
        if key:
            return describe_in_batches(wd, settings, store, key, assets, how.collect)
        log.warning("`gemini.mode = batch` needs a Gemini key: without one the offline describer runs "
                    "as in sync mode")
    todo = sort_out(wd, assets, parked, report)
    if report.still_parked:
        log.info("%d asset(s) parked by an earlier run are left for `microstock replay`", len(report.still_parked))
    if store is None:
        log.error("describe skipped: %s", report.stopped)
        report.pending = [a.name for a in todo]
        return report
    if not todo:
        return report
    run = DescribeRun.start(wd, settings, store, how.describer, how.quota)
    report.describer = run.gate.describer.name
    if report.describer == "offline":
        log.info("No Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block): the offline "
                 "describer writes metadata from each image's prompt, embedded metadata or file name.")
    for outcome in describe_jobs(run, todo, how.jobs):
        if outcome.status == "described":
            report.described.append(outcome.asset.name)
            report.tokens += outcome.tokens
            report.usage += outcome.usage or Usage()
            if outcome.cost_usd is None:
                report.cost_unknown += 1
            else:
                report.cost_usd += outcome.cost_usd
        elif outcome.status == "parked":
            report.parked[outcome.asset.name] = outcome.detail
        else:
            report.pending.append(outcome.asset.name)
    if report.cost_unknown:
        log.warning("cost unknown for %d asset(s): no confirmed price for %s in tasks/gemini/prices.toml "
                    "(docs/GEMINI.md)", report.cost_unknown, run.describer.model)
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report
