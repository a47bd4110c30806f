"""The run summary: one record, shown as a terminal table, a Prefect artifact and the final state message."""

from __future__ import annotations

from pydantic import BaseModel, Field
from rich.table import Table


class BatchSummary(BaseModel):
    """What one stock-batch run left in the workdir, counted."""

    workdir: str
    assets: int = 0
    described: int = 0
    described_now: int = 0
    parked: int = 0
    #: Parked by earlier runs and waiting for a replay (not called again).
    still_parked: int = 0
    pending: int = 0
    #: Generated images that could not be made this run (name -> reason); the next run tries again.
    not_generated: dict[str, str] = Field(default_factory=dict)
    rejected: dict[str, str] = Field(default_factory=dict)
    describer: str = ""
    stopped: str | None = None
    tokens: int = 0
    csv_rows: dict[str, int] = Field(default_factory=dict)
    csv_files: dict[str, list[str]] = Field(default_factory=dict)
    uploaded_now: dict[str, int] = Field(default_factory=dict)
    uploaded_total: dict[str, int] = Field(default_factory=dict)
    upload_failed: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: Agencies that stopped early (refused login, unreachable server): agency -> why.
    upload_stopped: dict[str, str] = Field(default_factory=dict)
    #: Files left pending without being tried because their agency stopped: agency -> count.
    upload_not_tried: dict[str, int] = Field(default_factory=dict)
    held_back: dict[str, dict[str, str]] = Field(default_factory=dict)
    targets: dict[str, str] = Field(default_factory=dict)
    zip_path: str | None = None

    @property
    def tokens_per_asset(self) -> float:
        """Average Gemini tokens per asset described this run (0 when none was)."""
        return self.tokens / self.described_now if self.described_now else 0.0

    def tokens_note(self) -> str:
        """``3,852 tokens (321 per asset)``, or empty when no tokens were used (offline)."""
        return f"{self.tokens:,} tokens ({self.tokens_per_asset:,.0f} per asset)" if self.tokens else ""

    def headline(self) -> str:
        """The final state message: ``12 described · 1 parked · 36 uploaded``."""
        parts = [f"{self.described_now} described", f"{self.parked} parked"]
        if self.pending:
            parts.append(f"{self.pending} pending")
        if self.not_generated:
            parts.append(f"{len(self.not_generated)} not generated")
        if self.rejected:
            parts.append(f"{len(self.rejected)} rejected")
        parts.append(f"{sum(self.uploaded_now.values())} uploaded")
        return " · ".join(parts)


#: Names listed in a summary row; a batch of thousands shows the first ones and a count.
LISTED = 10


def listed(reasons: dict[str, str]) -> str:
    """``name: reason; …`` for the first :data:`LISTED` names, then ``… and N more``."""
    names = sorted(reasons)
    text = "; ".join(f"{k}: {reasons[k]}" for k in names[:LISTED])
    return text + (f"; … and {len(names) - LISTED} more" if len(names) > LISTED else "")


def skip_notes(s: BatchSummary) -> list[str]:
    """What a re-run skipped, said plainly (nothing is done twice)."""
    notes = []
    if s.described > s.described_now:
        notes.append(f"skipped {s.described - s.described_now} assets already described")
    for agency, total in s.uploaded_total.items():
        already = total - s.uploaded_now.get(agency, 0)
        if already:
            notes.append(f"skipped {already} uploads to {agency} already in the ledger")
    return notes


def summary_table(s: BatchSummary) -> Table:
    """The terminal table printed at the end of ``microstock run``."""
    t = Table(title=f"stock-batch · {s.headline()}", show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("count", justify="right")
    t.add_column("where / detail")
    t.add_row("assets", str(s.assets), f"{s.workdir}/assets")
    t.add_row("described", str(s.described),
              " · ".join(filter(None, [f"{s.described_now} this run by {s.describer or '—'}", s.tokens_note()])))
    parked_note = f"{s.parked} this run, {s.still_parked} from earlier runs · microstock dead-letter list"
    t.add_row("parked", str(s.parked + s.still_parked), parked_note if s.parked + s.still_parked else "")
    if s.pending:
        t.add_row("pending", str(s.pending), s.stopped or "left for the next run")
    if s.not_generated:
        t.add_row("not generated", str(len(s.not_generated)),
                  listed(s.not_generated) + " · the next run tries again")
    if s.stopped and not s.pending:
        t.add_row("stopped", "", s.stopped)
    if s.rejected:
        t.add_row("rejected", str(len(s.rejected)), listed(s.rejected))
    for agency, rows in s.csv_rows.items():
        t.add_row(f"CSV rows · {agency}", str(rows), ", ".join(s.csv_files.get(agency, [])))
    for agency, total in s.uploaded_total.items():
        detail = f"{s.uploaded_now.get(agency, 0)} this run → {s.targets.get(agency, '')}"
        failed = s.upload_failed.get(agency) or {}
        if failed:
            detail += f" · {len(failed)} failed, left pending"
        held = s.held_back.get(agency) or {}
        if held:
            detail += f" · {len(held)} held back"
        if agency in s.upload_stopped:
            detail += (f" · STOPPED: {s.upload_stopped[agency]}"
                       f" ({s.upload_not_tried.get(agency, 0)} not tried, left pending)")
        t.add_row(f"uploads · {agency}", str(total), detail)
    if s.zip_path:
        t.add_row("batch ZIP", "", s.zip_path)
    return t


def md_cell(text: object) -> str:
    """Text safe inside a markdown table cell (file names and reasons are the contributor's, not ours)."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("\n", " ")


def summary_markdown(s: BatchSummary) -> str:
    """The batch summary as markdown, for the ``batch-summary`` artifact."""
    m = md_cell
    lines = [f"# stock-batch: {s.headline()}", "", "| what | count | detail |", "|---|---:|---|"]
    lines.append(f"| assets | {s.assets} | `{m(s.workdir)}/assets` |")
    lines.append(f"| described | {s.described} | {s.described_now} this run ({s.describer or '—'})"
                 f"{', ' + s.tokens_note() if s.tokens else ''} |")
    lines.append(f"| parked | {s.parked + s.still_parked} | {s.parked} this run, {s.still_parked} from earlier runs |")
    if s.not_generated:
        lines.append(f"| not generated | {len(s.not_generated)} | {m(listed(s.not_generated))} |")
    lines.append(f"| pending | {s.pending} | {m(s.stopped or '')} |")
    lines.append(f"| rejected | {len(s.rejected)} | {m(listed(s.rejected))} |")
    for agency, rows in s.csv_rows.items():
        files = ", ".join(f"`{m(f)}`" for f in s.csv_files.get(agency, []))
        lines.append(f"| CSV rows · {agency} | {rows} | {files} |")
    for agency, total in s.uploaded_total.items():
        stopped = f" · stopped: {s.upload_stopped[agency]}" if agency in s.upload_stopped else ""
        lines.append(f"| uploads · {agency} | {total} | {s.uploaded_now.get(agency, 0)} this run → "
                     f"{m(s.targets.get(agency, '') + stopped)} |")
    return "\n".join(lines) + "\n"
