"""Replaying parked jobs and summarising the store through the real flows, with the real SDK and fake Gemini
server, where the flow shows it: the dry run, recovered assets reaching the CSVs, outbox and ledger, the replay
table, the dead-letter summary (the replay stage's own logic, called plainly: tests/stages/test_replay.py).

A stock-batch run over coloured photos parks some jobs (503s that outlast
the retries, a safety block); the replay then recovers them and they reach
the CSVs, the outbox and the ledger like any other asset.
"""

from __future__ import annotations

import csv
import sqlite3
from contextlib import closing
from pathlib import Path

from tasks.core.files import sha256_file
from tasks.core.records import read_sidecar
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini import ratelimit
from tasks.gemini.describer import GeminiDescriber
from tasks.stores.dead_letter_open import open_store
from tests.fakes import prefect_api
from tests.fakes.gemini import FAKE_KEY, FakeGemini, fake_gemini, finished  # noqa: F401  (fake_gemini is a fixture)
from tests.fakes.ledger import ledger_entries
from tests.orchestration.test_describe_runs import flow_run_logs
from tests.stages.test_batch_describe import batch_settings, make_assets, plain_describe
from tests.stages.test_describe import gemini_key  # noqa: F401  (a fixture)
from tests.stages.test_replay import (  # noqa: F401  (gemini is a fixture)
    NAMES,
    gemini,
    new_workdir,
    parked_describe,
    parking_script,
    photos,
)


def batch(wd: Workdir, source: Path):
    from flows.stock_batch import stock_batch

    state = stock_batch(workdir=str(wd.root), source=str(source), agencies=["adobe"], return_state=True)
    assert state.is_completed(), state.message
    return state


def replay(wd: Workdir, **params):
    from flows.replay import replay_dead_letters

    state = replay_dead_letters(workdir=str(wd.root), return_state=True, **params)
    assert state.is_completed(), state.message
    return state, state.result()


def replay_table(state) -> list[dict]:
    """The rows of a replay run's ``replay-assets`` table, as the API gives them."""
    import json

    (table,) = prefect_api.artifacts(state.state_details.flow_run_id, key="replay-assets")
    return json.loads(table.data) if isinstance(table.data, str) else table.data


def adobe_rows(wd: Workdir) -> list[str]:
    path = wd.csv / "adobe.csv"
    return sorted(row["Filename"] for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines()))


def parked_batch(tmp_path: Path, gemini: FakeGemini):
    """A stock-batch run where :func:`parking_script` parks three jobs. Returns the workdir, the script and the
    run's final state."""
    source = photos(tmp_path / "photos", NAMES)
    wd = new_workdir(tmp_path)
    script = parking_script(gemini)
    state = batch(wd, source)
    first = state.result()
    assert (first["described_now"], first["parked"]) == (1, 3)
    assert adobe_rows(wd) == ["calm.jpg"]
    return wd, script, state


def test_replay_recovers_parked_jobs_and_takes_them_to_csv_and_outbox(prefect_harness, gemini, tmp_path):
    wd, script, batch_state = parked_batch(tmp_path, gemini)
    store = open_store(wd, Settings())
    before = {j.asset_name: j for j in store.list()}
    assert {n: (j.error_class, j.attempts) for n, j in before.items()} == {
        "storm1.jpg": ("exhausted:503", 2), "storm2.jpg": ("exhausted:503", 2), "unsafe.jpg": ("blocked:SAFETY", 1)}

    calls = len(gemini.requests)
    state, dry = replay(wd, error_class="exhausted")
    assert (dry["scanned"], dry["recovered"], dry["still_failing"], dry["dry_run"]) == (2, 0, 0, True)
    assert len(gemini.requests) == calls, "a dry run calls nothing"
    assert {n: j for n, j in ((j.asset_name, j) for j in store.list())} == before, "a dry run changes nothing"
    logs = flow_run_logs(state)
    assert f"[dry-run] would replay {before['storm1.jpg'].job_id} (exhausted:503)" in logs
    assert "unsafe.jpg" not in logs

    applied_state, applied = replay(wd, error_class="exhausted",
                                    dry_run=False)  # the outage is over: default answers are good
    assert (applied["scanned"], applied["recovered"], applied["still_failing"], applied["dry_run"]) == (2, 2, 0, False)
    assert sorted(applied["recovered_assets"]) == ["storm1.jpg", "storm2.jpg"]
    after = {j.asset_name: j for j in store.list()}
    assert {n: j.status for n, j in after.items()} == {"storm1.jpg": "recovered", "storm2.jpg": "recovered",
                                                       "unsafe.jpg": "parked"}
    assert all(j.claimed_by is None for j in after.values())
    assert adobe_rows(wd) == ["calm.jpg", "storm1.jpg", "storm2.jpg"]
    assert sorted(p.name for p in wd.outbox("adobe").iterdir()) == ["calm.jpg", "storm1.jpg", "storm2.jpg"]
    ledger = {e.filename: e.sha256 for e in ledger_entries(wd.ledger)}
    assert ledger["storm1.jpg"] == sha256_file(wd.assets / "storm1.jpg")
    assert open_store(wd, Settings()).summary().by_class == [("blocked:SAFETY", 1)]

    # still blocked: it stays parked, with one more attempt, a newer last_seen and no claim
    with closing(sqlite3.connect(wd.dead_letter_db)) as con, con:  # parked a minute ago: "newer" needs no sleep
        con.execute("UPDATE dead_letter SET first_seen = first_seen - 60, last_seen = last_seen - 60"
                    " WHERE asset_name = 'unsafe.jpg'")
    before["unsafe.jpg"] = store.get(before["unsafe.jpg"].job_id)
    calls = len(gemini.requests)
    skipping_state, skipping = replay(wd, dry_run=False)  # by default a block is not replayed unchanged
    assert (skipping["scanned"], skipping["skipped"]) == (0, {"unsafe.jpg": "blocked:SAFETY"})
    assert len(gemini.requests) == calls and "1 skipped (fail again unless changed first)" in skipping_state.message
    assert [(r["asset"], r["result"], r["where it went"]) for r in replay_table(skipping_state)] == [
        ("unsafe.jpg", "skipped", "still parked")]
    assert [(r["asset"], r["result"], r["where it went"].split(";")[0]) for r in replay_table(applied_state)] == [
        ("storm1.jpg", "recovered", "adobe: uploaded"), ("storm2.jpg", "recovered", "adobe: uploaded")]
    script.set("unsafe.jpg", finished("SAFETY"))
    again_state, again = replay(wd, dry_run=False, include_doomed=True)
    assert (again["scanned"], again["recovered"], again["still_failing"]) == (1, 0, 1)
    assert [(r["asset"], r["result"], r["parked as"]) for r in replay_table(again_state)] == [
        ("unsafe.jpg", "still failing", "blocked:SAFETY")]
    unsafe = open_store(wd, Settings()).list(status="parked")[0]
    assert (unsafe.asset_name, unsafe.attempts, unsafe.error_class) == ("unsafe.jpg", 2, "blocked:SAFETY")
    assert unsafe.last_seen > before["unsafe.jpg"].last_seen and unsafe.first_seen == before["unsafe.jpg"].first_seen
    assert unsafe.claimed_by is None
    assert script.count("unsafe.jpg") == 2
    assert adobe_rows(wd) == ["calm.jpg", "storm1.jpg", "storm2.jpg"]

    for path in wd.root.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path
    mine = {s.state_details.flow_run_id for s in (batch_state, state, applied_state, skipping_state, again_state)}
    artifacts = [a for run in mine for a in prefect_api.artifacts(run)]  # this test's runs only
    assert any("exhausted:503" in str(a.data) for a in artifacts), "the artifacts were read"
    assert all(FAKE_KEY not in str(a.data) and FAKE_KEY not in str(a.description) for a in artifacts)


def test_one_job_failing_unexpectedly_or_gone_does_not_stop_the_others(prefect_harness, gemini, tmp_path, monkeypatch):
    wd, _ = parked_describe(tmp_path, gemini)
    real_describe = GeminiDescriber.describe

    def describe(self, asset):
        if asset.name == "storm2.jpg":
            raise RuntimeError("a bug in our code")
        return real_describe(self, asset)

    monkeypatch.setattr(GeminiDescriber, "describe", describe)
    gone = wd.assets / "unsafe.jpg"
    gone.unlink()
    _, result = replay(wd, dry_run=False, include_doomed=True)
    assert (result["scanned"], result["recovered"], result["still_failing"]) == (3, 1, 2)
    assert result["recovered_assets"] == ["storm1.jpg"]
    rows = {j.asset_name: j for j in open_store(wd, Settings()).list()}
    assert rows["storm1.jpg"].status == "recovered"
    assert (rows["storm2.jpg"].status, rows["storm2.jpg"].error_class) == ("parked", "unknown:RuntimeError")
    assert rows["unsafe.jpg"].status == "parked" and "no longer in assets/" in rows["unsafe.jpg"].error_message
    assert all(j.claimed_by is None for j in rows.values())
    assert adobe_rows(wd) == ["calm.jpg", "storm1.jpg"]


def test_dead_letter_summary_flow_logs_and_publishes_the_report(prefect_harness, tmp_path):
    from flows.dead_letter_summary import dead_letter_summary

    wd = new_workdir(tmp_path)
    store = open_store(wd, Settings())
    for job_id, error_class in (("a", "exhausted:503"), ("b", "blocked:SAFETY"), ("c", "exhausted:503")):
        store.park(job_id, payload={"asset": f"{job_id}.jpg"}, model="m", error_class=error_class,
                   error_message="x", attempts=1, asset_name=f"{job_id}.jpg")
    state = dead_letter_summary(workdir=str(wd.root), return_state=True)
    assert state.is_completed()
    lines = state.result().splitlines()
    assert lines[:3] == ["dead-letter: 3 parked", "     2  exhausted:503", "     1  blocked:SAFETY"]
    assert lines[3].startswith("  oldest parked job: ") and lines[3].endswith(" old")
    assert "dead-letter: 3 parked" in flow_run_logs(state)
    mine = prefect_api.artifacts(state.state_details.flow_run_id, key="dead-letter-summary")
    assert len(mine) == 1 and "dead-letter: 3 parked" in mine[0].data and "| `exhausted:503` | 2 |" in mine[0].data
    assert mine[0].data.count("microstock replay --apply") == 1, "the advice once (it was given twice)"
    assert "Custom run" not in mine[0].data, "the test server has no replay deployment: no UI path to an empty page"

    empty = new_workdir(tmp_path / "empty")
    assert dead_letter_summary(workdir=str(empty.root)) == "dead-letter: clean (0 parked)"


def test_a_job_parked_in_batch_mode_is_replayed_through_sync_mode(prefect_harness, fake_gemini, gemini_key,
                                                                    tmp_path, monkeypatch):
    from flows.replay import replay_dead_letters

    monkeypatch.setattr(ratelimit, "_shared", {})  # a limiter of this test's own

    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text('[gemini]\nmode = "batch"\nbatch_resubmits = 0\nrequests_per_day = 0\n'
                              'requests_per_minute = 6000\n')
    names = ["r0.jpg", "r1.jpg"]
    assets = make_assets(wd, names)
    fake_gemini.batch.finish_after_s = 0
    fake_gemini.batch.end_as = ["failed"]
    settings = batch_settings(batch_resubmits=0)
    plain_describe(wd, settings, assets)
    _, parked = plain_describe(wd, settings, assets)
    assert parked.parked == {n: "batch:failed" for n in names}

    state = replay_dead_letters(dry_run=False, workdir=str(wd.root), return_state=True)
    assert state.is_completed(), state.message
    assert state.result()["recovered"] == 2
    sync_calls = [r for r in fake_gemini.requests if r.path.endswith(":generateContent")]
    assert len(sync_calls) == 2 and fake_gemini.batch.created == 1, "one sync call each, no new batch job"
    assert open_store(wd, Settings()).list(status="parked") == []
    assert {read_sidecar(wd.sidecar(n)).metadata.describer for n in names} == {"gemini:gemini-3.5-flash-lite"}
