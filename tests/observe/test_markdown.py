"""Markdown for the Prefect UI: an untrusted name in a cell is text, never HTML, a link, emphasis or a new column."""

from __future__ import annotations

import pytest

from tasks.core.reports import AgencyCsv, CsvReport, Problem
from tasks.observe.markdown import md_cell, validation_markdown


@pytest.mark.parametrize(("name", "cell"), [
    ("<img src=x onerror=alert(1)>.jpg", "&lt;img src=x onerror=alert(1)&gt;.jpg"),
    ("[click](http://evil).jpg", "\\[click\\](http:\\/\\/evil).jpg"),
    ("![x](http://evil/p.png)", "!\\[x\\](http:\\/\\/evil/p.png)"),
    ("*bold* __init__ ~~gone~~ #1.jpg", "\\*bold\\* \\_\\_init\\_\\_ \\~\\~gone\\~\\~ \\#1.jpg"),
    ("a|b `c` &amp; d\\e.jpg", "a\\|b 'c' &amp;amp; d\\\\e.jpg"),
    ("\x1b]0;PWNED\x07x\ny.jpg", "\\\\x1b\\]0;PWNED\\\\x07x y.jpg"),
])
def test_a_hostile_name_is_one_cell_of_plain_text(name, cell):
    assert md_cell(name) == cell


def test_the_validation_report_shows_a_hostile_name_escaped_in_its_row():
    name = "<script>alert(1)</script>[x](http://evil).jpg"
    report = CsvReport(agencies={"adobe": AgencyCsv(agency="adobe", display_name="Adobe Stock")},
                       problems=[Problem(agency="adobe", asset=name, rule="title.min", message="too short")])
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;\\[x\\](http:\\/\\/evil).jpg"
    assert [line for line in validation_markdown(report).splitlines() if "alert" in line] == [
        f"| {shown} | adobe | `title.min` | too short |",
        f"- Adobe Stock: 1 held back, not sent there — title.min: {shown}"], "the row and the next step"


def test_the_dead_letter_summary_keeps_a_hostile_error_class_and_store_path_inside_their_code():
    """An error class (a shared store holds whatever was parked) with backticks, a newline and a fence, and a
    store path with backticks: each stays in its code span or block; no heading, link or block is made of them."""
    from pathlib import Path

    from tasks.observe.markdown import dead_letter_markdown
    from tasks.stores.dead_letter import Summary

    hostile = "blocked:`](http://evil)\n```\n# owned"
    lines = dead_letter_markdown(Summary(by_class=[(hostile, 2)]), Path("/w/`x` [a](b).db")).splitlines()
    assert lines.count("```") == 2, "the block opened and closed once, by us"
    assert "     2  blocked:`](http://evil)\\x0a```\\x0a# owned" in lines  # inside the block, one line, as written
    assert "| `blocked:'](http://evil) ''' # owned` | 2 |" in lines  # a cell: the newline a space
    assert "Store: `/w/'x' [a](b).db`" in lines
    assert "# owned" not in lines
