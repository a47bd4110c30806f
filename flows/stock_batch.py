"""Flow ``stock-batch``: assets → describe → CSVs → pack → upload, as a recipe.

Every stage derives what is left to do from the workdir, so a re-run after a
crash finishes the rest and repeats nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NamedTuple

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger
from prefect.states import Completed
from pydantic import Field

from tasks import events
from tasks.assets import Gathered, gather, image_maker, prompts_from
from tasks.artifacts import publish_batch, publish_dead_letters, publish_validation
from tasks.config import AgencyName, AgencySettings, Settings, load_settings
from tasks.describe import describe_assets
from tasks.metadata_csv import CsvReport, described_sidecars, write_agency_csvs
from tasks.pack import PackReport, finish_batch, pack_assets, ready_name
from tasks.secrets import gemini_key
from tasks.stage_tags import tags_never_fail
from tasks.report import BatchSummary
from tasks.upload import AgencyUpload, UploadItem, upload_agency
from tasks.upload_runs import FileTaskRuns
from tasks.workdir import Workdir, default_workdir


# Tags on the stage and agency task runs only: a tagged run asks the server for tag concurrency
# slots, one request each, so the per-asset describe and per-file upload runs stay untagged
# (docs/OPERATIONS.md, "Tags"); their names say stage, agency and file. A busy server may refuse
# the slots: tags_never_fail then runs the stage untagged rather than fail the flow.
@tags_never_fail
@task(name="assets", task_run_name="assets", tags=["stage:assets"], cache_policy=NO_CACHE)
def assets_stage(wd: Workdir, settings: Settings, count: int, source: str | None) -> Gathered:
    seed = settings.generate.seed
    gathered = gather(wd.assets, count, Path(source) if source else None, prompts_from(settings.generate.prompts),
                      seed, image_maker(settings.gemini, seed, gemini_key()))
    logger = get_run_logger()
    for name, reason in sorted(gathered.rejected.items()):
        logger.warning("rejected %s: %s", name, reason)
    logger.info("%d assets (%d new)", len(gathered.assets), len(gathered.new))
    return gathered


@tags_never_fail
@task(name="csv", task_run_name="csv", tags=["stage:csv"], cache_policy=NO_CACHE)
def csv_stage(wd: Workdir, agencies: list[str], settings: Settings, packed: PackReport) -> CsvReport:
    report = write_agency_csvs(wd, agencies, settings, left_out={a: packed.left_out(a) for a in agencies})
    publish_validation(report)
    return report


@tags_never_fail
@task(name="pack", task_run_name="pack", tags=["stage:pack"], cache_policy=NO_CACHE)
def pack_stage(wd: Workdir, settings: Settings, agencies: list[str]) -> PackReport:
    return pack_assets(wd, settings.pack, described_sidecars(wd), agencies)


@tags_never_fail
@task(name="zip", task_run_name="zip", tags=["stage:zip"], cache_policy=NO_CACHE)
def zip_stage(wd: Workdir, packed: PackReport) -> PackReport:
    return finish_batch(wd, packed)


@tags_never_fail
@task(name="upload", task_run_name="upload-{agency}", cache_policy=NO_CACHE)
def upload_stage(wd: Workdir, agency: str, items: list[UploadItem], settings: AgencySettings,
                 file_runs: FileTaskRuns) -> AgencyUpload:
    result = upload_agency(wd, agency, items, settings, run_file=file_runs)
    events.upload_completed(agency, result.uploaded, already=len(result.already) + len(result.reconciled),
                            failed=len(result.failed))
    return result


class Published(NamedTuple):
    csvs: CsvReport
    packed: PackReport
    uploads: dict[str, AgencyUpload]


def publish_described(wd: Workdir, settings: Settings, chosen: list[str]) -> Published:
    """Everything after describe, for every described asset: CSVs, pack, upload to the chosen agencies.

    Shared with ``replay-dead-letters``, so a recovered asset takes the same way.
    """
    packed = pack_stage(wd, settings, chosen)
    csvs = csv_stage(wd, chosen, settings, packed)  # rejected and held-back assets get no row
    packed = zip_stage(wd, packed)

    sha = {s.name: s.asset_id for s in described_sidecars(wd)}
    # An asset goes to an agency only with a valid CSV row there and not held back by its image rules.
    items = {agency: [UploadItem(ready_name(name), path, sha[name]) for name, path in packed.ready_for(agency).items()
                      if csvs.accepted(agency, name)]
             for agency in chosen}
    futures, file_runs = {}, FileTaskRuns()  # one pace for every agency's file runs
    for agency in chosen:
        # tags on the agency's run only: a tags() block would reach every file run, a server request each
        upload_to = upload_stage.with_options(tags=["stage:upload", f"agency:{agency}"])
        futures[agency] = upload_to.submit(wd, agency, items[agency], settings.agency(agency), file_runs)
    return Published(csvs, packed, {agency: f.result() for agency, f in futures.items()})


@flow(name="stock-batch")
def stock_batch(
    workdir: str | None = None,
    count: Annotated[int, Field(ge=0)] = 12,
    source: str | None = None,
    agencies: list[AgencyName] | None = None,
    config: str | None = None,
):
    """Take a batch from images to every enabled agency; ends Completed even when jobs are parked.

    Args:
        workdir: Folder holding assets, CSVs, packs, ledger and dead-letter store.
            Empty: $MICROSTOCK_WORKDIR, else ./microstock-data.
        count: Images to generate when no source folder is given (0: only what is already in assets/).
        source: Folder of your own JPEG/PNG images to ingest instead of generating.
        agencies: Only these agencies (empty: every agency enabled in the config).
        config: Config file (empty: microstock.toml in the workdir).
    """
    wd = Workdir(Path(workdir) if workdir else default_workdir()).prepare()
    settings = load_settings(Path(config) if config else wd.config_file)
    chosen = settings.enabled_agencies(agencies)

    gathered = assets_stage(wd, settings, count, source)
    described = describe_assets(wd, settings, gathered.assets)
    csvs, packed, uploads = publish_described(wd, settings, chosen)

    summary = BatchSummary(
        workdir=str(wd.root),
        assets=len(gathered.assets),
        described=len(described.described) + len(described.already),
        described_now=len(described.described),
        parked=len(described.parked),
        still_parked=len(described.still_parked),
        pending=len(described.pending),
        not_generated=gathered.not_generated,
        rejected={**gathered.rejected, **packed.rejected},
        held_back=packed.held_back,
        stopped="; ".join(filter(None, [gathered.stopped, described.stopped])) or None,
        describer=described.describer,
        tokens=described.tokens,
        csv_rows=csvs.rows,
        csv_files=csvs.files,
        uploaded_now={a: len(u.uploaded) for a, u in uploads.items()},
        uploaded_total={a: len(u.uploaded) + len(u.reconciled) + len(u.already) for a, u in uploads.items()},
        upload_failed={a: u.failed for a, u in uploads.items() if u.failed},
        upload_stopped={a: u.stopped for a, u in uploads.items() if u.stopped},
        upload_not_tried={a: len(u.not_tried) for a, u in uploads.items() if u.not_tried},
        targets={a: u.target or str(wd.outbox(a)) for a, u in uploads.items()},
        zip_path=str(packed.zip_path) if packed.zip_path else None,
    )
    publish_batch(summary)
    publish_dead_letters(wd)
    events.batch_finished(summary)
    return Completed(message=summary.headline(), data=summary.model_dump())
