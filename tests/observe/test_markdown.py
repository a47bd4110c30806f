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
