"""What the terminal shows: rich progress bars per stage, the CSV validation tables, the run summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tasks.core.printable import printable
from tasks.core.reports import CsvReport
from tasks.observe import progress as stage_progress
from tasks.observe.markdown import next_steps
from tasks.observe.summary import REJECTED_IN, BatchSummary, listed


@contextmanager
def stage_bars(out: Console) -> Iterator[None]:
    """Rich progress bars on the terminal, one per stage, fed by :mod:`tasks.observe.progress`, and its notices
    (what a paused run waits for) printed above them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bars: dict[str, int] = {}
    with Progress(TextColumn("{task.description:<10}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=out, transient=False) as bar:
        def listener(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                bars[stage] = bar.add_task(stage, total=total)
            bar.update(bars[stage], completed=done, total=total)

        def notice(text: str) -> None:
            bar.console.print(Text(text), highlight=False, soft_wrap=True)  # names in it: never markup

        stage_progress.add_listener(listener)
        stage_progress.add_notice(notice)
        try:
            yield
        finally:
            stage_progress.remove_listener(listener)
            stage_progress.remove_notice(notice)


def _row(table: Table, *cells: str | Text) -> None:
    """A row of plain text, safe by construction: Rich markup in a cell (a file named ``[bold red]x[/].jpg``,
    ``[link=…]``) is shown as written on any console, markup on or off, and control characters are written out
    (:func:`~tasks.core.printable.printable`; a cell's several lines are each made printable by the caller)."""
    table.add_row(*(cell if isinstance(cell, Text) else Text(printable(cell)) for cell in cells))


def validation_table(report: CsvReport, stopped: Mapping[str, str] | None = None) -> Group:
    """The validation report for the terminal: rows per agency, then every skipped asset with its rule, then the
    next steps (an agency that stopped, ``stopped``: agency -> why, is told to fix it first, its portal CSV to wait
    for the run that sends its images)."""
    summary = Table(title="Agency CSVs", title_justify="left")
    for column in ("agency", "rows", "fixed", "skipped", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "fixed", "skipped") else "left")
    skipped = Counter(p.agency for p in report.problems if p.asset)
    for agency, result in report.agencies.items():
        files = Text("\n".join(map(printable, result.files)) if result.written else "not written (see problems)")
        _row(summary, result.display_name, str(result.rows), str(sum(result.fixes.values())), str(skipped[agency]),
             files)
    parts: list = [summary]
    if report.problems:
        problems = Table(title="Skipped for an agency (the rule it broke)", title_justify="left")
        for column in ("asset", "agency", "rule", "problem"):
            problems.add_column(column, overflow="fold")
        for p in report.problems:
            _row(problems, p.asset or "(all)", p.agency, p.rule, p.message)
        parts.append(problems)
    parts.extend(Text(printable(step)) for step in next_steps(report, stopped))
    return Group(*parts)


def skip_notes(s: BatchSummary) -> list[str]:
    """What a re-run skipped, said plainly (nothing is done twice)."""
    notes = []
    if s.described > s.described_now:
        notes.append(f"skipped {s.described - s.described_now} assets already described")
    for agency, total in s.uploaded_total.items():
        by_other_run = s.uploaded_by_other_run.get(agency, 0)
        already = total - s.uploaded_now.get(agency, 0) - by_other_run
        if by_other_run:
            notes.append(f"{by_other_run} upload(s) to {agency} made by another run at the same time (this run "
                         "waited for it to finish)")
        if already:
            notes.append(f"skipped {already} uploads to {agency} already in the ledger")
    return notes


def summary_table(s: BatchSummary) -> Table:
    """The terminal table printed at the end of ``microstock run``."""
    t = Table(title=Text(f"stock-batch · {printable(s.headline())}"), show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("count", justify="right")
    t.add_column("where / detail")
    _row(t, "assets", str(s.assets), " · ".join(filter(None, [f"{s.workdir}/assets", s.assets_note()])))
    _row(t, "described", str(s.described), " · ".join(filter(None, [s.described_note(), s.tokens_note()])))
    if s.usage_note():
        _row(t, "tokens and cost", f"{s.prompt_tokens + s.output_tokens + s.thought_tokens:,}", s.usage_note())
    if s.clip_note():
        _row(t, "of which clips", f"{s.clip_tokens:,}", s.clip_note())
    if s.generation_note():
        _row(t, "image generation", f"{s.generation_tokens:,}", s.generation_note())
    parked_note = f"{s.parked} this run, {s.still_parked} from earlier runs · microstock dead-letter list"
    _row(t, "parked", str(s.parked + s.still_parked), parked_note if s.parked + s.still_parked else "")
    if s.pending:
        _row(t, "pending", str(s.pending), s.stopped or "left for the next run")
    if s.in_batch:
        _row(t, "in batch jobs", str(s.in_batch), f"{s.batch_jobs_submitted} job(s) submitted this run · "
             "collected by the next run or collect-batches · microstock batches")
    if s.not_generated:
        _row(t, "not generated", str(len(s.not_generated)), listed(s.not_generated) + " · the next run tries again")
    if s.stopped and not s.pending:
        _row(t, "stopped", "", s.stopped)
    if s.rejected:
        _row(t, "rejected", str(len(s.rejected)), listed(s.rejected, REJECTED_IN))
    if s.upscaled:
        _row(t, "upscaled", str(len(s.upscaled)), listed(s.upscaled) + " · enlarged to the agencies' minimum")
    for agency, rows in s.csv_rows.items():
        _row(t, f"CSV rows · {agency}", str(rows), ", ".join(s.csv_files.get(agency, [])))
    for agency, total in s.uploaded_total.items():
        detail = f"{s.uploaded_now.get(agency, 0)} this run → {s.targets.get(agency, '')}"
        failed = s.upload_failed.get(agency) or {}
        if failed:
            detail += f" · {len(failed)} failed, left pending"
        held = s.held_back.get(agency) or {}
        if held:
            detail += f" · {len(held)} held back"
        if agency in s.upload_stopped:
            detail += f" · STOPPED: {s.upload_stopped[agency]} ({s.stopped_note(agency)})"
        _row(t, f"uploads · {agency}", str(total), detail)
    by_note: dict[str, list[str]] = {}  # agencies that see the same look-alikes share one row
    for agency, note in s.similar.items():
        by_note.setdefault(note, []).append(agency)
    for note, agencies in by_note.items():
        _row(t, f"similar · {', '.join(agencies)}", "", note)
    if s.zip_path:
        _row(t, "batch ZIP", "", s.zip_path)
    return t
