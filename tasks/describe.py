"""The describe stage: one metadata sidecar per asset, retried by Prefect, parked when it cannot succeed.

An asset with a sidecar is described and never described again; an asset
whose job is parked in the dead-letter store waits for a replay and is not
called again by a normal run. Every other asset becomes one ``describe``
task run (``describe-<asset name>``), submitted at most
``gemini.concurrency`` at a time.

What happens to a failure depends only on its :mod:`tasks.failures` class:

* TransientError — Prefect retries it (``retries`` = ``max_attempts - 1``,
  capped exponential backoff with jitter). A RateLimited is retried no
  sooner than the service asked: the gate reports it to the shared rate
  limiter, which holds back every Gemini call of the process, this job's
  retry included, for ``retry_after`` (RetryInfo's ``retryDelay``; else
  ``gemini.retry_delay_s``). One mechanism for the whole process, rather
  than a per-task sleep that other callers would not see.
* PermanentError, BadInput, anything unexpected — no retry.
* StageStopped (daily quota, refused key) — no retry, not parked: the
  :class:`DescriberGate` closes, no further call is made this run, the
  assets not yet described stay pending for the next run.

A task that ends Failed (other than StageStopped) is parked by its
``on_failure`` hook, :func:`park_failed_job`, with ``attempts`` =
``task_run.run_count``. Prefect only logs a hook's exceptions, so the stage
checks every task's final state afterwards and parks what the hook did not
(:func:`describe_jobs`). The stage never calls ``.result()`` on a failed
future, so the flow ends Completed with parked jobs.

:func:`describe_assets` is what the stock-batch flow calls;
:func:`replay_jobs` runs parked jobs through the same task and policy for the
replay flow.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import PrefectFuture, as_completed
from prefect.logging import get_run_logger

from tasks import events
from tasks.assets import Asset, list_assets
from tasks.config import Settings
from tasks.dead_letter import DeadLetterStore, ParkedJob, open_store, parked_error_class, redact
from tasks.describers.base import Describer
from tasks.describers.offline import OfflineDescriber
from tasks.failures import RateLimited, StageStopped, StoreUnavailable, TransientError
from tasks.files import sha256_file
from tasks.metadata import Metadata, read_sidecar, write_sidecar
from tasks.progress import StageProgress
from tasks.ratelimit import RateLimiter, shared_limiter
from tasks.secrets import gemini_key
from tasks.server_pace import pace_for_flow_run
from tasks.workdir import Workdir

#: The seed's backoff: first delay doubling per retry, capped at 30 s.
MAX_RETRY_DELAY_S = 30.0
#: Prefect's jitter: each delay is drawn between ≈0.63× and 1.5× its nominal value.
RETRY_JITTER = 0.5


def retry_delays(first_s: float, retries: int) -> list[float]:
    """Nominal delays before retry 1, 2, …: ``first_s × 2^i``, capped at :data:`MAX_RETRY_DELAY_S`."""
    return [min(first_s * 2**i, MAX_RETRY_DELAY_S) for i in range(max(retries, 1))]


# --- the seam every model call goes through ----------------------------------------------


class DescriberGate:
    """The one place every describe call to the model passes through.

    It holds the stage's stop switch: after the first StageStopped (daily
    quota used up, key refused) it is closed and no further call is made
    this run. With a ``limiter`` (Gemini: the process's shared
    :class:`~tasks.ratelimit.RateLimiter`) every call, retries included,
    waits for its start within the quota and a concurrency place; a
    RateLimited answer pauses every caller of the limiter for its
    ``retry_after`` (``pause_s`` when the 429 says nothing).
    """

    def __init__(self, describer: Describer, limiter: RateLimiter | None = None, pause_s: float = 0.0) -> None:
        self.describer = describer
        self.limiter = limiter
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
                self.limiter.pause(self.pause_s if exc.retry_after is None else exc.retry_after)
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
        gemini = settings.gemini
        limiter = (shared_limiter(gemini.model, gemini.requests_per_minute, gemini.concurrency)
                   if describer.name.startswith("gemini:") else None)
        self.gate = DescriberGate(describer, limiter, pause_s=gemini.retry_delay_s)
        self.store = store
        #: asset name → attempts made this run (the backstop's attempt count).
        self.attempts: dict[str, int] = {}

    def __repr__(self) -> str:  # shown by Prefect in parameter reprs; never the describer's key
        return f"DescribeRun({self.gate.describer.name})"

    @property
    def model(self) -> str:
        name = self.gate.describer.name
        return name.split(":", 1)[1] if ":" in name else name

    def payload(self, asset: Asset) -> dict[str, Any]:
        """What a replay needs to retry the job: never the key, never the image bytes."""
        gemini = self.settings.gemini
        payload: dict[str, Any] = {
            "asset": asset.name,
            "asset_id": asset.asset_id,
            "describer": self.gate.describer.name,
            "model": self.model,
            "language": gemini.language,
            "timeout_s": gemini.timeout_s,
            "max_attempts": gemini.max_attempts,
        }
        if self.gate.describer.name.startswith("gemini:"):
            from tasks.describers.gemini import SEND_MAX_PX, describe_prompt

            payload["prompt"] = describe_prompt(gemini.language)
            payload["image_max_px"] = SEND_MAX_PX
        return payload

    def redact(self, text: str) -> str:
        """``text`` without the key this run uses (from the environment or a Secret block)."""
        text = redact(text)
        return text.replace(self._secret, "***") if self._secret else text

    def park(self, asset: Asset, exc: BaseException, attempts: int, task_run_id: str | None) -> ParkedJob:
        """Park the asset's job under the class of ``exc``, and emit ``microstock.job.parked``."""
        job = self.store.park(
            asset.asset_id,
            payload=self.payload(asset),
            model=self.model,
            error_class=parked_error_class(exc),
            error_message=self.redact(str(exc) or type(exc).__name__),
            attempts=attempts,
            asset_name=asset.name,
            task_run_id=task_run_id,
        )
        events.job_parked(asset.asset_id, asset.name, job.error_class, job.attempts, job.model)
        return job


def select_describer(settings: Settings, key: str | None) -> Describer:
    """Gemini when there is a key, else the offline describer."""
    if key:
        from tasks.describers.gemini import GeminiDescriber

        return GeminiDescriber(settings.gemini, key)
    return OfflineDescriber()


def new_run(wd: Workdir, settings: Settings, store: DeadLetterStore) -> DescribeRun:
    """A describe run with the describer the key selects (``tasks.secrets.gemini_key``)."""
    key = gemini_key()
    return DescribeRun(wd, settings, select_describer(settings, key), store, secret=key)


# --- the Prefect task, its retry condition and its hook ----------------------------------


def retry_only_transient(task, task_run, state) -> bool:
    """Prefect's ``retry_condition_fn``: retry TransientError only; anything else fails at once."""
    return isinstance(state.result(raise_on_failure=False), TransientError)


def park_failed_job(task, task_run, state) -> None:
    """``on_failure`` hook: park the job with ``attempts = task_run.run_count``.

    StageStopped is not parked (the asset stays pending). A store that cannot
    be written is logged in one line; the stage's backstop tries again.
    """
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return
    params = TaskRunContext.get().parameters
    run: DescribeRun = params["run"]
    asset: Asset = params["asset"]
    logger = get_run_logger()
    try:
        job = run.park(asset, exc, task_run.run_count, str(task_run.id))
    except StoreUnavailable as err:
        logger.error("could not park %s: %s", asset.name, err.message)
        return
    logger.warning("parked %s as %s after %d attempt(s): %s", asset.name, job.error_class, task_run.run_count, job.error_message)


@task(
    name="describe",
    task_run_name="describe-{asset.name}",
    # No tags: Prefect asks the server for tag concurrency slots on every run of a tagged task
    # (a write to its database), ≈ 40–60 ms per asset against ≈ 6 ms untagged (docs/BENCHMARKS.md).
    retries=3,
    retry_delay_seconds=retry_delays(2.0, 3),
    retry_jitter_factor=RETRY_JITTER,
    retry_condition_fn=retry_only_transient,
    on_failure=[park_failed_job],
    cache_policy=NO_CACHE,
)
def describe_asset(asset: Asset, run: DescribeRun) -> Metadata | None:
    """Describe one asset and write its sidecar; None when the stage stopped before this call."""
    run.attempts[asset.name] = TaskRunContext.get().task_run.run_count
    if run.gate.stopped is not None:
        get_run_logger().info("not calling the describer for %s: the stage stopped (%s)", asset.name, run.gate.stopped.message)
        return None
    metadata = run.gate.describe(asset)
    write_sidecar(run.wd.sidecar(asset.name), asset, metadata)
    return metadata


# --- running many jobs --------------------------------------------------------------------


@dataclass
class Outcome:
    """How one job ended: ``described``, ``parked`` (detail = error class) or ``pending`` (detail = why)."""

    asset: Asset
    status: Literal["described", "parked", "pending"]
    detail: str = ""
    tokens: int = 0


def _settle(run: DescribeRun, asset: Asset, future: PrefectFuture) -> Outcome:
    """The outcome of a finished task; parks a failed job the hook did not (the backstop)."""
    future.wait()
    state = future.state
    if state.is_completed():
        metadata = future.result()
        if metadata is None:
            return Outcome(asset, "pending", "stage stopped before this call")
        return Outcome(asset, "described", tokens=metadata.tokens)
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return Outcome(asset, "pending", exc.message)
    if not isinstance(exc, BaseException):  # crashed or cancelled: no exception to classify
        exc = RuntimeError(state.message or state.name)
    task_run_id = str(future.task_run_id)
    job = run.store.get(asset.asset_id)
    if job is None or job.status != "parked" or job.task_run_id != task_run_id:
        job = run.park(asset, exc, run.attempts.get(asset.name, 1), task_run_id)
        get_run_logger().warning("parked %s as %s (the failure hook had not)", asset.name, job.error_class)
    return Outcome(asset, "parked", job.error_class)


def describe_jobs(run: DescribeRun, assets: list[Asset], concurrency: int) -> list[Outcome]:
    """Run the describe task for ``assets``, at most ``concurrency`` at once; one outcome per asset.

    Stops submitting when the gate closes; the assets never submitted are
    pending. A job whose outcome cannot be settled (e.g. the store is locked
    past its timeout) is pending with that reason, and the others go on.
    """
    logger = get_run_logger()
    task = describe_asset.with_options(
        retries=run.settings.gemini.max_attempts - 1,
        retry_delay_seconds=retry_delays(run.settings.gemini.retry_delay_s, run.settings.gemini.max_attempts - 1),
    )
    outcomes: dict[str, Outcome] = {}
    in_flight: dict[PrefectFuture, Asset] = {}
    queue = list(assets)
    pace = pace_for_flow_run("describe-")  # never far ahead of what Prefect's server has recorded
    submitted = 0

    def settle_one(future: PrefectFuture) -> None:
        asset = in_flight.pop(future)
        try:
            outcomes[asset.name] = _settle(run, asset, future)
        except StoreUnavailable as exc:
            outcomes[asset.name] = Outcome(asset, "pending", exc.message)
        except Exception as exc:  # one job's bookkeeping must not stop the others
            logger.error("describe %s: could not settle the job (%s: %s); it stays pending",
                         asset.name, type(exc).__name__, run.redact(str(exc)))
            outcomes[asset.name] = Outcome(asset, "pending", f"{type(exc).__name__}: {run.redact(str(exc))}")
        progress.advance()

    with StageProgress("describe", len(assets)) as progress:
        while queue or in_flight:
            while queue and len(in_flight) < concurrency and run.gate.stopped is None:
                if pace is not None:
                    pace.before_submit(submitted)
                asset = queue.pop(0)
                in_flight[task.submit(asset, run)] = asset
                submitted += 1
            if not in_flight:
                break
            settle_one(next(as_completed(list(in_flight))))
        for asset in queue:
            outcomes[asset.name] = Outcome(asset, "pending", "stage stopped before this call")
            progress.advance()
    if pace is not None and pace.waited_s:
        logger.info("waited %.0f s in all for Prefect's server to record describe runs", pace.waited_s)
    if run.gate.stopped is not None:
        waiting = sum(1 for o in outcomes.values() if o.status == "pending")
        logger.error("describe stopped: %s. No further Gemini calls this run; %d asset(s) left pending for the next run.",
                     run.gate.stopped.message, waiting)
    return [outcomes[a.name] for a in assets]


# --- the stage the stock-batch flow calls ----------------------------------------------------


@dataclass
class DescribeReport:
    """What the describe stage did this run."""

    #: Described now.
    described: list[str] = field(default_factory=list)
    #: Had a sidecar already.
    already: list[str] = field(default_factory=list)
    #: Parked now: name → error class.
    parked: dict[str, str] = field(default_factory=dict)
    #: Parked by an earlier run, left for a replay (not called).
    still_parked: list[str] = field(default_factory=list)
    #: Not described and not parked (stage stopped, store unavailable): the next run tries again.
    pending: list[str] = field(default_factory=list)
    #: Why the stage stopped calling the describer, if it did.
    stopped: str | None = None
    tokens: int = 0
    #: The describer used this run (``offline``, ``gemini:<model>``), empty when none was needed.
    describer: str = ""


def describe_assets(wd: Workdir, settings: Settings, assets: list[Asset]) -> DescribeReport:
    """Describe every asset that has no sidecar and is not parked; never raises for one job's failure."""
    logger = get_run_logger()
    report = DescribeReport()
    try:
        store = open_store(wd)
        parked = {job.job_id for job in store.list(status="parked")}
    except StoreUnavailable as exc:
        store, parked, report.stopped = None, set(), exc.message
    todo = []
    for asset in assets:
        sidecar = read_sidecar(wd.sidecar(asset.name))
        if sidecar is not None and sidecar.asset_id == asset.asset_id:
            report.already.append(asset.name)
        elif asset.asset_id in parked:
            report.still_parked.append(asset.name)
        else:
            todo.append(asset)
    if report.still_parked:
        logger.info("%d asset(s) parked by an earlier run are left for `microstock replay`", len(report.still_parked))
    if store is None:
        logger.error("describe skipped: %s", report.stopped)
        report.pending = [a.name for a in todo]
        return report
    if not todo:
        return report
    run = new_run(wd, settings, store)
    report.describer = run.gate.describer.name
    if report.describer == "offline":
        logger.info("No Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block): the offline "
                    "describer writes metadata from each image's prompt, embedded metadata or file name.")
    for outcome in describe_jobs(run, todo, settings.gemini.concurrency):
        if outcome.status == "described":
            report.described.append(outcome.asset.name)
            report.tokens += outcome.tokens
        elif outcome.status == "parked":
            report.parked[outcome.asset.name] = outcome.detail
        else:
            report.pending.append(outcome.asset.name)
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report


# --- replaying parked jobs ---------------------------------------------------------------------


@dataclass
class ReplayReport:
    """What a replay did: the original design's four numbers, plus what became of each job."""

    scanned: int = 0
    recovered: int = 0
    still_failing: int = 0
    dry_run: bool = True
    #: Names of the assets described by this replay (they go on to CSVs, pack and upload).
    recovered_assets: list[str] = field(default_factory=list)
    #: asset name (or job id) → why it is still parked.
    failing: dict[str, str] = field(default_factory=dict)
    #: Why the replay stopped calling the describer, if it did.
    stopped: str | None = None
    #: A dry run's list: one :func:`dry_run_line` per job it would replay.
    would_replay: list[str] = field(default_factory=list)

    def headline(self) -> str:
        if self.dry_run:
            return f"dry run: {self.scanned} parked job(s) would be replayed"
        return f"{self.scanned} replayed · {self.recovered} recovered · {self.still_failing} still failing"


def dry_run_line(job: ParkedJob) -> str:
    """The original design's dry-run line, with the asset and the attempts so far."""
    return f"[dry-run] would replay {job.job_id} ({job.error_class}) {job.asset_name}, {job.attempts} attempt(s) so far"


class _AssetFinder:
    """Finds a parked job's image: by its recorded name, else by content (the file was renamed)."""

    def __init__(self, wd: Workdir) -> None:
        self.wd = wd
        self._by_id: dict[str, Asset] | None = None

    def find(self, job: ParkedJob) -> Asset | None:
        path = self.wd.assets / (job.asset_name or str(job.payload.get("asset", "")))
        if path.name and path.is_file() and sha256_file(path) == job.job_id:
            return Asset(name=path.name, asset_id=job.job_id, path=path)
        if self._by_id is None:
            self._by_id = {a.asset_id: a for a in list_assets(self.wd.assets)}
        return self._by_id.get(job.job_id)


def replay_jobs(wd: Workdir, settings: Settings, store: DeadLetterStore, claimant: str, jobs: list[ParkedJob]) -> ReplayReport:
    """Run jobs claimed by ``claimant`` through the describe task again, with the same retry policy.

    A success writes the sidecar and marks the job ``recovered``; a failure
    is parked again by the task's hook (attempts add up, ``last_seen``, class
    and message updated) and released; a job whose image is gone is released
    with that message. Every claimed job ends recovered or released, whatever
    happens to the others (a released job with a claim that could not be
    dropped is free again after ``CLAIM_TIMEOUT_S``).
    """
    logger = get_run_logger()
    report = ReplayReport(scanned=len(jobs), dry_run=False)
    finder = _AssetFinder(wd)
    runnable: list[tuple[ParkedJob, Asset]] = []

    def settle(job: ParkedJob, asset: Asset | None, outcome: Outcome | None, message: str | None = None) -> None:
        label = asset.name if asset else (job.asset_name or job.job_id)
        try:
            if outcome is not None and outcome.status == "described":
                if store.mark_recovered(job.job_id, claimant):
                    events.job_recovered(job.job_id, label, job.attempts)
                else:
                    logger.warning("replay %s: described, but this replay no longer held the job", label)
                report.recovered += 1
                report.recovered_assets.append(label)
                logger.info("replay %s: recovered", label)
                return
            report.still_failing += 1
            report.failing[label] = message or (outcome.detail if outcome else "not replayed")
            store.release(job.job_id, claimant, error_message=message)
            logger.warning("replay %s: still failing (%s)", label, report.failing[label])
        except Exception as exc:  # one job's bookkeeping never stops the others
            logger.error("replay %s: %s", label, redact(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))

    for job in jobs:
        try:
            asset = finder.find(job)
        except OSError as exc:
            asset, message = None, f"replay: cannot read the image ({exc.strerror or exc})"
        else:
            message = None if asset else "replay: the image is no longer in assets/ with this content"
        if asset is None:
            settle(job, None, None, message)
            continue
        sidecar = read_sidecar(wd.sidecar(asset.name))
        if sidecar is not None and sidecar.asset_id == job.job_id:  # described meanwhile (e.g. by hand)
            settle(job, asset, Outcome(asset, "described"))
        else:
            runnable.append((job, asset))
    if not runnable:
        return report
    run = new_run(wd, settings, store)
    try:
        outcomes = describe_jobs(run, [asset for _, asset in runnable], settings.gemini.concurrency)
    except BaseException:
        for job, _ in runnable:
            store.release(job.job_id, claimant)
        raise
    for (job, asset), outcome in zip(runnable, outcomes):
        settle(job, asset, outcome)
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report
