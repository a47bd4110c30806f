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
