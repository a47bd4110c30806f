"""What a cron log shows (issue 35 item 6): output to a pipe is never cut at 80 columns, run names differ by the
second, and the summary's small wordings say what is true."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone

from rich.console import Console

from tasks.core.reports import AgencyCsv, CsvReport
from tasks.observe.markdown import summary_markdown
from tasks.observe.run_names import run_name
from tasks.observe.summary import BatchSummary
from tasks.observe.terminal import summary_table, validation_table

LONG = "/srv/photography/contributor-with-a-long-name/nightly/" + "deep/" * 12 + "microstock-data"


def test_a_pipe_gets_every_cell_whole_never_cut_at_80_columns():
    """The command's own console, its stdout a pipe and no COLUMNS (cron's environment): the summary table's
    workdir path arrives whole, on one line."""
    script = ("from flows.cli_common import console\nfrom tasks.observe.summary import BatchSummary\n"
              "from tasks.observe.terminal import summary_table\n"
              f"console.print(summary_table(BatchSummary(workdir={LONG!r}, assets=2)))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{LONG}/assets" in out.stdout, out.stdout
    assert "…" not in out.stdout


def test_two_runs_in_the_same_minute_get_different_names():
    first = run_name("stock-batch", datetime(2026, 12, 2, 0, 52, 7, tzinfo=timezone.utc))
    second = run_name("stock-batch", datetime(2026, 12, 2, 0, 52, 41, tzinfo=timezone.utc))
    assert first == "stock-batch 2026-12-02 00:52:07 UTC" and second == "stock-batch 2026-12-02 00:52:41 UTC"


def table_text(s: BatchSummary) -> str:
    console = Console(width=400, record=True)
    console.print(summary_table(s))
    return " ".join(console.export_text().split())


def test_a_second_run_says_none_described_this_run_not_by_a_dash():
    text = table_text(BatchSummary(workdir="/w", assets=2, described=2, described_now=0))
    assert "none this run (all described by earlier runs)" in text and "by —" not in text
    assert "2 this run by offline" in table_text(BatchSummary(workdir="/w", described=2, described_now=2,
                                                               describer="offline"))


def test_a_stopped_agency_counts_the_file_it_tried_apart_from_those_never_tried():
    s = BatchSummary(workdir="/w", uploaded_total={"adobe": 0, "dreamstime": 0},
                     upload_stopped={"adobe": "cannot connect after 3 attempts: connection refused",
                                     "dreamstime": "no password for dreamstime"},
                     upload_not_tried={"adobe": 4, "dreamstime": 2}, upload_stopped_on={"adobe": "dune.jpg"})
    text = table_text(s)
    assert "(dune.jpg tried, 3 not tried, all 4 left pending)" in text
    assert "(2 not tried, left pending)" in text and "4 not tried" not in text
    assert "dune.jpg tried, 3 not tried" in summary_markdown(s)


def test_an_sftp_user_at_host_in_the_headline_is_no_mailto_link():
    s = BatchSummary(workdir="/w", uploaded_total={"adobe": 0}, upload_not_tried={"adobe": 1},
                     upload_stopped={"adobe": "cannot connect to sftp://me@sftp.example:22"})
    heading = summary_markdown(s).splitlines()[0]
    assert "sftp:\\/\\/me\\@sftp.example:22" in heading, heading
    assert "me@sftp" not in heading


def test_the_terminal_tells_a_stopped_agency_to_wait_with_its_csv():
    report = CsvReport(agencies={"adobe": AgencyCsv(agency="adobe", display_name="Adobe Stock", rows=2,
                                                    files=["/w/csv/adobe.csv"])})
    console = Console(width=400, record=True)
    console.print(validation_table(report, {"adobe": "adobe: connection refused"}))
    text = " ".join(console.export_text().split())
    assert "Fix first — adobe stopped: connection refused" in text
    assert "only after the run that sends its images" in text and "arrived" not in text
    console.print(validation_table(report))
    assert "after its images: each row names a file already uploaded there" in " ".join(console.export_text().split())
