"""The terminal's bars and notices show untrusted names as they are: never Rich markup, whatever the console."""

from __future__ import annotations

from rich.console import Console

from tasks.observe import progress
from tasks.observe.terminal import stage_bars

HOSTILE = "[bold red]x[/].jpg [link=http://evil]y[/link]"


def test_a_notice_and_a_bar_label_print_markup_as_written():
    console = Console(record=True, width=200, force_terminal=False)  # markup on: the default console's
    with stage_bars(console):
        progress.notify(f"waiting for review: {HOSTILE}")
        with progress.StageProgress(HOSTILE, 1) as bar:
            bar.advance()
    text = console.export_text()
    assert f"waiting for review: {HOSTILE}" in text
    assert HOSTILE in text.splitlines()[-1], "the bar's label is the stage's words, markup and all"


def test_the_summary_and_validation_tables_print_names_as_written_on_a_console_with_markup_on():
    """Safe by construction, not by the command console's ``markup=False``: every cell, title and next step is
    plain text, its control characters written out."""
    from tasks.core.reports import AgencyCsv, CsvReport, Problem
    from tasks.observe.summary import BatchSummary
    from tasks.observe.terminal import summary_table, validation_table

    name = f"{HOSTILE}\x1b[2J.jpg"
    shown = f"{HOSTILE}\\x1b[2J.jpg"
    summary = BatchSummary(workdir="/w/[red]", assets=1, rejected={name: "not an image [bold]x[/bold]"},
                           stopped=f"[blink]{name}[/blink] could not be read")
    report = CsvReport(agencies={"adobe": AgencyCsv(agency="adobe", display_name="[i]Adobe[/i]", written=True,
                                                    files=[f"[b]{name}.csv"], rows=1)},
                       problems=[Problem(agency="adobe", asset=name, rule="title.min", message="[u]too short[/u]")])
    console = Console(record=True, width=600, force_terminal=False)  # markup on: Rich's default
    console.print(summary_table(summary))
    console.print(validation_table(report))
    text = console.export_text()
    for expected in (f"{shown}: not an image [bold]x[/bold]", "/w/[red]/assets",
                     f"[blink]{shown}[/blink] could not be read", "[i]Adobe[/i]", f"[b]{shown}.csv",
                     "[u]too short[/u]"):
        assert expected in text, expected
    assert "\x1b" not in text
