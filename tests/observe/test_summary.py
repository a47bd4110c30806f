"""The run summary: counts, tokens, and lists that stay short at scale."""

from __future__ import annotations

from tasks.observe.markdown import summary_markdown
from tasks.observe.summary import BatchSummary


def test_the_run_summary_shows_total_and_average_tokens():
    s = BatchSummary(workdir="/w", described=4, described_now=4, describer="gemini:gemini-2.5-flash", tokens=1300)
    assert s.tokens_per_asset == 325
    assert "1,300 tokens (325 per asset)" in summary_markdown(s)
    offline = BatchSummary(workdir="/w", described=4, described_now=4, describer="offline")
    assert offline.tokens_per_asset == 0 and "tokens" not in summary_markdown(offline)


def test_a_summary_of_thousands_lists_ten_names_and_a_count():
    rejected = {f"img_{i:04d}.jpg": "too small" for i in range(5000)}
    s = BatchSummary(workdir="/w", assets=5000, rejected=rejected)
    md = summary_markdown(s)
    assert "img_0000.jpg: too small" in md and "img_0009.jpg" in md and "img_0010.jpg" not in md
    assert "… and 4990 more" in md
    assert len(md) < 2000


def test_the_run_summary_shows_billed_tokens_and_cost_for_the_batch_and_per_asset():
    from rich.console import Console

    from tasks.core.records import Usage
    from tasks.core.reports import CsvReport, DescribeReport, Gathered, PackReport
    from tasks.core.workdir import Workdir
    from tasks.observe.artifacts import batch_rows
    from tasks.observe.terminal import summary_table

    described = DescribeReport(described=["a.jpg", "b.jpg", "c.jpg", "d.jpg"], tokens=4000, cost_usd=0.002,
                               cost_unknown=0, usage=Usage(prompt_tokens=3600, output_tokens=240, thought_tokens=160))
    s = BatchSummary.from_stages(Workdir("/w"), Gathered(assets=[]), described, CsvReport(), PackReport(), {})
    note = "prompt 3,600 · output 240 · thinking 160 · $0.0020 ($0.0005 per asset)"
    assert s.usage_note() == note
    assert note in summary_markdown(s)
    rows = {r["what"]: r for r in batch_rows(s)}
    assert rows["cost (USD)"]["total"] == 0.002 and rows["tokens used"]["detail"] == note
    console = Console(record=True, width=200)
    console.print(summary_table(s))
    assert note in console.export_text()
    partly = s.model_copy(update={"cost_unknown": 2})
    assert partly.usage_note().endswith("$0.0020 ($0.0010 per asset) · cost unknown for 2 (no confirmed price)")
    assert BatchSummary(workdir="/w", described_now=3).usage_note() == ""


def test_in_batch_mode_the_summary_counts_assets_in_batch_jobs_and_what_batch_saved():
    from rich.console import Console

    from tasks.core.records import Usage
    from tasks.core.reports import CsvReport, DescribeReport, Gathered, PackReport
    from tasks.core.workdir import Workdir
    from tasks.observe.artifacts import batch_rows
    from tasks.observe.batch_assets import describe_cell
    from tasks.observe.terminal import summary_table

    described = DescribeReport(described=["a.jpg", "b.jpg"], in_batch=["c.jpg", "d.jpg", "e.jpg"],
                               batch_jobs_submitted=1, tokens=2000, cost_usd=0.001, batch_saved_usd=0.001,
                               usage=Usage(prompt_tokens=1800, output_tokens=120, thought_tokens=80))
    s = BatchSummary.from_stages(Workdir("/w"), Gathered(assets=[]), described, CsvReport(), PackReport(), {})
    assert s.in_batch == 3 and "3 in batch jobs" in s.headline()
    assert s.usage_note().endswith("· batch saved $0.0010 against sync prices")
    md = summary_markdown(s)
    assert "| in batch jobs | 3 | 1 job(s) submitted this run" in md and "batch saved $0.0010" in md
    console = Console(record=True, width=250)
    console.print(summary_table(s))
    text = console.export_text()
    assert "in batch jobs" in text and "batch saved $0.0010 against sync prices" in text
    rows = {r["what"]: r for r in batch_rows(s)}
    assert rows["in batch jobs"]["total"] == 3 and rows["batch saved (USD)"]["total"] == 0.001
    assert describe_cell("c.jpg", described, {}, {}) == "in a batch job"
