"""The ``batch-assets`` table: one row per asset, what became of it at describe and at each agency.

The counts of ``batch-counts`` say how many; this table says which. Cells:

* ``describe`` — ``described``, ``described (earlier run)``, ``parked: <class> since <time>``,
  ``pending``, ``in a batch job`` (batch mode: waiting for Gemini's answer), ``rejected: <reason>``
  (the file could not be used), and with ``[review]`` on ``rejected in review`` or ``waiting for review``;
* one column per agency — ``uploaded``, ``already there``, ``held back (<rule>): <why>``,
  ``failed, left pending: <why>``, ``left pending: <agency> stopped (<why>)``, and ``not tried: <why>``
  (``not described (parked)``, ``waiting for review``, ``rejected in review``, ``nothing sent to <agency>``…):
  no cell says "not tried" without saying why;
* ``clip`` (once the batch has video clips: their rows follow the images') — the clip's container, duration,
  frame size, frame rate, codec and sound, and where its poster is; a clip an agency's video rules hold back
  says the rule and its value there (``held back (video): 61 s is longer than the 60 s maximum``);
* ``similar`` (once some asset is alike another) — the similarity risk and the nearest asset
  (``tasks.observe.similar_view``);
* ``removed keywords`` (once the contributor's keyword rules took one out of some asset's keywords) — each
  keyword and why: ``nike: protected name 'Nike' (brand)``, ``stock: excluded`` (the sidecar's
  ``removed_keywords``).

The artifact's description (markdown above the table in the UI) has the run's
headline, the batch ZIP, the next steps by hand (which CSV to upload in which
portal) and, when something is parked, how to replay it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from prefect.artifacts import create_table_artifact

from tasks.agencies.keyword_rules import removed_words
from tasks.core.errors import StoreUnavailable, fails_again_unchanged
from tasks.core.printable import printable
from tasks.core.records import read_sidecar, ready_name
from tasks.core.reports import AgencyUpload, CsvReport, DescribeReport, Gathered, PackReport
from tasks.core.workdir import Workdir
from tasks.observe.markdown import md_cell, md_code, next_steps
from tasks.observe.replay_advice import replay_deployed, replay_how
from tasks.observe.run_names import when
from tasks.observe.similar_view import add_risk_column
from tasks.observe.summary import BatchSummary, brief
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob

log = logging.getLogger(__name__)

BATCH_ASSETS = "batch-assets"

#: At most this many rows (a batch of thousands shows the first ones, in name order; the description says so).
MAX_ASSET_ROWS = 1000


def describe_cell(name: str, described: DescribeReport, parked: dict[str, ParkedJob],
                  in_review: Mapping[str, str]) -> str:
    """What the describe stage (and review, when on) made of one asset."""
    if name in in_review:
        return in_review[name]
    if name in described.described:
        return "described"
    if name in described.already:
        return "described (earlier run)"
    job = parked.get(name)
    if job is not None:
        return f"parked: {job.error_class} since {when(job.first_seen)}"
    if name in described.parked:
        return f"parked: {described.parked[name]}"
    if name in described.in_batch:
        return "in a batch job"
    return "pending"


def not_tried_cell(describe: str) -> str:
    """The agency cell of an asset that never reached the uploads, from its describe cell: ``not tried: parked``."""
    if describe.startswith(("rejected in review", "waiting for review")):
        return f"not tried: {describe.split(' (', 1)[0]}"
    if describe.startswith("rejected"):
        return "not tried: rejected"
    if describe.startswith("parked"):
        return "not tried: not described (parked)"
    if describe == "in a batch job":
        return "not tried: not described yet (in a batch job)"
    return "not tried: not described yet (pending)"


def agency_cell(name: str, agency: str, upload: AgencyUpload | None, held: dict[tuple[str, str], str]) -> str:
    """What became of one asset at one agency this run (a file not tried says why)."""
    if (agency, name) in held:
        return held[(agency, name)]
    if (agency, "") in held:  # an agency-wide problem: no CSV was written, nothing is sent
        return held[(agency, "")]
    file = ready_name(name)
    if upload is None:
        return f"not tried: nothing was sent to {agency} this run"
    if file in upload.uploaded:
        return "uploaded"
    if file in upload.reconciled or file in upload.already:
        return "already there"
    if file in upload.failed:
        return f"failed, left pending: {upload.failed[file]}"
    if upload.stopped:
        why = brief(upload.stopped).removeprefix(f"{agency}: ")
        return f"{'left pending' if file in upload.not_tried else 'not tried'}: {agency} stopped ({why})"
    return f"not tried: not in {agency}'s uploads this run"


def asset_rows(gathered: Gathered, described: DescribeReport, csvs: CsvReport, packed: PackReport,
               uploads: dict[str, AgencyUpload], parked: list[ParkedJob],
               in_review: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One row per asset of the batch (and per file the assets stage could not use), in name order."""
    by_name = {job.asset_name: job for job in parked if job.asset_name}
    held = _held_cells(csvs)
    for agency, not_taken in packed.not_taken.items():  # what its kind's rules keep from there (a clip's video rules)
        for name, why in not_taken.items():
            held.setdefault((agency, name), f"held back ({packed.left_out_rule(agency, name)}): {why}")
    agencies = list(csvs.agencies) or list(uploads)
    rows = []
    for name in [a.name for a in sorted(gathered.assets, key=lambda a: (a.is_clip, a.name))]:  # the clips last
        row = {"asset": printable(name)}
        if name in packed.rejected:
            row["describe"] = f"rejected: {packed.rejected[name]}"
        else:
            row["describe"] = describe_cell(name, described, by_name, in_review or {})
        is_described = row["describe"].startswith("described")
        for agency in agencies:
            if is_described or (agency, name) in held:
                row[agency] = agency_cell(name, agency, uploads.get(agency), held)
            else:
                row[agency] = not_tried_cell(row["describe"])
        rows.append(row)
    for name, reason in sorted(gathered.rejected.items()):
        rows.append({"asset": printable(name), "describe": f"rejected: {reason}",
                     **{a: "not tried: rejected" for a in agencies}})
    return rows


def add_about_column(rows: list[dict[str, str]], wd: Workdir, packed: PackReport) -> None:
    """``batch-assets``: a ``clip`` cell in every row once some asset's kind tells more of it than its metadata
    (a clip's facts, :attr:`PackReport.about`, and where its poster is); empty for the others."""
    if not packed.about:
        return
    shown = {printable(name): f"{about} · poster {packed.previews[name].relative_to(wd.root)}"
             for name, about in packed.about.items()}
    for row in rows:
        row["clip"] = shown.get(row["asset"], "")


def _held_cells(csvs: CsvReport) -> dict[tuple[str, str], str]:
    """(agency, asset) -> its cell when the CSV stage held it back there; the first reason found is the one shown."""
    held: dict[tuple[str, str], str] = {}
    for p in csvs.problems:
        held.setdefault((p.agency, p.asset), f"held back ({p.rule}): {p.message}")
    return held


def assets_description(headline: str, rows: int, csvs: CsvReport, packed: PackReport,
                       parked: list[ParkedJob], stopped: Mapping[str, str] | None = None,
                       deployed: bool | None = None) -> str:
    """The markdown above the table: headline, ZIP, next steps by hand (a stopped agency first: ``stopped``,
    agency -> why), how to replay (from the UI only where the server has the replay deployment: ``deployed``,
    :func:`tasks.observe.replay_advice.replay_deployed`)."""
    lines = [f"**stock-batch: {md_cell(headline)}**"]
    if rows > MAX_ASSET_ROWS:
        lines.append(f"The first {MAX_ASSET_ROWS} of {rows} assets, by name.")
    if packed.zip_path:
        lines.append(f"Batch ZIP: {md_code(packed.zip_path)}")
    steps = next_steps(csvs, stopped)
    if steps:
        lines += ["Next steps:"] + [f"- {md_cell(step)}" for step in steps]
    if parked:
        lines.append(f"{len(parked)} parked job(s): {replay_how(deployed)}.")
        lines += unchanged_warning(parked)
    return "\n\n".join(lines)


def unchanged_warning(parked: list[ParkedJob]) -> list[str]:
    """A warning line when some parked jobs will fail again if replayed unchanged; else nothing."""
    unchanged = sorted({j.error_class for j in parked if fails_again_unchanged(j.error_class)})
    if not unchanged:
        return []
    count = sum(1 for j in parked if fails_again_unchanged(j.error_class))
    return [f"⚠ {count} of them ({', '.join(f'`{c}`' for c in unchanged)}) will fail again if replayed unchanged: "
            "change the image or the settings first."]


def add_removed_column(rows: list[dict[str, str]], wd: Workdir, names: list[str]) -> None:
    """``batch-assets``: a ``removed keywords`` cell in every row once some of ``names`` (the assets shown) had
    keywords taken out by the contributor's rules (no column before), read from their sidecars."""
    removed = {}
    for name in names:
        sidecar = read_sidecar(wd.sidecar(name))
        if sidecar is not None and sidecar.name == name and sidecar.metadata.removed_keywords:
            removed[printable(name)] = printable(removed_words(sidecar.metadata.removed_keywords))
    if removed:
        for row in rows:
            row["removed keywords"] = removed.get(row["asset"], "")


def publish_batch_assets(wd: Workdir, store: Callable[[], DeadLetterStore], summary: BatchSummary,
                         gathered: Gathered, described: DescribeReport, csvs: CsvReport, packed: PackReport,
                         uploads: dict[str, AgencyUpload]) -> None:
    """The ``batch-assets`` table of one stock-batch run (the parked jobs' classes from ``store()``, the run's
    store opened on first use)."""
    try:
        parked = store().list(status="parked")
    except StoreUnavailable as exc:  # the table goes on without the parked jobs' classes and times
        log.warning("batch-assets: parked jobs not read: %s", exc.message)
        parked = []
    rows = asset_rows(gathered, described, csvs, packed, uploads, parked, summary.in_review)
    add_about_column(rows, wd, packed)  # a clip's facts and poster
    add_risk_column(rows, packed.risks)  # the similarity risk (docs/AGENCIES.md, "Similar content")
    add_removed_column(rows, wd, sorted({a.name for a in gathered.assets})[:MAX_ASSET_ROWS])
    create_table_artifact(rows[:MAX_ASSET_ROWS], key=BATCH_ASSETS,
                          description=assets_description(summary.headline(), len(rows), csvs, packed, parked,
                                                         summary.upload_stopped,
                                                         replay_deployed() if parked else None))
