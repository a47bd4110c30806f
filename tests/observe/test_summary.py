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
