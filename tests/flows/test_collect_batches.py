"""Batch mode end to end: stock-batch submits, collect-batches collects and uploads; `microstock batches` list
and cancel. Real Prefect (test harness), the real SDK against the fake Gemini server's Batch API."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tasks.stores.batch_jobs import BatchJobs
from tests.fakes.gemini import fake_gemini  # noqa: F401  (a fixture)
from tests.fakes.ledger import ledger_entries
from tests.orchestration.test_describe_runs import run_describe
from tests.stages.test_batch_describe import batch_settings, make_assets
from tests.stages.test_describe import gemini_key  # noqa: F401  (gemini_key is a fixture)

AGENCIES = ("adobe", "vecteezy", "dreamstime")
NAMES = ["harbour.jpg", "meadow.jpg", "street.jpg"]
BATCH_TOML = '[gemini]\nmode = "batch"\nrequests_per_minute = 6000\nrequests_per_day = 0\n'


def test_collect_batches_carries_what_it_collected_to_the_outboxes(prefect_harness, fake_gemini, gemini_key,
                                                                    tmp_path):
    from flows.collect_batches import collect_batches_flow
    from flows.stock_batch import stock_batch

    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text(BATCH_TOML)
    make_assets(wd, NAMES, size=(2400, 1800))  # big enough for every agency
    fake_gemini.batch.finish_after_s = 0  # the job has ended by the first look after the create

    nightly = stock_batch(workdir=str(wd.root), count=0, return_state=True)
    assert nightly.is_completed(), nightly.message
    summary = nightly.result()
    assert summary["in_batch"] == 3 and summary["batch_jobs_submitted"] == 1 and summary["described_now"] == 0
    assert "3 in batch jobs" in nightly.message
    assert not any(wd.outbox(a).exists() and any(wd.outbox(a).iterdir()) for a in AGENCIES)

    collected = collect_batches_flow(workdir=str(wd.root), return_state=True)
    assert collected.is_completed(), collected.message
    assert collected.message == "collect-batches: 3 described · 0 parked · 0 still in batch jobs"
    for agency in AGENCIES:
        assert sorted(p.name for p in wd.outbox(agency).iterdir()) == NAMES
    assert sorted((e.agency, e.filename) for e in ledger_entries(wd.ledger)) == \
        sorted((a, n) for a in AGENCIES for n in NAMES)
    assert all(read_sidecar(wd.sidecar(n)).metadata.describer == "gemini-batch:gemini-3.5-flash-lite" for n in NAMES)

    again = stock_batch(workdir=str(wd.root), count=0, return_state=True).result()
    assert again["described_now"] == 0 and again["in_batch"] == 0 and again["batch_jobs_submitted"] == 0
    assert sum(again["uploaded_now"].values()) == 0 and fake_gemini.batch.created == 1


def test_collect_batches_without_a_key_collects_nothing(prefect_harness, tmp_path, monkeypatch):
    from flows.collect_batches import collect_batches_flow

    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    state = collect_batches_flow(workdir=str(tmp_path / "w"), return_state=True)
    assert state.is_completed() and "no Gemini key" in state.message


runner = CliRunner()


def cli(wd: Workdir, *args):
    """``microstock batches [ARGS] --workdir W`` (no ARGS: the list)."""
    return runner.invoke(app, ["batches", *args, "--workdir", str(wd.root)])


def test_batches_lists_the_jobs_and_cancel_sends_them_back_to_pending(prefect_harness, fake_gemini, gemini_key,
                                                                      tmp_path, monkeypatch):
    from flows.cli_common import console

    monkeypatch.setattr(console, "width", 300)  # the console was made when flows.cli_common was first imported
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["c0.jpg", "c1.jpg"])
    fake_gemini.batch.finish_after_s = 3600  # still running when listed
    run_describe(wd, batch_settings(), assets)
    (record,) = BatchJobs(wd).records()

    listed = cli(wd)
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if record.job_name in line)
    assert record.display_name in row and "running" in row and " 2 " in row and " UTC" in row

    unknown = cli(wd, "cancel", "batches/nope")
    assert unknown.exit_code == 2 and "no batch job 'batches/nope' in this workdir" in unknown.output
    cancelled = cli(wd, "cancel", record.display_name)
    assert cancelled.exit_code == 0, cancelled.output
    assert f"cancelled {record.job_name}" in cancelled.stdout
    assert fake_gemini.batch.jobs[record.job_name].state == "CANCELLED"

    _, report = run_describe(wd, batch_settings(), assets)  # the next run: back to pending, submitted again
    assert report.parked == {} and report.batch_jobs_submitted == 1 and fake_gemini.batch.created == 2
    first, second = BatchJobs(wd).records()
    assert first.ended == "cancelled" and first.counts == {"pending": 2} and second.live
    again = cli(wd, "cancel", record.job_name)
    assert again.exit_code == 2 and "has already ended (cancelled)" in again.output
    listed = cli(wd)
    assert "cancelled" in next(line for line in listed.stdout.splitlines() if record.job_name in line)
