"""Flow ``stock-batch``: assets → describe → pack → CSVs → (review) → ZIP → upload, as a recipe.

Every stage derives what is left to do from the workdir, so a re-run after a
crash finishes the rest and repeats nothing. With ``[gemini] mode = "batch"``
the describe stage first collects the finished Gemini batch jobs, then submits
the assets still to describe as new jobs; the run goes on with what is
described (:mod:`tasks.stages.batch_describe`).
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

from prefect import flow, get_run_logger
from pydantic import Field

from flows.run_outcome import final_state
from tasks.core.reports import AgencyUpload, CsvReport, PackReport
from tasks.observe.artifacts import publish_batch, publish_dead_letters, publish_validation
from tasks.observe.batch_assets import publish_batch_assets
from tasks.observe.run_names import dated_run_name
from tasks.observe.summary import BatchSummary
from tasks.orchestration.describe_runs import describe_assets
from tasks.orchestration.review_pause import review_stage
from tasks.orchestration.stage_tasks import assets_stage, csv_stage, pack_stage, upload_agencies, zip_stage
from tasks.stages.review import ReviewReport
from tasks.stages.run_context import RunContext


class Published(NamedTuple):
    csvs: CsvReport
    packed: PackReport
    uploads: dict[str, AgencyUpload]
    reviewed: ReviewReport


def publish_described(ctx: RunContext) -> Published:
    """Everything after describe, for every described asset: pack, CSVs, review, ZIP, upload to the run's agencies.

    Shared with ``replay-dead-letters`` and ``collect-batches``, so a recovered asset takes the same way.
    """
    packed = pack_stage(ctx)  # every kind of asset: upload-ready files, agency rules, the similarity check
    csvs = csv_stage(ctx, packed)  # rejected and held-back assets get no row
    reviewed = review_stage(ctx, packed, csvs)  # with [review] on: pauses until the contributor answers
    if reviewed.corrected:
        packed = pack_stage(ctx)  # the corrected titles and keywords embedded
    if reviewed.asked:
        csvs = csv_stage(ctx, packed, waiting=reviewed.held)  # the answer taken in
    publish_validation(csvs)  # once per run: the final CSVs
    packed = zip_stage(ctx.wd, packed, csvs)  # what some agency takes; where each file goes, for `ledger`
    uploads = upload_agencies(ctx, packed, csvs)  # what each agency's CSV accepted: nothing without a row there
    return Published(csvs, packed, uploads, reviewed)


@flow(name="stock-batch", flow_run_name=dated_run_name)
def stock_batch(
    workdir: str | None = None,
    count: Annotated[int, Field(ge=0)] = 0,
    source: str | None = None,
    agencies: list[str] | None = None,
    config: str | None = None,
    clips: Annotated[int, Field(ge=0)] = 0,
):
    """Take a batch from images to every enabled agency; ends Completed even when jobs are parked, and
    ``Incomplete`` (a Failed-type state: red in the UI, counted on the dashboard) when it left uploads pending
    (an agency stopped, a file failed, review waits); its result is the summary either way.

    Args:
        workdir: Folder holding assets, CSVs, packs, ledger and dead-letter store.
            Empty: $MICROSTOCK_WORKDIR, else ./microstock-data.
        count: Images to generate when no source folder is given. 0 (the default): nothing is generated,
            the run finishes what is already in assets/ — a bare re-run never adds images.
        source: Folder of your own JPEG/PNG images (and MP4/MOV/AVI/MPEG clips) to ingest instead of generating.
        agencies: Only these agencies (empty: every enabled agency). A name is a spec file: shipped
            (adobe, vecteezy, dreamstime, shutterstock, …) or <workdir>/agencies/<name>.toml.
        config: Config file (empty: microstock.toml in the workdir).
        clips: Clips to generate when no source folder is given (Gemini's clip model with a key, else the
            offline generator's). 0 (the default): none.
    """
    logger = get_run_logger()
    ctx = RunContext.open(workdir, config, agencies)  # settings, agencies, store, key: read once, here
    for note in ctx.check(bool(count and not source), ctx.gemini_key, bool(clips and not source)):  # nothing paid yet
        logger.warning(note)
    ctx.wd.prepare()
    for note in ctx.catalog.notes:
        logger.info(note)

    gathered = assets_stage(ctx, count, source, clips)
    described = describe_assets(ctx, gathered.assets)  # every kind: images, then clips
    csvs, packed, uploads, reviewed = publish_described(ctx)

    summary = BatchSummary.from_stages(ctx.wd, gathered, described, csvs, packed, uploads, reviewed.cells())
    publish_batch(summary)
    publish_batch_assets(ctx.wd, lambda: ctx.store, summary, gathered, described, csvs, packed, uploads)
    publish_dead_letters(ctx.wd, lambda: ctx.store)
    final = final_state(summary)
    ctx.events.batch_finished(summary, final.name)
    return final
