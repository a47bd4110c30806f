"""The describe stage in Prefect: a ``describe`` task run per asset, its parking hook, the batch ``collect`` task.

The one place where orchestration and the describe stage cross. The stage's
logic is :mod:`tasks.stages.describe` (plain Python, one job loop taking
``submit(asset) -> future``); this module hands it Prefect's way of starting
the jobs (:data:`IN_PREFECT`):

* each job is one ``describe`` task run (``describe-<asset name>``),
  started by the task's ``submit``; :func:`as_task_runs` is the one adapter
  from its PrefectFuture to the future of an
  :class:`~tasks.stages.describe_job.Outcome` the loop waits for. Its body is
  :func:`~tasks.stages.describe_job.attempt_job`: the attempts and the delays
  between them are the job's, under the one retry policy and the workdir's
  ``gemini.max_attempts`` / ``retry_delay_s``, so the decorator declares no
  Prefect retries and nothing is overridden at run time;
* a described job ends ``Completed`` with one line on where its time went;
  a job that failed for good ends in a failed-type state named **Parked**
  whose message is one line (error class, attempts, reason), not a
  traceback; a StageStopped fails the run as itself (not parked: the asset
  stays pending); anything unexpected fails it as usual, with Prefect's
  traceback;
* a run that ends in a failed-type state is parked by its ``on_failure``
  hook, :func:`park_failed_job`. Prefect only logs a hook's exceptions, so
  the adapter parks what the hook could not record and a crashed run; both
  call :meth:`~tasks.stages.describe_job.DescribeRun.park`, which parks a job
  once with the attempts made. Nothing calls ``.result()`` on a failed
  future, so the flow ends Completed with parked jobs.

The server's shared quota (:mod:`tasks.orchestration.shared_quota`) is handed
to the stage here too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import PrefectFuture
from prefect.states import Completed, Failed, State

from tasks.core.errors import StageStopped, StoreUnavailable, error_class_of_parked
from tasks.core.records import Asset
from tasks.core.reports import DescribeReport
from tasks.gemini.batch import BatchJob
from tasks.observe.artifacts import publish_batch_job
from tasks.orchestration.shared_quota import shared_quota_limiter
from tasks.stages.batch_describe import BatchStage, Collected, collect_job
from tasks.stages.describe import DescribeWith, Submit, describe_stage
from tasks.stages.describe_job import DescribeRun, Outcome, attempt_job
from tasks.stages.run_context import RunContext
from tasks.stores.batch_jobs import JobRecord

log = logging.getLogger(__name__)

#: The name of a describe task run's final state when its job is parked (a failed-type state).
PARKED = "Parked"


def park_failed_job(task, task_run, state) -> None:
    """``on_failure`` hook: park the job (:meth:`~tasks.stages.describe_job.DescribeRun.park`), with the attempts
    the job made.

    StageStopped is not parked (the asset stays pending). A store that cannot
    be written is logged in one line; the adapter tries again. A job whose
    task run ends Parked is not logged again: Prefect's own line as the task
    run ends ("Finished in state Parked('<class> after <n> attempt(s):
    <reason>')") already says it, under the task run named for the asset. An
    unexpected failure (a bug: a plain Failed) gets one line saying it was
    parked, as what; Prefect's line before it carries the traceback.
    """
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return
    params = TaskRunContext.get().parameters
    run: DescribeRun = params["run"]
    asset: Asset = params["asset"]
    try:
        job = run.park(asset, exc, task_run_id=str(task_run.id))
    except StoreUnavailable as err:
        log.error("could not park %s: %s", asset.name, err.message)
        return
    if state.name != PARKED:
        log.warning("parked %s as %s after %d attempt(s)", asset.name, job.error_class, job.attempts)


@task(
    name="describe",
    task_run_name="describe-{asset.name}",
    # No tags: Prefect asks the server for tag concurrency slots on every run of a tagged task
    # (a write to its database), ≈ 40–60 ms per asset against ≈ 6 ms untagged (docs/BENCHMARKS.md).
    # No Prefect retries: the job's attempts are attempt_job's, under the workdir's settings.
    on_failure=[park_failed_job],
    cache_policy=NO_CACHE,
)
def describe_asset(asset: Asset, run: DescribeRun) -> State:
    """Describe one asset (:func:`~tasks.stages.describe_job.attempt_job`); the state that says how it ended, with
    its :class:`~tasks.stages.describe_job.Outcome` as the result.

    StageStopped raised when this job's call stopped the stage (the task run fails as itself, not parked).
    """
    outcome = attempt_job(run, asset)
    if isinstance(outcome.failure, StageStopped):
        raise outcome.failure
    if outcome.status == "failed":
        return Failed(name=PARKED, data=outcome.failure, message=f"{error_class_of_parked(outcome.failure)} after "
                                                                 f"{outcome.attempts} attempt(s): {outcome.detail}")
    if outcome.status == "pending":
        return Completed(data=outcome, message=f"not described: {outcome.detail}")
    times = outcome.times
    if run.gate.limiter is None:
        message = f"described in {times.call_s:.1f} s ({run.describer.name} describer, no quota)"
    else:
        called = "Gemini" if run.describer.gemini_quota else run.describer.name
        message = (f"described in {times.quota_wait_s + times.call_s:.1f} s ({called} {times.call_s:.1f} s, "
                   f"quota wait {times.quota_wait_s:.1f} s)")
    return Completed(data=outcome, message=message)  # Prefect logs it as the run ends, the UI shows it


def outcome_of(run: DescribeRun, asset: Asset, future: PrefectFuture) -> Outcome:
    """The outcome of a finished describe task run; a failed job the hook did not park is parked here."""
    future.wait()  # finished: this keeps its final state, read without asking the server
    state = future.state
    if state.is_completed():
        return future.result()
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return Outcome(asset, "pending", exc.message)
    if not isinstance(exc, BaseException):  # crashed or cancelled: no exception to classify
        exc = RuntimeError(state.message or state.name)
    hook_parked = asset.name in run.parked
    outcome = run.settle(Outcome(asset, "failed", run.reason(exc), run.attempts.get(asset.name, 1), failure=exc),
                         str(future.task_run_id))
    if outcome.status == "parked" and not hook_parked:
        log.warning("parked %s as %s (the failure hook had not)", asset.name, outcome.detail)
    return outcome


@contextmanager
def as_task_runs(run: DescribeRun) -> Iterator[Submit]:
    """Prefect's way of starting the jobs: ``describe_asset.submit``, its PrefectFuture adapted to a future of the
    job's :class:`~tasks.stages.describe_job.Outcome` (set once the task run has finished)."""

    def submit(asset: Asset) -> Future:
        done: Future = Future()

        def finished(future: PrefectFuture) -> None:
            try:
                done.set_result(outcome_of(run, asset, future))
            except BaseException as exc:  # the loop says why the job stays pending
                done.set_exception(exc)

        describe_asset.submit(asset, run).add_done_callback(finished)
        return done

    yield submit


def _collect_run_name(parameters: dict[str, Any]) -> str:
    """``collect-<job id>``: the batch job's id without its ``batches/`` prefix."""
    return "collect-" + (parameters["record"].job_name or "").rsplit("/", 1)[-1]


@task(name="collect", task_run_name=_collect_run_name, cache_policy=NO_CACHE)
def collect_in_task_run(stage: BatchStage, record: JobRecord, job: BatchJob, tries: dict[str, int]) -> Collected:
    """Collect one ended batch job (:func:`~tasks.stages.batch_describe.collect_job`) under this task run, and
    publish its table artifact (``batch-<display name>``, a row per asset)."""
    done = collect_job(stage, record, job, tries, str(TaskRunContext.get().task_run.id))
    publish_batch_job(record.display_name, record.job_name or "", job.state, done.rows)
    return done


#: The describe stage run by Prefect: task runs per asset and per collected batch job, the server's shared quota.
IN_PREFECT = DescribeWith(jobs=as_task_runs, collect=collect_in_task_run, quota=shared_quota_limiter)


def describe_assets(ctx: RunContext, assets: list[Asset]) -> DescribeReport:
    """The describe stage of a flow run (:func:`~tasks.stages.describe.describe_stage` run :data:`IN_PREFECT`)."""
    return describe_stage(ctx, assets, IN_PREFECT)
