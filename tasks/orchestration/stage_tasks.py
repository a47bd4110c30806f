"""The task runs of the stages a flow calls: assets, pack, CSVs, ZIP and upload.

Each stage's work is a plain function in ``tasks/stages`` (no Prefect there);
each task here declares the run's name and cache policy and calls it, adding
only what the UI shows: per agency the ``upload-<agency>`` table, the
``microstock.upload.completed`` event and a state with the counts (named
:data:`STOPPED`, Failed-type, when the agency stopped early). The ``csv-validation`` artifact
is published once per run, by the flow, for its final CSVs. Their log lines reach the run's logs through
Prefect's ``PREFECT_LOGGING_EXTRA_LOGGERS`` (the ``tasks`` logger tree).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from tasks.core.records import FileOutcome, UploadItem
from tasks.core.reports import AgencyUpload, CsvReport, Gathered, PackReport
from tasks.core.settings import AgencySettings
from tasks.core.workdir import Workdir
from tasks.observe.artifacts import publish_upload, upload_message
from tasks.observe.events import Events
from tasks.stages.assets import gather_assets
from tasks.stages.csv import csvs_for_packed
from tasks.stages.kinds import pack_described
from tasks.stages.pack import finish_batch
from tasks.stages.run_context import RunContext
from tasks.stages.upload import upload_agency
from tasks.stores.pending import uploadable

log = logging.getLogger(__name__)

#: The name of an ``upload-<agency>`` task run's Failed-type state when the agency stopped early (refused login,
#: unreachable server): its files are left pending, and the run's graph shows it red.
STOPPED = "Stopped"


@task(name="assets", task_run_name="assets", cache_policy=NO_CACHE)
def assets_stage(ctx: RunContext, count: int, source: str | None, clips: int = 0) -> Gathered:
    """The assets stage (:func:`tasks.stages.assets.gather_assets`)."""
    return gather_assets(ctx, count, source, clips)


@task(name="pack", task_run_name="pack", cache_policy=NO_CACHE)
def pack_stage(ctx: RunContext) -> PackReport:
    """The pack stage, every kind of asset (:func:`tasks.stages.kinds.pack_described`)."""
    return pack_described(ctx)


@task(name="csv", task_run_name="csv", cache_policy=NO_CACHE)
def csv_stage(ctx: RunContext, packed: PackReport, waiting: Collection[str] = ()) -> CsvReport:
    """The CSV stage (:func:`tasks.stages.csv.csvs_for_packed`); the flow publishes the final one's
    ``csv-validation`` artifact (a reviewed run writes the CSVs twice)."""
    return csvs_for_packed(ctx, packed, waiting)


@task(name="zip", task_run_name="zip", cache_policy=NO_CACHE)
def zip_stage(wd: Workdir, packed: PackReport, csvs: CsvReport) -> PackReport:
    """The batch ZIP of what ``csvs`` accepted (with the CSVs as they are now), where each file goes recorded in
    the manifest, and ``reports/pack.json`` (:func:`tasks.stages.pack.finish_batch`)."""
    return finish_batch(wd, packed, csvs)


@task(name="upload", task_run_name="upload-{agency}", cache_policy=NO_CACHE)
def upload_stage(wd: Workdir, agency: str, items: list[UploadItem], settings: AgencySettings,
                 events: Events) -> State:
    """One agency's upload (:func:`tasks.stages.upload.upload_agency`): Completed, or :data:`STOPPED` (a
    Failed-type state: red in the UI, never shown as done) when the agency stopped early; its message the counts
    (``3 uploaded · 1 left pending``), its result the :class:`AgencyUpload` either way; the files in
    ``upload-<agency>``."""
    tried: list[tuple[str, FileOutcome]] = []
    result = upload_agency(wd, agency, items, settings,
                           on_file=lambda item, outcome: tried.append((item.name, outcome)))
    try:
        publish_upload(agency, result, tried)
    except Exception as exc:  # the table is a view: the ledger already holds what was sent
        log.warning("upload-%s: the table of its files was not published (%s)", agency, type(exc).__name__)
    events.upload_completed(agency, result.uploaded, already=len(result.already) + len(result.reconciled),
                            failed=len(result.failed))
    if result.stopped:
        return Failed(name=STOPPED, message=upload_message(result), data=result)
    return Completed(message=upload_message(result), data=result)


def upload_agencies(ctx: RunContext, packed: PackReport, csvs: CsvReport) -> dict[str, AgencyUpload]:
    """Every agency's upload stage at once, one task run each: the upload-ready files of ``packed`` that ``csvs``
    accepted there (:func:`tasks.stores.pending.uploadable`)."""
    futures = {agency: upload_stage.submit(ctx.wd, agency, agency_items, ctx.settings.agency(agency), ctx.events)
               for agency, agency_items in uploadable(packed, csvs, ctx.agencies).items()}
    uploads = {agency: future.result(raise_on_failure=False) for agency, future in futures.items()}  # Stopped too
    for result in uploads.values():
        if isinstance(result, BaseException):  # the task itself crashed: that error, not a report-shaped one later
            raise result
    return uploads
