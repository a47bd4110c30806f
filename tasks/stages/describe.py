"""The describe stage: one metadata sidecar per asset, retried by Prefect, parked when it cannot succeed.

An asset with a sidecar is described and never described again; an asset
whose job is parked in the dead-letter store waits for a replay and is not
called again by a normal run. Every other asset becomes one ``describe``
task run (``describe-<asset name>``), submitted at most
``gemini.concurrency`` at a time.

What happens to a failure depends only on its :mod:`tasks.core.errors` class:

* RateLimited (429) never reaches Prefect: the gate's call through the
  shared rate limiter holds back every Gemini call of the process for what
  the service asked (RetryInfo, the message's "retry in Ns", else 60 s) and
  calls again within the same attempt; only the run's total wait is bounded
  (``gemini.rate_limit_wait_s``, then StageStopped).
* TransientError — Prefect retries it (``retries`` = ``max_attempts - 1``,
  the schedule of :mod:`tasks.core.retry`).
* PermanentError, BadInput, anything unexpected — no retry.
* StageStopped (daily quota or budget, refused key, retired model, refused
  location or request shape, 429 waits used up) — no retry, not parked: the
  :class:`~tasks.stages.describing.DescriberGate` closes, no further call is
  made this run, the assets not yet described stay pending for the next run.

An expected failure that is not retried ends the task run in a failed-type
state named **Parked** whose message is one line (error class, attempts,
reason), not a traceback; anything unexpected fails it as usual. A task that
ends in a failed-type state (other than StageStopped) is parked by its
``on_failure`` hook, :func:`park_failed_job`, with ``attempts`` =
``task_run.run_count``. Prefect only logs a hook's exceptions, so the stage
checks every task's final state afterwards and parks what the hook did not
(:func:`describe_jobs`). The stage never calls ``.result()`` on a failed
future, so the flow ends Completed with parked jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import PrefectFuture
from prefect.logging import get_run_logger
from prefect.states import Completed, Failed, State

from tasks.core.errors import MicrostockError, StageStopped, StoreUnavailable, TransientError, error_class_of_parked
from tasks.core.records import Asset, Metadata, Usage
from tasks.core.secrets import gemini_key
from tasks.core.reports import DescribeReport
from tasks.core.retry import JITTER_FACTOR, backoff_schedule
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.ratelimit import CallTimes
from tasks.observe.progress import StageProgress
from tasks.orchestration.windowed import submit_in_window
from tasks.stages.batch_describe import describe_in_batches
from tasks.stages.describing import DescribeRun, sort_out
from tasks.stores.dead_letter_sqlite import open_store


# --- the Prefect task, its retry condition and its hook ----------------------------------


def retry_only_transient(task, task_run, state) -> bool:
    """Prefect's ``retry_condition_fn``: retry TransientError only; anything else fails at once."""
    return isinstance(state.result(raise_on_failure=False), TransientError)


def park_failed_job(task, task_run, state) -> None:
    """``on_failure`` hook: park the job with ``attempts = task_run.run_count``.

    StageStopped is not parked (the asset stays pending). A store that cannot
    be written is logged in one line; the stage's backstop tries again. A job
    whose task run ends Parked is not logged again: Prefect's own line as the
    task run ends ("Finished in state Parked('<class> after <n> attempt(s):
    <reason>')") already says it, under the task run named for the asset. An
    unexpected failure (a bug: a plain Failed) gets one line saying it was
    parked, as what, with the traceback — Prefect logs an exception's
    traceback only when the task's retries are used up, never for one the
    retry condition refuses on an earlier attempt.
    """
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return
    params = TaskRunContext.get().parameters
    run: DescribeRun = params["run"]
    asset: Asset = params["asset"]
    try:
        job = run.park(asset, exc, task_run.run_count, str(task_run.id))
    except StoreUnavailable as err:
        get_run_logger().error("could not park %s: %s", asset.name, err.message)
        return
    if state.name != PARKED:
        logged_by_prefect = task_run.run_count > task.retries
        get_run_logger().warning("parked %s as %s after %d attempt(s)", asset.name, job.error_class, job.attempts,
                                 exc_info=None if logged_by_prefect else exc)


@task(
    name="describe",
    task_run_name="describe-{asset.name}",
    # No tags: Prefect asks the server for tag concurrency slots on every run of a tagged task
    # (a write to its database), ≈ 40–60 ms per asset against ≈ 6 ms untagged (docs/BENCHMARKS.md).
    retries=3,
    retry_delay_seconds=backoff_schedule(2.0, 3),
    retry_jitter_factor=JITTER_FACTOR,
    retry_condition_fn=retry_only_transient,
    on_failure=[park_failed_job],
    cache_policy=NO_CACHE,
)
def describe_asset(asset: Asset, run: DescribeRun) -> Metadata | State | None:
    """Describe one asset and write its sidecar; the metadata in the state :func:`described_state` makes
    (saying where the time went), or None when the stage stopped before this call.

    An expected failure that will not be retried (a permanent one, or a transient one on the
    last attempt) ends the task in the state :func:`parked_state` makes, not with a traceback.
    """
    ctx = TaskRunContext.get()
    attempt = ctx.task_run.run_count
    run.attempts[asset.name] = attempt
    if run.gate.stopped is not None:
        get_run_logger().info("not calling the describer for %s: the stage stopped (%s)", asset.name, run.gate.stopped.message)
        return None
    times = CallTimes()
    try:
        metadata = run.gate.describe(asset, times)
    except StageStopped:
        raise
    except MicrostockError as exc:
        if isinstance(exc, TransientError) and attempt <= ctx.task.retries:
            raise  # Prefect retries it
        return parked_state(exc, attempt, run.redact)
    run.save(asset, metadata)
    return described_state(metadata, times, run.describer.name if run.gate.limiter is None else None)


def described_state(metadata: Metadata, times: CallTimes, offline: str | None = None) -> State:
    """``Completed`` with the metadata, and one line on where this attempt's time went: calling Gemini apart
    from waiting for the quota (``offline``: the name of a describer without a quota, timed alone).

    Prefect logs the line as the task run ends ("Finished in state Completed('described in …')") and the UI
    shows it with the task run's state: no extra log line per asset, and no run timings in the sidecar.
    """
    if offline is not None:
        return Completed(data=metadata, message=f"described in {times.call_s:.1f} s ({offline} describer, no quota)")
    total = times.quota_wait_s + times.call_s
    return Completed(data=metadata, message=f"described in {total:.1f} s (Gemini {times.call_s:.1f} s, "
                                            f"quota wait {times.quota_wait_s:.1f} s)")


#: The name of a describe task run's final state when its job is parked (a failed-type state).
PARKED = "Parked"


def parked_state(exc: MicrostockError, attempts: int, redact) -> State:
    """``Failed`` named Parked, with one line: class, attempts, reason (the on_failure hook parks the job)."""
    reason = (redact(exc.message).splitlines() or [type(exc).__name__])[0]
    return Failed(name=PARKED, data=exc,
                  message=f"{error_class_of_parked(exc)} after {attempts} attempt(s): {reason[:300]}")


# --- running many jobs --------------------------------------------------------------------


@dataclass
class Outcome:
    """How one job ended: ``described``, ``parked`` (detail = error class) or ``pending`` (detail = why)."""

    asset: Asset
    status: Literal["described", "parked", "pending"]
    detail: str = ""
    tokens: int = 0
    usage: Usage | None = None
    cost_usd: float | None = None


def _settle(run: DescribeRun, asset: Asset, future: PrefectFuture) -> Outcome:
    """The outcome of a finished task; parks a failed job the hook did not (the backstop)."""
    future.wait()
    state = future.state
    if state.is_completed():
        metadata = future.result()
        if metadata is None:
            return Outcome(asset, "pending", "stage stopped before this call")
        return Outcome(asset, "described", tokens=metadata.tokens, usage=metadata.usage, cost_usd=metadata.cost_usd)
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
    gemini = run.settings.gemini
    task = describe_asset.with_options(retries=gemini.max_attempts - 1,
                                       retry_delay_seconds=backoff_schedule(gemini.retry_delay_s, gemini.max_attempts - 1))
    outcomes: dict[str, Outcome] = {}

    def settle_one(asset: Asset, future: PrefectFuture) -> None:
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
        never = submit_in_window(task, assets, concurrency, lambda asset: (asset, run), on_done=settle_one,
                                 stop=lambda: run.gate.stopped is not None)
        for asset in never:
            outcomes[asset.name] = Outcome(asset, "pending", "stage stopped before this call")
            progress.advance()
    if run.gate.stopped is not None:
        waiting = sum(1 for o in outcomes.values() if o.status == "pending")
        logger.error("describe stopped: %s. No further Gemini calls this run; %d asset(s) left pending for the next run.",
                     run.gate.stopped.message, waiting)
    return [outcomes[a.name] for a in assets]


# --- the stage the stock-batch flow calls ----------------------------------------------------


def describe_assets(wd: Workdir, settings: Settings, assets: list[Asset]) -> DescribeReport:
    """Describe every asset that has no sidecar and is not parked; never raises for one job's failure.

    With ``gemini.mode = "batch"`` (and a key) :func:`~tasks.stages.batch_describe.describe_in_batches`
    does it instead: collect the finished batch jobs, submit the rest.
    """
    logger = get_run_logger()
    report = DescribeReport()
    try:
        store = open_store(wd)
        parked = {job.job_id for job in store.list(status="parked")}
    except StoreUnavailable as exc:
        store, parked, report.stopped = None, set(), exc.message
    if store is not None and settings.gemini.mode == "batch":
        key = gemini_key()
        if key:
            return describe_in_batches(wd, settings, store, key, assets)
        logger.warning("`gemini.mode = batch` needs a Gemini key: without one the offline describer runs "
                       "as in sync mode")
    todo = sort_out(wd, assets, parked, report)
    if report.still_parked:
        logger.info("%d asset(s) parked by an earlier run are left for `microstock replay`", len(report.still_parked))
    if store is None:
        logger.error("describe skipped: %s", report.stopped)
        report.pending = [a.name for a in todo]
        return report
    if not todo:
        return report
    run = DescribeRun.start(wd, settings, store)
    report.describer = run.gate.describer.name
    if report.describer == "offline":
        logger.info("No Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block): the offline "
                    "describer writes metadata from each image's prompt, embedded metadata or file name.")
    for outcome in describe_jobs(run, todo, settings.gemini.concurrency):
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
        logger.warning("cost unknown for %d asset(s): no confirmed price for %s in tasks/gemini/prices.toml "
                       "(docs/GEMINI.md)", report.cost_unknown, run.describer.model)
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report


