"""Flow ``collect-batches``: collect the finished Gemini batch jobs and take their assets to the agencies.

Scheduled every 30 minutes (prefect.yaml), so a batch answered in the
afternoon is uploaded then rather than the next night. It only collects
(:func:`tasks.stages.batch_describe.collect_batches`: answers become
sidecars, per-request errors are parked, ended jobs' assets go back to
pending or are parked after ``gemini.batch_resubmits``); it never submits —
the next ``stock-batch`` run does. What it described goes through CSVs, pack
and upload exactly as ``replay-dead-letters`` takes its recovered assets.
"""

from __future__ import annotations

from prefect import flow
from prefect.logging import get_run_logger
from prefect.states import Completed

from flows.stock_batch import publish_described
from tasks.observe.artifacts import publish_dead_letters
from tasks.observe.run_names import dated_run_name
from tasks.orchestration.describe_runs import collect_in_task_run
from tasks.stages.batch_describe import collect_batches
from tasks.stages.run_context import RunContext


@flow(name="collect-batches", flow_run_name=dated_run_name)
def collect_batches_flow(workdir: str | None = None, config: str | None = None):
    """Collect the workdir's finished batch jobs, then CSVs, pack and upload what they described.

    Args:
        workdir: The workdir (empty: $MICROSTOCK_WORKDIR, else ./microstock-data).
        config: Config file (empty: microstock.toml in the workdir).
    """
    logger = get_run_logger()
    ctx = RunContext.open(workdir, config)
    ctx.wd.prepare()
    if ctx.gemini_key is None:
        logger.warning("no Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block): "
                       "no batch job can be read")
        return Completed(message="collect-batches: no Gemini key, nothing collected")
    report = collect_batches(ctx, collect_in_task_run)
    if report.described:
        publish_described(ctx)
    headline = (f"collect-batches: {len(report.described)} described · {len(report.parked)} parked · "
                f"{len(report.in_batch)} still in batch jobs")
    if report.pending:
        headline += f" · {len(report.pending)} back to pending (the next stock-batch run submits them)"
    logger.info(headline)
    if report.parked:  # every 30 minutes: a new version of the table only when it changed
        publish_dead_letters(ctx.wd, lambda: ctx.store)
    return Completed(message=headline, data={"described": report.described, "parked": report.parked,
                                             "in_batch": report.in_batch, "pending": report.pending,
                                             "stopped": report.stopped})
