"""The Prefect artifacts a run leaves for the UI, under stable keys.

A keyed artifact keeps its history: the UI's Artifacts page shows the latest
of each key and every earlier version, and each flow run's Artifacts tab shows
the ones it made. The keys are a contract (docs/OPERATIONS.md lists them):

================================  ========  ==============================================
key                               type      what
================================  ========  ==============================================
``batch-summary``                 markdown  the run's headline, counts and paths to the CSVs, ZIP, targets
``batch-counts``                  table     assets, described, parked, pending, rejected, tokens, cost, per agency
``batch-assets``                  table     one row per asset: describe result, then per agency what became of it
``dead-letter-jobs-<workdir>``    table     every parked job of one workdir (:func:`dead_letter_key`): asset,
                                            error class, attempts, parked since, last seen
``csv-validation``                markdown  rows per agency CSV, automatic fixes, assets skipped and the rule
``dead-letter-summary``           markdown  the daily summary: parked jobs per error class, how to replay
``progress-<stage>``              progress  made by :mod:`tasks.observe.progress` while a stage runs
``upload-<agency>``               table     one agency's upload: a row per file, what happened to it and why
``batch-<display name>``          table     one collected Gemini batch job: a row per asset, described or parked
                                            (with its class) or back to pending (and why)
================================  ========  ==============================================

Nothing here shows an
error message beyond what the dead-letter store already holds (redacted),
and never a password or key.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Callable

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from tasks.core.errors import StoreUnavailable, fails_again_unchanged
from tasks.core.records import FileOutcome
from tasks.core.reports import AgencyUpload, CsvReport
from tasks.core.workdir import Workdir
from tasks.observe.batch_assets import unchanged_warning
from tasks.observe.markdown import dead_letter_markdown, md_code, summary_markdown, validation_markdown
from tasks.observe.replay_advice import replay_deployed, replay_how, ui_replay_note
from tasks.observe.run_names import when
from tasks.observe.summary import BatchSummary
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob, Summary

log = logging.getLogger(__name__)

BATCH_SUMMARY = "batch-summary"
BATCH_COUNTS = "batch-counts"
DEAD_LETTER_JOBS = "dead-letter-jobs"
CSV_VALIDATION = "csv-validation"
DEAD_LETTER_SUMMARY = "dead-letter-summary"

#: At most this many parked jobs in the table (the CLI lists them all).
MAX_DEAD_LETTER_ROWS = 500


def batch_rows(s: BatchSummary) -> list[dict[str, str | int]]:
    """The ``batch-counts`` table: one row per count, ``total`` and ``this run``."""
    rows: list[dict[str, str | int]] = [
        {"what": "assets", "total": s.assets, "this run": "", "detail": f"{s.workdir}/assets"},
        {"what": "described", "total": s.described, "this run": s.described_now, "detail": s.describer or ""},
        {"what": "parked", "total": s.parked, "this run": s.parked,
         "detail": "see dead-letter-jobs-<workdir>" if s.parked else ""},
        {"what": "pending", "total": s.pending, "this run": s.pending, "detail": s.stopped or ""},
        {"what": "rejected", "total": len(s.rejected), "this run": len(s.rejected),
         "detail": "; ".join(f"{k}: {v}" for k, v in sorted(s.rejected.items()))},
        {"what": "tokens used", "total": s.tokens, "this run": s.tokens, "detail": s.usage_note()},
        {"what": "cost (USD)", "total": round(s.cost_usd, 6), "this run": round(s.cost_usd, 6),
         "detail": f"cost unknown for {s.cost_unknown} asset(s)" if s.cost_unknown else ""},
    ]
    if s.in_batch or s.batch_saved_usd:
        rows += [{"what": "in batch jobs", "total": s.in_batch, "this run": s.batch_jobs_submitted,
                  "detail": "jobs submitted this run; collected by the next run or collect-batches"},
                 {"what": "batch saved (USD)", "total": round(s.batch_saved_usd, 6),
                  "this run": round(s.batch_saved_usd, 6), "detail": "against sync prices"}]
    if s.in_review:
        rows += [{"what": what, "total": s.review_count(what), "this run": "", "detail": "see batch-assets"}
                 for what in ("rejected in review", "waiting for review")]
    for agency, n in s.csv_rows.items():
        rows.append({"what": f"CSV rows · {agency}", "total": n, "this run": "",
                     "detail": ", ".join(s.csv_files.get(agency, []))})
    for agency, total in s.uploaded_total.items():
        failed, held = s.upload_failed.get(agency) or {}, s.held_back.get(agency) or {}
        detail = s.targets.get(agency, "")
        if failed:
            detail += f" · {len(failed)} failed, left pending"
        if held:
            detail += f" · {len(held)} held back"
        rows.append({"what": f"uploads · {agency}", "total": total,
                     "this run": s.uploaded_now.get(agency, 0), "detail": detail})
    return rows


def dead_letter_rows(jobs: list[ParkedJob]) -> list[dict[str, str | int]]:
    """The ``dead-letter-jobs`` table: one row per parked job, oldest first; times, not ages (they never go stale)."""
    return [
        {"asset": j.asset_name or str(j.payload.get("asset", "")), "error class": j.error_class,
         "attempts": j.attempts, "parked since": when(j.first_seen), "last seen": when(j.last_seen),
         "replay": "fails again unless changed first" if fails_again_unchanged(j.error_class) else "may recover",
         "message": j.error_message[:200], "job id": j.job_id[:16]}
        for j in sorted(jobs, key=lambda j: (j.first_seen, j.job_id))
    ]


def publish_batch(summary: BatchSummary) -> None:
    """The ``batch-summary`` markdown and the ``batch-counts`` table of one stock-batch run."""
    create_markdown_artifact(summary_markdown(summary), key=BATCH_SUMMARY,  # its first line is the headline
                             description="stock-batch: the run's counts, files and targets")
    create_table_artifact(batch_rows(summary), key=BATCH_COUNTS, description=f"stock-batch: {summary.headline()}")


def publish_validation(report: CsvReport) -> None:
    """The ``csv-validation`` markdown of one CSV stage (:func:`tasks.observe.markdown.validation_markdown`)."""
    skipped = sum(1 for p in report.problems if p.asset)
    create_markdown_artifact(validation_markdown(report), key=CSV_VALIDATION,
                             description=f"agency CSVs: {skipped} asset/agency pair(s) skipped")


def upload_rows(result: AgencyUpload, tried: list[tuple[str, FileOutcome]]) -> list[dict[str, str]]:
    """The ``upload-<agency>`` table: a row per file, in name order — each tried file's outcome (``tried``),
    the files the ledger already had, and those the agency's stop left untried."""
    rows = {name: (outcome.kind if outcome.kind != "failed" else "left pending", outcome.detail)
            for name, outcome in tried}
    rows.update((name, ("already in the ledger", "")) for name in result.already)
    for name in result.not_tried:
        rows.setdefault(name, ("not tried", f"the agency stopped: {result.stopped}" if result.stopped else ""))
    return [{"file": name, "what happened": what, "detail": detail} for name, (what, detail) in sorted(rows.items())]


def upload_message(result: AgencyUpload) -> str:
    """One agency's upload in a line, for its task run's state: ``3 uploaded · 1 left pending``."""
    counts = [(len(result.uploaded), "uploaded"), (len(result.reconciled), "reconciled"),
              (len(result.already), "already in the ledger"), (len(result.failed), "left pending"),
              (len(result.not_tried), "not tried")]
    line = " · ".join(f"{n} {what}" for n, what in counts if n) or "nothing to upload"
    return f"{line} — stopped: {result.stopped}" if result.stopped else line


def publish_upload(agency: str, result: AgencyUpload, tried: list[tuple[str, FileOutcome]]) -> None:
    """The ``upload-<agency>`` table of one agency's upload stage (:func:`upload_rows`)."""
    create_table_artifact(upload_rows(result, tried), key=f"upload-{agency}",
                          description=f"upload to {result.target or agency}: {upload_message(result)}")


def dead_letter_key(wd: Workdir) -> str:
    """``dead-letter-jobs-<folder>-<hash>``: one key per workdir (two workdirs on one server never mix their
    tables). Artifact keys take only lower-case letters, digits and dashes; the hash tells two folders of one
    name apart."""
    folder = re.sub(r"[^a-z0-9]+", "-", wd.root.name.lower()).strip("-")[:40] or "workdir"
    digest = hashlib.sha256(str(wd.root.resolve()).encode()).hexdigest()[:8]
    return f"{DEAD_LETTER_JOBS}-{folder}-{digest}"


def dead_letters_description(jobs: list[ParkedJob], wd: Workdir, deployed: bool | None = None) -> str:
    """The markdown above the ``dead-letter-jobs`` table: how many, how to replay (from the UI only where the
    server has the replay deployment: ``deployed``), which will fail again."""
    if not jobs:
        return f"Nothing parked in {md_code(wd.root)}."
    return "\n\n".join([f"{len(jobs)} parked describe job(s) in {md_code(wd.root)}; {replay_how(deployed)}.",
                         *unchanged_warning(jobs)])


def publish_dead_letters(wd: Workdir, store: Callable[[], DeadLetterStore]) -> int | None:
    """The ``dead-letter-jobs-<workdir>`` table of every parked job in ``store()`` (the run's store, opened on
    first use; an empty table says "nothing parked").

    Returns the number of rows; None, with a warning in the log, when the store cannot be read
    (the run goes on: the table is a view, the store is the truth).
    """
    try:
        jobs = store().list(status="parked", limit=MAX_DEAD_LETTER_ROWS)
    except StoreUnavailable as exc:
        log.warning("dead-letter table not published: %s", exc.message)
        return None
    create_table_artifact(dead_letter_rows(jobs), key=dead_letter_key(wd),
                          description=dead_letters_description(jobs, wd, replay_deployed() if jobs else None))
    return len(jobs)


def publish_dead_letter_summary(summary: Summary, wd: Workdir) -> None:
    """The ``dead-letter-summary`` markdown of the daily flow."""
    text = dead_letter_markdown(summary, wd.dead_letter_db)  # it says how to replay from the terminal
    if summary.oldest_first_seen is not None:
        text += f"\n\nOldest parked since {when(summary.oldest_first_seen)}. {ui_replay_note(replay_deployed())}"
    create_markdown_artifact(text, key=DEAD_LETTER_SUMMARY,
                             description="Parked describe jobs by error class")


def batch_job_key(display_name: str) -> str:
    """The artifact key of one batch job: ``batch-`` + its display name (already lower-case, digits and dashes)."""
    return "batch-" + re.sub(r"[^a-z0-9-]", "-", display_name.lower())


def publish_batch_job(display_name: str, job_name: str, state: str, rows: dict[str, str]) -> None:
    """The table of one collected batch job: a row per asset and what became of it."""
    table = [{"asset": name, "result": result} for name, result in sorted(rows.items())]
    counts = Counter(result.split(":", 1)[0] for result in rows.values())
    create_table_artifact(table, key=batch_job_key(display_name),
                          description=f"Gemini batch job {job_name} ({display_name}) {state}: "
                                      + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
