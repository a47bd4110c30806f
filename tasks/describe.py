"""The describe stage: one metadata sidecar per asset, written by the selected describer.

An asset with a sidecar is described and never described again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger

from tasks.assets import Asset
from tasks.config import Settings, gemini_api_key
from tasks.describers.base import Describer
from tasks.describers.offline import OfflineDescriber
from tasks.metadata import Metadata, read_sidecar, write_sidecar
from tasks.progress import StageProgress
from tasks.workdir import Workdir


@dataclass
class DescribeReport:
    """What the describe stage did this run."""

    described: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    parked: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    stopped: str | None = None
    tokens: int = 0
    describer: str = ""


def select_describer(settings: Settings) -> Describer:
    """Gemini when a key is set, else the offline describer."""
    if gemini_api_key():
        from tasks.describers.gemini import GeminiDescriber

        return GeminiDescriber(settings.gemini, gemini_api_key())
    return OfflineDescriber()


@task(task_run_name="describe-{asset.name}", tags=["describe"], cache_policy=NO_CACHE)
def describe_asset(asset: Asset, describer: Describer, wd: Workdir) -> Metadata:
    """Describe one asset and write its sidecar."""
    metadata = describer.describe(asset)
    write_sidecar(wd.sidecar(asset.name), asset, metadata)
    return metadata


def describe_assets(wd: Workdir, settings: Settings, assets: list[Asset]) -> DescribeReport:
    """Describe every asset that has no sidecar yet."""
    logger = get_run_logger()
    report = DescribeReport()
    todo = []
    for asset in assets:
        sidecar = read_sidecar(wd.sidecar(asset.name))
        if sidecar is not None and sidecar.asset_id == asset.asset_id:
            report.already.append(asset.name)
        else:
            todo.append(asset)
    if not todo:
        return report
    describer = select_describer(settings)
    report.describer = describer.name
    if describer.name == "offline":
        logger.info("No GEMINI_API_KEY or GOOGLE_API_KEY: the offline describer writes metadata "
                    "from each image's prompt, embedded metadata or file name.")
    futures = [describe_asset.submit(asset, describer, wd) for asset in todo]
    with StageProgress("describe", len(todo)) as progress:
        for asset, future in zip(todo, futures):
            future.wait()
            if future.state.is_completed():
                report.described.append(asset.name)
                report.tokens += future.result().tokens
            else:
                report.pending.append(asset.name)
            progress.advance()
    return report
