"""The ``replay-assets`` table: a replay read like a batch — one row per job it took or left alone.

Cells: ``result`` — ``recovered``, ``still failing``, ``skipped`` (its class
fails again unless something is changed first; replayed only with
``include_doomed``); ``where it went`` — for a recovered asset, each agency's
cell as ``batch-assets`` has it (uploaded, held back and why, left pending
and why); ``why`` — why a job still fails or was skipped.
"""

from __future__ import annotations

from prefect.artifacts import create_table_artifact

from tasks.core.reports import AgencyUpload, CsvReport, ReplayReport
from tasks.observe.batch_assets import agency_cell

REPLAY_ASSETS = "replay-assets"

SKIPPED_WHY = "fails again unless changed first (the image, the prompt or the model): replay with include_doomed"


def replay_rows(report: ReplayReport, csvs: CsvReport | None = None,
                uploads: dict[str, AgencyUpload] | None = None) -> list[dict[str, str]]:
    """One row per job of the replay, in name order: recovered (and where it went), still failing (why), skipped."""
    held: dict[tuple[str, str], str] = {}
    for p in (csvs.problems if csvs else []):
        held.setdefault((p.agency, p.asset), f"held back ({p.rule}): {p.message}")
    uploads = uploads or {}
    rows = []
    for name in sorted(report.recovered_assets):
        went = "; ".join(f"{agency}: {agency_cell(name, agency, upload, held)}" for agency, upload in uploads.items())
        rows.append({"asset": name, "parked as": report.error_classes.get(name, ""), "result": "recovered",
                     "where it went": went or "described (not sent)", "why": ""})
    for name, why in sorted(report.failing.items()):
        rows.append({"asset": name, "parked as": report.error_classes.get(name, ""), "result": "still failing",
                     "where it went": "parked again", "why": why[:300]})
    for name, error_class in sorted(report.skipped.items()):
        rows.append({"asset": name, "parked as": error_class, "result": "skipped", "where it went": "still parked",
                     "why": SKIPPED_WHY})
    return rows


def publish_replay(report: ReplayReport, csvs: CsvReport | None = None,
                   uploads: dict[str, AgencyUpload] | None = None) -> None:
    """The ``replay-assets`` table of one replay (a dry run's too: what it would take and skip)."""
    if report.dry_run:
        rows = [{"asset": name, "parked as": error_class, "result": "would replay", "where it went": "",
                 "why": ""} for name, error_class in sorted(report.error_classes.items())]
        rows += replay_rows(ReplayReport(skipped=report.skipped))
    else:
        rows = replay_rows(report, csvs, uploads)
    create_table_artifact(rows, key=REPLAY_ASSETS, description=f"replay-dead-letters: {report.headline()}")
