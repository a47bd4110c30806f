"""Markdown for the Prefect UI: the batch summary and the CSV validation report, escaped safely."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tasks.core.printable import printable
from tasks.core.reports import SIMILAR_CONTENT, CsvReport
from tasks.observe.summary import REJECTED_IN, BatchSummary, held_label, held_rules, listed
from tasks.stores.dead_letter import Summary

#: Markdown's own characters, written as themselves in a cell: ``&`` ``<`` ``>`` as HTML entities (a name
#: ``<img src=x onerror=…>`` is text, never HTML), ``* _ [ ] ~ #`` backslash-escaped (``[click](http://evil)`` is
#: no link, ``*a*`` or ``__init__`` no emphasis, ``~~x~~`` no strike-through), ``|`` so the table stays whole.
_MARKDOWN_CHARS = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "*": "\\*", "_": "\\_",
                                 "[": "\\[", "]": "\\]", "~": "\\~", "#": "\\#", "`": "'"})


def md_cell(text: object) -> str:
    """Text safe inside a markdown table cell (file names and reasons are the contributor's, not ours): shown as
    written, never as markup, HTML or a link (:data:`_MARKDOWN_CHARS`); a URL in it (``sftp://host``) is not made
    a link (the UI would link only its ``ftp://`` tail), nor is a user at a host (``sftp://me@host`` would become
    a ``mailto:`` link: ``@`` is escaped)."""
    return (printable(str(text).replace("\n", " ")).replace("\\", "\\\\").translate(_MARKDOWN_CHARS)
            .replace("://", ":\\/\\/").replace("@", "\\@"))


def md_code(text: object) -> str:
    """Text as inline code: a URL (``sftp://…``) is shown as written, never turned into a link."""
    return "`" + printable(str(text).replace("\n", " ")).replace("`", "'").replace("|", "\\|") + "`"


def next_steps(report: CsvReport, stopped: Mapping[str, str] | None = None) -> list[str]:
    """What the contributor does by hand, first things first: an agency that stopped (``stopped``: agency ->
    why) is fixed before anything else, and its portal CSV waits for its images; then the CSVs to upload in
    a portal (Adobe and Vecteezy) for the agencies whose images went."""
    stopped = stopped or {}
    held = held_rules(report, {})
    steps = [f"Fix first — {agency} stopped: {why.splitlines()[0].removeprefix(agency + ': ')}. Then run again: "
             "its files are pending and go with the next run." for agency, why in stopped.items()]
    for result in report.agencies.values():
        if result.agency in stopped:
            if result.written and result.rows and result.csv_upload == "portal":
                steps.append(f"{result.display_name}: upload {', '.join(result.files)} in the contributor portal "
                             "only after the run that sends its images")
            continue
        if result.written and result.rows and result.csv_upload == "portal":
            files = ", ".join(result.files)
            steps.append(f"{result.display_name}: upload {files} in the contributor portal after its images: "
                         "each row names a file already uploaded there")
    for agency, rules in held.items():
        steps.append(held_step(report.agencies[agency].display_name if agency in report.agencies else agency,
                               agency, rules))
    return steps


#: What the contributor can do about a hold, by its rule (rules not named here: the reason says it).
HELD_HOW = {
    SIMILAR_CONTENT: "`microstock similar release NAME --agency {agency}` sends one anyway",
    "keywords.min": "`microstock review edit NAME --keywords …` gives it more; the next run writes its row",
}


def held_step(display_name: str, agency: str, rules: Mapping[str, str]) -> str:
    """``Adobe Stock: 16 held back, not sent there — similar content: a.jpg, b.jpg, … (`microstock similar
    release …` sends one anyway)``."""
    by_rule: dict[str, list[str]] = {}
    for name, rule in sorted(rules.items()):
        by_rule.setdefault(rule, []).append(name)
    parts = []
    for rule, names in by_rule.items():
        shown = ", ".join(names[:5]) + (f" … and {len(names) - 5} more" if len(names) > 5 else "")
        how = HELD_HOW.get(rule, "").format(agency=agency)
        label = held_label(rule) + (f" (versions of one motif beyond {agency}'s cap)" if rule == SIMILAR_CONTENT
                                    else "")
        parts.append(f"{label}: {shown}" + (f" ({how})" if how else ""))
    return f"{display_name}: {len(rules)} held back, not sent there — " + "; ".join(parts)


def summary_markdown(s: BatchSummary) -> str:
    """The batch summary as markdown, for the ``batch-summary`` artifact."""
    m = md_cell
    lines = [f"# stock-batch: {m(s.headline())}", "", "| what | count | detail |", "|---|---:|---|"]
    lines.append(f"| assets | {s.assets} | {md_code(s.workdir + '/assets')}"
                 f"{' · ' + s.assets_note() if s.clips else ''} |")
    lines.append(f"| described | {s.described} | {m(s.described_note())}"
                 f"{', ' + s.tokens_note() if s.tokens else ''} |")
    if s.usage_note():
        lines.append(f"| tokens and cost | {s.prompt_tokens + s.output_tokens + s.thought_tokens} | "
                     f"{m(s.usage_note())} |")
    if s.clip_note():
        lines.append(f"| of which clips | {s.clip_tokens} | {m(s.clip_note())} |")
    if s.generation_note():
        lines.append(f"| image generation | {s.generation_tokens} | {m(s.generation_note())} |")
    lines.append(f"| parked | {s.parked + s.still_parked} | {s.parked} this run, {s.still_parked} from earlier runs |")
    if s.not_generated:
        lines.append(f"| not generated | {len(s.not_generated)} | {m(listed(s.not_generated))} |")
    lines.append(f"| pending | {s.pending} | {m(s.stopped or '')} |")
    if s.in_batch:
        lines.append(f"| in batch jobs | {s.in_batch} | {s.batch_jobs_submitted} job(s) submitted this run; "
                     "collected by the next run or collect-batches |")
    lines.append(f"| rejected | {len(s.rejected)} | {m(listed(s.rejected, REJECTED_IN))} |")
    if s.upscaled:
        lines.append(f"| upscaled | {len(s.upscaled)} | {m(listed(s.upscaled))} (enlarged to the agencies' minimum) |")
    for agency, rows in s.csv_rows.items():
        files = ", ".join(md_code(f) for f in s.csv_files.get(agency, []))
        lines.append(f"| CSV rows · {agency} | {rows} | {files} |")
    for agency, total in s.uploaded_total.items():
        stopped = (f" · **stopped**: {m(s.upload_stopped[agency])} ({m(s.stopped_note(agency))})"
                   if agency in s.upload_stopped else "")
        lines.append(f"| uploads · {agency} | {total} | {s.uploaded_now.get(agency, 0)} this run → "
                     f"{md_code(s.targets.get(agency, ''))}{stopped} |")
    if s.ai_ticks:
        lines += ["", "### AI-generated files: tick in the portal", ""] + [f"- {m(note)}" for note in s.ai_tick_notes()]
    return "\n".join(lines) + "\n"


def validation_markdown(report: CsvReport) -> str:
    """The validation report as markdown (for a Prefect artifact)."""
    lines = ["## Agency CSVs", "", "| agency | rows | fixed | skipped | files |", "|---|---:|---:|---:|---|"]
    skipped = Counter(p.agency for p in report.problems if p.asset)
    for agency, result in report.agencies.items():
        files = ", ".join(md_code(f) for f in result.files) if result.written else "not written"
        lines.append(f"| {md_cell(result.display_name)} | {result.rows} | {sum(result.fixes.values())} "
                     f"| {skipped[agency]} | {files} |")
    fixes = Counter()
    for result in report.agencies.values():
        fixes.update({f"{result.agency}: {rule}": n for rule, n in result.fixes.items()})
    if fixes:
        lines += ["", "Fixed automatically: " + ", ".join(f"{md_cell(k)} ×{n}" for k, n in sorted(fixes.items()))]
    if report.problems:
        lines += ["", "### Skipped for an agency", "", "| asset | agency | rule | problem |", "|---|---|---|---|"]
        lines += [f"| {md_cell(p.asset or '(all)')} | {p.agency} | {md_code(p.rule)} | {md_cell(p.message)} |"
                  for p in report.problems]
    steps = next_steps(report)
    if steps:
        lines += ["", "### Next steps", ""] + [f"- {md_cell(s)}" for s in steps]
    return "\n".join(lines) + "\n"


def dead_letter_markdown(summary: Summary, store: Path, now: float | None = None) -> str:
    """The dead-letter summary's text as markdown (the ``dead-letter-summary`` artifact), with a table per error
    class and how to replay. An error class and the store's path are shown as written: a backtick in them cannot
    close their code span (:func:`md_code`), and the text's lines (:meth:`Summary.text`, control characters
    written out) never start with the fence that would close its block."""
    out = ["# Dead-letter summary", "", "```", summary.text(now), "```", "", f"Store: {md_code(store)}"]
    if summary.by_class:
        out += ["", "| error class | parked |", "|---|---:|"]
        out += [f"| {md_code(error_class)} | {n} |" for error_class, n in summary.by_class]
        out += ["", "See them with `microstock dead-letter list`; replay with `microstock replay` "
                    "(dry run) and `microstock replay --apply`."]
    return "\n".join(out)
