"""The describe stage in Prefect: a ``describe`` task run per asset, its parking hook, the batch ``collect`` task.

The stage's logic is :mod:`tasks.stages.describe` (plain Python); this module
hands it Prefect's way of running the jobs (:data:`IN_PREFECT`):

* each job is one ``describe`` task run (``describe-<asset name>``),
  submitted at most ``gemini.concurrency`` at a time
  (:func:`~tasks.orchestration.windowed.submit_in_window`). Its body is
  :func:`~tasks.stages.describe.attempt_job`: the attempts and the delays
  between them are the job's, under the one retry policy and the workdir's
  ``gemini.max_attempts`` / ``retry_delay_s``, so the decorator declares no
  Prefect retries and nothing is overridden at run time;
* a described job ends ``Completed`` with one line on where its time went
  (:func:`described_state`); an expected failure ends in a failed-type state
  named **Parked** whose message is one line (error class, attempts, reason),
  not a traceback (:func:`parked_state`); a StageStopped fails the run as
  itself (not parked: the asset stays pending); anything unexpected fails it
  as usual, with Prefect's traceback;
* a run that ends in a failed-type state is parked by its ``on_failure``
  hook, :func:`park_failed_job`. Prefect only logs a hook's exceptions, so
  the stage's backstop (:func:`settle_task_run`) parks what the hook could
  not record and a crashed run; both go through the one park path,
  :meth:`~tasks.stages.describing.DescribeRun.park_once`, so a job is parked
  exactly once with the attempts made. The stage never calls ``.result()``
  on a failed future, so the flow ends Completed with parked jobs.

The server's shared quota (:mod:`tasks.orchestration.shared_quota`) is handed
to the stage here too.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import PrefectFuture
from prefect.states import Completed, Failed, State

from tasks.core.errors import MicrostockError, StageStopped, StoreUnavailable, error_class_of_parked
from tasks.core.records import Asset, Metadata
from tasks.core.reports import DescribeReport
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.batch import BatchJob
from tasks.gemini.ratelimit import CallTimes
from tasks.observe.artifacts import publish_batch_job
from tasks.orchestration.shared_quota import shared_quota_limiter
from tasks.orchestration.windowed import submit_in_window
from tasks.stages.batch_describe import BatchStage, Collected, collect_job
from tasks.stages.describe import DescribeWith, OnDone, Outcome, attempt_job, describe_stage, described
from tasks.stages.describing import DescribeRun
from tasks.stores.batch_jobs import JobRecord

log = logging.getLogger(__name__)

#: The name of a describe task run's final state when its job is parked (a failed-type state).
PARKED = "Parked"


def park_failed_job(task, task_run, state) -> None:
    """``on_failure`` hook: park the job (the one park path), with the attempts the job made.

    StageStopped is not parked (the asset stays pending). A store that cannot
    be written is logged in one line; the stage's backstop tries again. A job
    whose task run ends Parked is not logged again: Prefect's own line as the
    task run ends ("Finished in state Parked('<class> after <n> attempt(s):
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
        job, parked_now = run.park_once(asset, exc, str(task_run.id))
    except StoreUnavailable as err:
        log.error("could not park %s: %s", asset.name, err.message)
        return
    if parked_now and state.name != PARKED:
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
def describe_asset(asset: Asset, run: DescribeRun) -> State | None:
    """Describe one asset (:func:`~tasks.stages.describe.attempt_job`); the state that says how it ended.

    None when the stage stopped before this call; StageStopped raised when this job's call stopped it.
    """
    attempted = attempt_job(run, asset)
    if attempted.not_called:
        return None
    if attempted.stopped is not None:
        raise attempted.stopped
    if attempted.failure is not None:
        return parked_state(attempted.failure, attempted.attempts, run.redact)
    return described_state(attempted.metadata, attempted.times,
                           run.describer.name if run.gate.limiter is None else None)


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


def parked_state(exc: MicrostockError, attempts: int, redact) -> State:
    """``Failed`` named Parked, with one line: class, attempts, reason (the on_failure hook parks the job)."""
    reason = (redact(exc.message).splitlines() or [type(exc).__name__])[0]
    return Failed(name=PARKED, data=exc,
                  message=f"{error_class_of_parked(exc)} after {attempts} attempt(s): {reason[:300]}")


def settle_task_run(run: DescribeRun, asset: Asset, future: PrefectFuture) -> Outcome:
    """The outcome of a finished describe task run; the backstop parks a failed job the hook did not."""
    future.wait()
    state = future.state
    if state.is_completed():
        return described(asset, future.result())
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, StageStopped):
        return Outcome(asset, "pending", exc.message)
    if not isinstance(exc, BaseException):  # crashed or cancelled: no exception to classify
        exc = RuntimeError(state.message or state.name)
    job, parked_now = run.park_once(asset, exc, str(future.task_run_id))
    if parked_now:
        log.warning("parked %s as %s (the failure hook had not)", asset.name, job.error_class)
    return Outcome(asset, "parked", job.error_class)


def run_as_task_runs(run: DescribeRun, assets: list[Asset], on_done: OnDone) -> list[Asset]:
    """Prefect's job runner: a ``describe`` task run per asset, a window of ``gemini.concurrency`` at a time."""
    return submit_in_window(describe_asset, assets, run.settings.gemini.concurrency, lambda asset: (asset, run),
                            on_done=lambda asset, future: on_done(asset, lambda: settle_task_run(run, asset, future)),
                            stop=lambda: run.gate.stopped is not None)


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
IN_PREFECT = DescribeWith(jobs=run_as_task_runs, collect=collect_in_task_run, quota=shared_quota_limiter)


def describe_assets(wd: Workdir, settings: Settings, assets: list[Asset]) -> DescribeReport:
    """The describe stage of a flow run (:func:`~tasks.stages.describe.describe_stage` run :data:`IN_PREFECT`)."""
    return describe_stage(wd, settings, assets, IN_PREFECT)
