"""The describe stage: one metadata sidecar per asset, each job's attempts under the one retry policy,
parked when it cannot succeed. Plain Python: how each job runs is handed in (:class:`DescribeWith`).

An asset with a sidecar is described and never described again; an asset
whose job is parked in the dead-letter store waits for a replay and is not
called again by a normal run. Every other asset is one job, at most
``gemini.concurrency`` at a time, in one job loop (:func:`describe_jobs`)
that takes ``submit(asset) -> future``: a thread pool here (:func:`in_threads`),
or a ``describe`` task run per asset under Prefect
(:mod:`tasks.orchestration.describe_runs`). Either way each job is
:func:`~tasks.stages.describe_job.attempt_job`, its result an
:class:`~tasks.stages.describe_job.Outcome`, and a job that failed for good is
parked by :meth:`~tasks.stages.describe_job.DescribeRun.park`.

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
  :class:`~tasks.stages.describe_job.DescriberGate` closes, no further call is
  made this run, the assets not yet described stay pending for the next run.

Every job ends described, parked or pending (a store that cannot be written
leaves the job pending, and the others go on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from tasks.core.errors import StoreUnavailable
from tasks.core.files import exclusive_lock
from tasks.core.records import Asset, Usage
from tasks.core.reports import DescribeReport
from tasks.observe.progress import StageProgress
from tasks.stages.batch_describe import CollectJob, collect_job, describe_in_batches
from tasks.stages.describe_job import DescribeRun, Outcome, QuotaFor, run_job, sort_out
from tasks.stages.offline_describer import Describer, sees_pictures
from tasks.stages.run_context import RunContext

log = logging.getLogger(__name__)

#: ``submit(asset)``: start one asset's job; its future gives the job's :class:`Outcome`.
Submit = Callable[[Asset], "Future[Outcome]"]

#: How a stage run's jobs are started: ``jobs(run)`` gives the ``submit`` of that run, for as long as it is open.
Jobs = Callable[[DescribeRun], AbstractContextManager[Submit]]


@contextmanager
def in_threads(run: DescribeRun) -> Iterator[Submit]:
    """The plain way: each job (:func:`~tasks.stages.describe_job.run_job`) in a thread, ``gemini.concurrency``
    threads."""
    with ThreadPoolExecutor(max(1, run.settings.gemini.concurrency), thread_name_prefix="describe") as pool:
        yield lambda asset: pool.submit(run_job, run, asset)


def describe_jobs(run: DescribeRun, assets: list[Asset], submit: Submit) -> list[Outcome]:
    """The one job loop: ``submit`` each asset's job, at most ``gemini.concurrency`` in flight, in order, none
    once the gate is closed; one outcome per asset, in order.

    The assets never started (the gate closed) are pending. A job whose future raises (its bookkeeping failed:
    the store locked past its timeout, a bug in settling) is pending with that reason, and the others go on.
    """
    outcomes: dict[str, Outcome] = {}
    queue = list(reversed(assets))  # pop() from the end takes them in order
    in_flight: dict[Future, Asset] = {}
    with StageProgress("describe", len(assets)) as progress:
        while queue or in_flight:
            while queue and len(in_flight) < run.settings.gemini.concurrency and run.gate.stopped is None:
                asset = queue.pop()
                in_flight[submit(asset)] = asset
            if not in_flight:
                break
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                asset = in_flight.pop(future)
                outcomes[asset.name] = _outcome_of(run, asset, future)
                progress.advance()
        for asset in queue:
            outcomes[asset.name] = Outcome(asset, "pending", "stage stopped before this call")
            progress.advance()
    if run.gate.stopped is not None:
        waiting = sum(1 for o in outcomes.values() if o.status == "pending")
        log.error("describe stopped: %s. No further Gemini calls this run; %d asset(s) left pending for the next run.",
                  run.gate.stopped.message, waiting)
    return [outcomes[a.name] for a in assets]


def _outcome_of(run: DescribeRun, asset: Asset, future: Future) -> Outcome:
    try:
        return future.result()
    except StoreUnavailable as exc:
        return Outcome(asset, "pending", exc.message)
    except Exception as exc:  # one job's bookkeeping must not stop the others
        log.error("describe %s: could not settle the job (%s: %s); it stays pending",
                  asset.name, type(exc).__name__, run.redact(str(exc)))
        return Outcome(asset, "pending", f"{type(exc).__name__}: {run.redact(str(exc))}")


# --- the stage ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DescribeWith:
    """The describe stage's collaborators: how the jobs are started, how a finished batch job is collected, the
    quota shared by processes, and a describer to use instead of the one the key selects (only a test sets it
    today: the Prefect side and replay take the settings' own).

    The defaults are plain Python; :data:`tasks.orchestration.describe_runs.IN_PREFECT` gives Prefect's.
    """

    jobs: Jobs = in_threads
    collect: CollectJob = collect_job
    quota: QuotaFor | None = None
    describer: Describer | None = None


#: Held in ``assets/`` while a run describes: two runs on one workdir never pay for the same asset twice.
DESCRIBE_LOCK = ".describe.lock"


def describe_stage(ctx: RunContext, assets: list[Asset], how: DescribeWith = DescribeWith()) -> DescribeReport:
    """Describe every asset that has no sidecar and is not parked; never raises for one job's failure.

    With ``gemini.mode = "batch"`` (and a key) :func:`~tasks.stages.batch_describe.describe_in_batches`
    does it instead: collect the finished batch jobs, submit the rest.

    One run at a time describes a workdir's assets (``assets/.describe.lock``): a second run says so and
    waits, then finds the first one's sidecars and parked jobs and describes only what is left.
    """
    with exclusive_lock(ctx.wd.assets / DESCRIBE_LOCK, "describing", waiting=lambda: log.warning(
            "another run is describing the assets of %s: waiting for it, then describing what it left",
            ctx.wd.assets)):
        return _describe_what_is_left(ctx, assets, how)


def _describe_what_is_left(ctx: RunContext, assets: list[Asset], how: DescribeWith) -> DescribeReport:
    report = DescribeReport()
    try:
        parked = {job.job_id for job in ctx.store.list(status="parked")}
    except StoreUnavailable as exc:
        report.stopped = exc.message
        log.error("describe skipped: %s", report.stopped)
        report.pending = [a.name for a in sort_out(ctx.wd, assets, set(), report)]
        return report
    if ctx.settings.gemini.mode == "batch":
        if ctx.gemini_key and ctx.settings.describer.provider == "gemini":
            return _images_in_batches_clips_one_by_one(ctx, assets, how, parked)
        log.warning("`gemini.mode = batch` is Gemini's Batch API and needs a Gemini key and `[describer] provider "
                    "= gemini`: the %s describer describes one call per asset, as in sync mode",
                    ctx.settings.describer.provider if ctx.settings.describer.provider != "gemini" else "offline")
    return _describe_one_by_one(ctx, assets, how, parked, report)


def _images_in_batches_clips_one_by_one(ctx: RunContext, assets: list[Asset], how: DescribeWith,
                                        parked: set[str]) -> DescribeReport:
    """Batch mode: the images through Gemini's Batch API; the clips one call each, as in sync mode (a batch
    request names a large clip by an uploaded file, which Google keeps 48 hours, while a batch job may take 24:
    docs/INTERFACE.md, "Video clips"). Clips are not tried once the batch side stopped (key, quota, store)."""
    clips = [a for a in assets if a.is_clip]
    report = describe_in_batches(ctx, [a for a in assets if not a.is_clip], how.collect)
    if not clips:
        return report
    if report.stopped:
        report.pending.extend(a.name for a in sort_out(ctx.wd, clips, parked, report))
        return report
    log.info("batch mode: %d clip(s) described one call each (the Batch API takes images only here)", len(clips))
    return _describe_one_by_one(ctx, clips, how, parked, report)


def _describe_one_by_one(ctx: RunContext, assets: list[Asset], how: DescribeWith, parked: set[str],
                         report: DescribeReport) -> DescribeReport:
    """The sync describe of ``assets`` (one job each, :func:`describe_jobs`), added to ``report``."""
    sees = how.describer.name != "offline" if how.describer else sees_pictures(ctx.settings, ctx.gemini_key)
    todo = sort_out(ctx.wd, assets, parked, report, sees)
    if report.still_parked:
        log.info("%d asset(s) parked by an earlier run are left for `microstock replay`", len(report.still_parked))
    if not todo:
        return report
    run = DescribeRun.start(ctx, how.describer, how.quota)
    report.describer = run.describer.name
    if report.describer == "offline":
        log.info("No Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block): the offline "
                 "describer writes metadata from each image's prompt, embedded metadata or file name (a clip's "
                 "from its tags or name).")
    with how.jobs(run) as submit:
        outcomes = describe_jobs(run, todo, submit)
    for outcome in outcomes:
        if outcome.status == "described":
            metadata = outcome.metadata
            report.described.append(outcome.asset.name)
            report.tokens += metadata.tokens
            report.usage += metadata.usage or Usage()
            if metadata.cost_usd is None:
                report.cost_unknown += 1
            else:
                report.cost_usd += metadata.cost_usd
        elif outcome.status == "parked":
            report.parked[outcome.asset.name] = outcome.detail
        else:
            report.pending.append(outcome.asset.name)
    if report.cost_unknown:
        log.warning("cost unknown for %d asset(s): no confirmed price for %s in %s", report.cost_unknown,
                    run.describer.model, "tasks/gemini/prices.toml (docs/GEMINI.md)" if run.describer.gemini_quota
                    else "[describer] usd_per_million_input and usd_per_million_output")
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report
