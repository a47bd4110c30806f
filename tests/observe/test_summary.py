"""The run summary: counts, tokens, and lists that stay short at scale."""

from __future__ import annotations

from flows.run_outcome import exit_code, state_name
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
    assert "img\\_0000.jpg: too small" in md and "img\\_0009.jpg" in md and "img\\_0010.jpg" not in md
    assert "… and 4990 more: every one in reports/ingest.json and reports/pack.json" in md
    assert len(md) < 2000


def test_the_run_summary_shows_billed_tokens_and_cost_for_the_batch_and_per_asset(tmp_path):
    from rich.console import Console

    from tasks.core.records import Usage
    from tasks.core.reports import CsvReport, DescribeReport, Gathered, PackReport
    from tasks.core.workdir import Workdir
    from tasks.observe.artifacts import batch_rows
    from tasks.observe.terminal import summary_table

    described = DescribeReport(described=["a.jpg", "b.jpg", "c.jpg", "d.jpg"], tokens=4000, cost_usd=0.002,
                               cost_unknown=0, usage=Usage(prompt_tokens=3600, output_tokens=240, thought_tokens=160))
    s = BatchSummary.from_stages(Workdir(tmp_path), Gathered(assets=[]), described, CsvReport(), PackReport(), {})
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


def test_in_batch_mode_the_summary_counts_assets_in_batch_jobs_and_what_batch_saved(tmp_path):
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
    s = BatchSummary.from_stages(Workdir(tmp_path), Gathered(assets=[]), described, CsvReport(), PackReport(), {})
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


def stopped_run(**more) -> BatchSummary:
    return BatchSummary(workdir="/w", assets=3, described=3, described_now=3, uploaded_now={"vecteezy": 3},
                        uploaded_total={"vecteezy": 3, "adobe": 0, "dreamstime": 0},
                        upload_stopped={"adobe": "connection refused", "dreamstime": "no password for dreamstime"},
                        upload_not_tried={"adobe": 3, "dreamstime": 3},
                        targets={"adobe": "sftp://123@sftp.example:22/", "vecteezy": "/w/outbox/vecteezy",
                                 "dreamstime": "ftp://upload.example/"}, **more)


def test_a_run_that_left_uploads_pending_is_named_incomplete_and_says_why():
    """Regression (issue 26): a run whose agencies stopped ended a plain Completed ``3 described · 0 parked ·
    3 uploaded``."""
    s = stopped_run()
    assert s.headline() == ("3 described · 0 parked · 3 uploaded · 6 upload(s) left pending: adobe stopped "
                            "(connection refused), dreamstime stopped (no password for dreamstime)")
    assert s.headline(reasons=False).endswith("6 upload(s) left pending: adobe stopped, dreamstime stopped")
    assert state_name(s) == "Incomplete"
    waiting = BatchSummary(workdir="/w", described_now=2, in_review={"a.jpg": "waiting for review"})
    assert state_name(waiting) == "Incomplete" and waiting.headline().endswith("· 1 waiting for review")
    failed = BatchSummary(workdir="/w", upload_failed={"adobe": {"a.jpg": "timeout"}})
    assert state_name(failed) == "Incomplete" and "1 upload(s) left pending" in failed.headline()


def test_parked_jobs_alone_keep_the_run_completed_and_the_message_names_them():
    s = BatchSummary(workdir="/w", described_now=11, parked=1, uploaded_now={"adobe": 11})
    assert state_name(s) == "Completed" and s.headline() == "11 described · 1 parked · 11 uploaded"
    assert (exit_code(s), exit_code(stopped_run())) == (0, 3), "exit 0 for parked jobs, 3 for a stop"


def test_the_headline_counts_only_this_runs_review_rejections():
    """Regression (issue 26): an approve-all run said "1 rejected in review" for a rejection of an earlier run."""
    earlier = BatchSummary(workdir="/w", in_review={"a.jpg": "rejected in review (2026-11-30T02:10:00+00:00)"})
    assert "rejected in review" not in earlier.headline() and earlier.review_count("rejected in review") == 1
    now = BatchSummary(workdir="/w", in_review={"a.jpg": "rejected in review (2026-11-30T02:10:00+00:00)",
                                                "b.jpg": "rejected in review"})
    assert "· 1 rejected in review ·" in now.headline()


def test_the_summary_markdown_shows_a_target_as_written_and_its_headline_once():
    """Regression (issue 26): ``sftp://…`` rendered as "s" and an ftp:// link; the headline was printed twice."""
    from tasks.observe.markdown import md_cell

    md = summary_markdown(stopped_run())
    assert "`sftp://123@sftp.example:22/` · **stopped**: connection refused" in md
    assert md.count("6 upload(s) left pending") == 1
    assert md_cell("cannot reach sftp://host") == "cannot reach sftp:\\/\\/host"


def test_held_back_work_is_in_the_headline_and_the_next_steps_with_readable_reasons(tmp_path):
    """Regression (issue 35): 16 images held back as versions of one motif, and one below Vecteezy's keyword minimum,
    were missing from ``28 described · 0 parked · 68 uploaded`` and from "Next steps"; the hold's rule read
    ``image``."""
    from tasks.core.reports import AgencyCsv, CsvReport, DescribeReport, Gathered, PackReport, Problem
    from tasks.core.workdir import Workdir
    from tasks.observe.markdown import next_steps

    packed = PackReport(held_back={"adobe": {f"motif_{i:02}.jpg": "one of 19 versions of one motif" for i in range(16)}
                                   | {"small.jpg": "below adobe's minimum of 4 MP"}},
                        similar_held={"adobe": {f"motif_{i:02}.jpg" for i in range(16)}},
                        rejected={"broken.jpg": "not an image"})
    assert packed.left_out_rule("adobe", "motif_03.jpg") == "similar content"
    assert packed.left_out_rule("adobe", "small.jpg") == "image size"
    assert packed.left_out_rule("adobe", "broken.jpg") == "image"
    csvs = CsvReport(agencies={"adobe": AgencyCsv(agency="adobe", display_name="Adobe Stock", csv_upload="none"),
                               "vecteezy": AgencyCsv(agency="vecteezy", display_name="Vecteezy", csv_upload="none")},
                     problems=[Problem(agency="adobe", asset=name, rule=packed.left_out_rule("adobe", name),
                                       message=why) for name, why in packed.left_out("adobe").items()]
                     + [Problem(agency="vecteezy", asset="sparse.jpg", rule="keywords.min",
                                message="3 keyword(s); Vecteezy needs at least 5"),
                        Problem(agency="vecteezy", asset="waits.jpg", rule="review", message="waiting for review")])
    described = DescribeReport(described=["a.jpg"] * 28)
    s = BatchSummary.from_stages(Workdir(tmp_path / "w").prepare(), Gathered([]), described, csvs, packed, {})
    assert s.headline() == ("28 described · 0 parked · 1 rejected · 0 uploaded · held back: adobe 17 "
                            "(16 similar content, 1 image size), vecteezy 1 (below the keyword minimum)")
    assert state_name(s) == "Completed", "held back by an agency's rule is no work left undone"
    steps = next_steps(csvs)
    (adobe,) = [step for step in steps if step.startswith("Adobe Stock:")]
    assert adobe == ("Adobe Stock: 17 held back, not sent there — similar content (versions of one motif beyond "
                     "adobe's cap): motif_00.jpg, motif_01.jpg, motif_02.jpg, motif_03.jpg, motif_04.jpg … and 11 more "
                     "(`microstock similar release NAME --agency adobe` sends one anyway); image size: small.jpg")
    assert "Vecteezy: 1 held back, not sent there — below the keyword minimum: sparse.jpg" in " ".join(steps)
    assert "waits.jpg" not in " ".join(steps) and "broken.jpg" not in " ".join(steps)


def test_the_assets_count_holds_the_clips_described_counts_and_says_how_many_are_clips(workdir, clips):
    import shutil

    from tasks.core.records import Asset
    from tasks.core.reports import CsvReport, DescribeReport, Gathered, PackReport
    from tests.observe.test_cron_log import table_text

    shutil.copy(clips["hd"], workdir.assets / "harbour.mp4")
    image = Asset(name="alps.jpg", asset_id="a" * 64, path=workdir.assets / "alps.jpg")
    clip = Asset(name="harbour.mp4", asset_id="c" * 64, path=workdir.assets / "harbour.mp4")
    described = DescribeReport(described=["alps.jpg", "harbour.mp4"])  # the describe stage is given both
    s = BatchSummary.from_stages(workdir, Gathered(assets=[image, clip]), described, CsvReport(), PackReport(), {})
    assert (s.assets, s.clips, s.described) == (2, 1, 2)
    assert s.assets_note() == "1 image · 1 clip"
    assert "| assets | 2 |" in summary_markdown(s) and "1 image · 1 clip" in summary_markdown(s)
    assert "1 image · 1 clip" in table_text(s)
    assert BatchSummary(workdir="/w", assets=3).assets_note() == ""
