"""Batch mode of the describe stage (``[gemini] mode = "batch"``): collect the finished jobs, then submit.

Every run in batch mode, and every ``collect-batches`` run, first **collects**:
for each live job of the workdir's record (:mod:`tasks.stores.batch_jobs`)

* an intent without a job name (a crash between create and record) is
  resolved by its display name among the account's jobs: the job found is
  adopted; when none is, the create never happened, the intent ends
  ``abandoned`` and its assets are pending again (submitted below under the
  same display name, which depends only on the assets and the try);
* a pending or running job is left alone: its assets are ``in_batch``;
* a succeeded job's answers become sidecars through
  :meth:`~tasks.stages.describe_job.DescribeRun.save` (as in sync mode), each
  per-request error is parked through
  :meth:`~tasks.stages.describe_job.DescribeRun.park` (same store, same
  columns, same classes, so ``dead-letter-summary`` and ``replay-dead-letters``
  work unchanged; a replay goes through sync mode); an asset the job did not
  answer is pending again;
* an expired, cancelled or failed job returns its assets to pending; an asset
  whose jobs ended so ``gemini.batch_resubmits + 1`` times is parked with the
  ended job's class (``batch:<state>``).

In a flow run each collected job is one task run ``collect-<job id>`` and one
table artifact (a row per asset: described, or parked with its class) —
readable at 1,000 assets where 1,000 task runs would not be
(docs/OPERATIONS.md); :mod:`tasks.orchestration.describe_runs` hands that
wrapper of :func:`collect_job` in. No Prefect here.

Then the run **submits** the assets that are not described, not parked and in
no live job, as jobs of inline requests each under
:data:`~tasks.gemini.batch.JOB_BUDGET_BYTES` (Google's 20 MB inline limit
less a margin): the intent is recorded and fsynced before the create call,
the job name after it returns. A create Gemini refuses (4xx) made no job: its
assets are parked with the refusal's class. A stop (key, quota, model) ends
the intent, its assets stay pending. A timeout or 5xx may have made the job:
the intent stays for the next run to resolve. Either of the last two stops
submitting. The run goes on with what is described; nothing waits for a job.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tasks.agencies.keyword_rules import avoided_words
from tasks.core.errors import BadInput, BatchJobEnded, MicrostockError, PermanentError, StageStopped
from tasks.core.files import sha256_file
from tasks.core.records import Asset, Metadata, Usage, read_sidecar
from tasks.core.reports import DescribeReport
from tasks.gemini.batch import JOB_BUDGET_BYTES, BatchJob, GeminiBatches
from tasks.gemini.models import cost_usd
from tasks.stages.describe_job import DescribeRun, sort_out
from tasks.stages.offline_describer import select_describer
from tasks.stages.run_context import RunContext
from tasks.stores.batch_jobs import BatchJobs, JobRecord, display_name, workdir_prefix

log = logging.getLogger(__name__)

#: States of a job still at work; ``unknown`` (a state newer than this code) is waited on too.
LIVE_STATES = ("pending", "running", "unknown")


@dataclass
class Collected:
    """What collecting one job made of its assets: name → ``described`` / ``parked: <class>`` / ``pending: why``,
    and the tokens and cost of the answers written as sidecars."""

    rows: dict[str, str] = field(default_factory=dict)
    tokens: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cost_unknown: int = 0
    #: What those answers would have cost at sync prices, minus their batch cost.
    saved_usd: float = 0.0

    def add(self, metadata: Metadata, model: str, on: dt.date) -> None:
        usage = metadata.usage or Usage()
        self.tokens += metadata.tokens
        self.usage += usage
        if metadata.cost_usd is None:
            self.cost_unknown += 1
            return
        self.cost_usd += metadata.cost_usd
        sync = cost_usd(model, usage, on)
        if sync is not None:
            self.saved_usd += sync - metadata.cost_usd


class BatchStage:
    """One run's batch work: the describe run (store, park, save), the Gemini jobs and the workdir's record."""

    def __init__(self, run: DescribeRun, batches: GeminiBatches, jobs: BatchJobs, report: DescribeReport,
                 known: dict[str, Asset] | None = None, collect: "CollectJob | None" = None) -> None:
        self.run = run
        self.batches = batches
        self.jobs = jobs
        self.report = report
        self.known = dict(known or {})
        self.wd = run.wd
        self.settings = run.settings
        #: Assets whose job ended this run without describing or parking them: pending again.
        self.returned: list[str] = []
        #: How one ended job is collected (:func:`collect_job`, or the Prefect task that runs it).
        self.collect_one: CollectJob = collect or collect_job

    @classmethod
    def start(cls, ctx: RunContext, report: DescribeReport, assets: list[Asset],
              collect: "CollectJob | None" = None) -> "BatchStage":
        """The batch work of ``ctx`` (its key: batch mode runs only with one)."""
        key = ctx.gemini_key or ""
        describer = select_describer(ctx.settings, key, ctx.openai_key)
        run = DescribeRun(ctx.wd, ctx.settings, describer, ctx.store, ctx.events, secret=key)
        batches = GeminiBatches(ctx.settings.gemini, key, avoided_words(ctx.settings.keywords))
        report.describer = batches.name
        return cls(run, batches, BatchJobs(ctx.wd), report, {a.asset_id: a for a in assets}, collect)

    # --- collecting ------------------------------------------------------------------------

    def collect(self) -> None:
        """Collect every live job of the record (see the module docstring); fills the report."""
        records = self.jobs.live()
        orphans = [r for r in records if r.job_name is None]
        if orphans:
            self._resolve(orphans)
        tries = self.jobs.ended_tries()
        for record in self.jobs.live():
            try:
                job = self.batches.get(record.job_name)
            except StageStopped:
                raise
            except MicrostockError as exc:
                log.error("batch job %s (%s): cannot read it (%s); its assets stay in it for the next run",
                             record.job_name, record.display_name, self.run.redact(exc.message))
                self._hold(record)
                continue
            if job.state in LIVE_STATES:
                log.info("batch job %s is %s: %d asset(s) wait in it", record.job_name, job.state,
                            len(record.assets))
                self._hold(record)
                continue
            self._count(self.collect_one(self, record, job, tries))

    def _resolve(self, orphans: list[JobRecord]) -> None:
        """Adopt the account's job of each intent without a job name, or end the intent when none exists."""
        found = {job.display_name: job for job in self.batches.jobs(workdir_prefix(self.wd))}
        for record in orphans:
            job = found.get(record.display_name)
            if job is not None:
                self.jobs.submitted(record.display_name, job.name)
                log.warning("batch job %s: adopted by its display name %s (the run that created it stopped "
                               "before recording it)", job.name, record.display_name)
            else:
                self.jobs.end(record.display_name, "abandoned", {"returned": len(record.assets)})
                log.warning("batch intent %s: no such job at Gemini, the create never happened; its %d asset(s) "
                               "are submitted again", record.display_name, len(record.assets))

    def _hold(self, record: JobRecord) -> None:
        self.report.in_batch.extend(record.assets.values())

    def _count(self, done: Collected) -> None:
        report = self.report
        for name, row in done.rows.items():
            if row == "described":
                report.described.append(name)
            elif row.startswith("parked: "):
                report.parked[name] = row.removeprefix("parked: ")
            elif row.startswith("pending: "):
                self.returned.append(name)
        report.tokens += done.tokens
        report.usage += done.usage
        report.cost_usd += done.cost_usd
        report.cost_unknown += done.cost_unknown
        report.batch_saved_usd += done.saved_usd

    def asset(self, asset_id: str, name: str) -> Asset | None:
        """The asset with this content: the stage's own, else ``assets/<name>`` when it still holds it."""
        if asset_id in self.known:
            return self.known[asset_id]
        path = self.wd.assets / name
        if path.is_file() and sha256_file(path) == asset_id:
            self.known[asset_id] = Asset(name=name, asset_id=asset_id, path=path)
            return self.known[asset_id]
        return None

    # --- submitting ------------------------------------------------------------------------

    def submit(self, todo: list[Asset]) -> None:
        """Submit ``todo`` (described by nothing, parked nowhere, in no live job) as jobs under the inline limit."""
        live = {asset_id for record in self.jobs.live() for asset_id in record.assets}  # the record is the truth
        todo = [a for a in todo if a.asset_id not in live]
        tries = self.jobs.ended_tries()
        chunk: list[tuple[Asset, object]] = []
        size = 0
        for i, asset in enumerate(todo):
            try:
                request = self.batches.request(asset)
            except BadInput as exc:  # the image cannot be read: parked at once, as sync mode does
                job = self.run.park(asset, exc, attempts=1)
                self.report.parked[asset.name] = job.error_class
                continue
            n = self.batches.size_of(request)
            if chunk and size + n > JOB_BUDGET_BYTES:
                if not self._create(chunk, tries):
                    self.report.pending.extend(a.name for a in todo[i:] if a.name not in self.report.parked)
                    return
                chunk, size = [], 0
            chunk.append((asset, request))
            size += n
        if chunk:
            self._create(chunk, tries)

    def _create(self, chunk: list[tuple[Asset, object]], tries: dict[str, int]) -> bool:
        """Record the intent, create the job, record its name; False when the create failed (stop submitting)."""
        ids = [a.asset_id for a, _ in chunk]
        try_number = 1 + max(tries.get(i, 0) for i in ids)
        name = display_name(self.wd, ids, try_number)
        self.jobs.intend(name, {a.asset_id: a.name for a, _ in chunk}, try_number)
        try:
            job = self.batches.submit([r for _, r in chunk], name)
        except PermanentError as exc:  # Gemini refused this job: it does not exist; the next chunk may pass
            self.jobs.end(name, "refused", {"parked": len(chunk)})
            for asset, _ in chunk:
                self.report.parked[asset.name] = self.run.park(asset, exc, attempts=1).error_class
            log.error("batch job %s: create refused (%s); its %d asset(s) are parked for a replay (sync mode)",
                         name, self.run.redact(exc.message), len(chunk))
            return True
        except MicrostockError as exc:
            message = self.run.redact(exc.message)
            if isinstance(exc, StageStopped):  # refused before any job was made (key, quota, model …)
                self.jobs.end(name, "abandoned", {"returned": len(chunk)})
                log.error("batch job %s: create refused (%s); its assets stay pending", name, message)
            else:  # a timeout or a 5xx: the job may exist; the next run looks it up by its display name
                log.error("batch job %s: create failed (%s); the next run looks it up by name and submits it "
                             "again if Gemini has none", name, message)
            self.report.pending.extend(a.name for a, _ in chunk)
            self.report.stopped = f"batch create failed: {message}"
            return False
        self.jobs.submitted(name, job.name)
        self.report.batch_jobs_submitted += 1
        self.report.in_batch.extend(a.name for a, _ in chunk)
        log.info("batch job %s (%s): %d asset(s) submitted", job.name, name, len(chunk))
        return True


def collect_job(stage: BatchStage, record: JobRecord, job: BatchJob, tries: dict[str, int],
                task_run_id: str | None = None) -> Collected:
    """Collect one ended job: its answers become sidecars or parked jobs (under ``task_run_id``, when a task
    run collects it), or its assets go back to pending; records the job's end. ``Collected.rows`` has a row
    per asset (the Prefect side publishes them as the job's table)."""
    run = stage.run
    done = Collected()
    answers = {a.asset_id: a for a in (job.answers if job.state == "succeeded" else [])}
    today = dt.date.today()
    for asset_id, name in record.assets.items():
        asset = stage.asset(asset_id, name)
        sidecar = read_sidecar(stage.wd.sidecar(name))
        if asset is None:
            done.rows[name] = "gone: the image is no longer in assets/ with this content"
        elif sidecar is not None and sidecar.asset_id == asset_id:
            done.rows[name] = "already described"
        elif job.state != "succeeded":
            ended = tries.get(asset_id, 0) + 1
            if ended > stage.settings.gemini.batch_resubmits:
                ended_exc = BatchJobEnded(f"its Gemini batch jobs ended without an answer {ended} time(s), the last "
                                          f"{job.state} ({record.job_name})", state=job.state)
                parked = run.park(asset, ended_exc, attempts=ended, task_run_id=task_run_id)
                done.rows[name] = f"parked: {parked.error_class}"
            else:
                done.rows[name] = f"pending: job {job.state}, submitted again ({ended} of "\
                                  f"{stage.settings.gemini.batch_resubmits + 1} jobs)"
        elif (answer := answers.get(asset_id)) is None:
            done.rows[name] = "pending: the job gave no answer for it"
        elif answer.error is not None:
            parked = run.park(asset, answer.error, attempts=1, task_run_id=task_run_id)
            done.rows[name] = f"parked: {parked.error_class}"
        else:
            run.save(asset, answer.metadata)
            done.rows[name] = "described"
            done.add(answer.metadata, run.describer.model, today)
    counts: dict[str, int] = {}
    for row in done.rows.values():
        kind = row.split(":", 1)[0].replace("already described", "described")
        counts[kind] = counts.get(kind, 0) + 1
    stage.jobs.end(record.display_name, job.state, counts)
    log.info("batch job %s %s: %s", record.job_name, job.state,
                ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return done


#: How one ended job is collected: ``collect(stage, record, job, tries)`` (:func:`collect_job` or a wrapper of it).
CollectJob = Callable[[BatchStage, JobRecord, BatchJob, dict[str, int]], Collected]


# --- the stage entry points ----------------------------------------------------------------


def describe_in_batches(ctx: RunContext, assets: list[Asset], collect: CollectJob = collect_job) -> DescribeReport:
    """The describe stage in batch mode: collect the finished jobs (each with ``collect``), then submit what is
    left to describe."""
    report = DescribeReport()
    stage = BatchStage.start(ctx, report, assets, collect)
    wd, todo = ctx.wd, None  # todo: the assets left to submit, once sorted out
    try:
        with stage.jobs.exclusive():
            stage.collect()
            todo = sort_out(wd, assets, {job.job_id for job in ctx.store.list(status="parked")}, report,
                            sees=True)  # Gemini sees the pictures: words from a file name alone are asked again
            stage.submit(todo)
    except MicrostockError as exc:  # the store, a refused key or quota, Gemini unreachable: next run goes on
        log.error("batch describe stopped: %s", stage.run.redact(exc.message))
        report.stopped = stage.run.redact(exc.message)
        if todo is None:
            todo = [a for a in sort_out(wd, assets, set(), report, sees=True) if a.name not in report.in_batch]
        settled = {*report.in_batch, *report.parked, *report.pending}
        report.pending.extend(a.name for a in todo if a.name not in settled)
    return report


def collect_batches(ctx: RunContext, collect: CollectJob = collect_job) -> DescribeReport:
    """Collect only (the ``collect-batches`` flow): the finished jobs' answers become sidecars or parked jobs."""
    report = DescribeReport()
    stage = BatchStage.start(ctx, report, [], collect)
    try:
        with stage.jobs.exclusive():
            stage.collect()
    except MicrostockError as exc:  # the store, a refused key or quota, Gemini unreachable: next run goes on
        log.error("collect stopped: %s", stage.run.redact(exc.message))
        report.stopped = stage.run.redact(exc.message)
    report.pending.extend(stage.returned)  # the next stock-batch run submits them again
    return report
