"""Batch mode of the describe stage where its task runs show (real Prefect): three runs over 30 assets, the
collect in a flow run (a task run and a table per collected job) between two plain ones; the real google-genai SDK,
the fake Gemini server's Batch API (the plain batch logic: tests/stages/test_batch_describe.py)."""

from __future__ import annotations

import json

import pytest

from tasks.core.files import sha256_file
from tasks.core.records import read_sidecar
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini import ratelimit
from tasks.gemini.models import cost_usd
from tasks.stores.batch_jobs import BatchJobs
from tasks.stores.dead_letter_open import open_store
from tests.fakes import prefect_api
from tests.fakes.gemini import answer_json, gemini_for_module
from tests.orchestration.test_describe_runs import run_describe
from tests.stages import test_describe
from tests.stages.test_batch_describe import (
    COLOURS,
    FAILURES,
    NAMES,
    batch_settings,
    make_assets,
    more_colours,  # noqa: F401  (an autouse fixture)
    plain_describe,
)
from tests.stages.test_describe import Script


@pytest.fixture(scope="module")
def thirty(prefect_harness, tmp_path_factory):
    """Three runs over 30 assets in batch mode: submit; collect (5 per-request failures); nothing left."""
    with gemini_for_module() as (fake, mp):
        mp.setattr(test_describe, "COLOURS", COLOURS)
        mp.setattr(ratelimit, "_shared", {})
        wd = Workdir(tmp_path_factory.mktemp("thirty")).prepare()
        assets = make_assets(wd, NAMES)
        script = Script(fake, NAMES)
        script.fallback = lambda req: answer_json(tokens=1000, thoughts=40)
        for name, (reply, _) in FAILURES.items():
            script.set(name, reply)
        fake.batch.finish_after_s = 0  # a job ends at its first look after the create
        _, submitted = plain_describe(wd, batch_settings(), assets)
        _, collected = run_describe(wd, batch_settings(), assets)  # in a flow run: a task run and a table per job
        _, again = plain_describe(wd, batch_settings(), assets)
        yield wd, fake, script, submitted, collected, again


def test_the_first_run_submits_every_asset_in_one_job_and_describes_none(thirty):
    wd, fake, _, submitted, _, _ = thirty
    assert submitted.batch_jobs_submitted == 1 and sorted(submitted.in_batch) == NAMES
    assert submitted.described == [] and submitted.parked == {} and submitted.pending == []
    assert len(fake.batch.requests) == 30, "one inline request per asset"
    assert not [r for r in fake.requests if r.path.endswith(":generateContent")], "no sync call in batch mode"


def test_a_finished_job_gives_25_sidecars_and_parks_5_with_their_classes(thirty):
    wd, _, _, _, collected, _ = thirty
    assert sorted(collected.described) == sorted(set(NAMES) - set(FAILURES))
    assert collected.parked == {name: cls for name, (_, cls) in FAILURES.items()}
    parked = {job.asset_name: job for job in open_store(wd, Settings()).list(status="parked")}
    assert {n: j.error_class for n, j in parked.items()} == collected.parked
    for job in parked.values():  # the same columns as sync mode: a replay (sync) takes them as they are
        assert job.attempts == 1 and job.model == "gemini-3.5-flash-lite"
        assert {"asset", "asset_id", "describer", "model", "prompt", "image_max_px"} <= set(job.payload)
    for name in collected.described:
        sidecar = read_sidecar(wd.sidecar(name))
        assert sidecar.asset_id == sha256_file(wd.assets / name) and sidecar.metadata.keywords


def test_batch_answers_cost_the_batch_price_and_the_report_says_what_batch_saved(thirty):
    wd, _, _, _, collected, _ = thirty
    sidecar = read_sidecar(wd.sidecar("b00.jpg"))
    usage = sidecar.metadata.usage
    assert usage.total == 1000
    import datetime as dt

    today = dt.date.today()
    assert sidecar.metadata.cost_usd == pytest.approx(cost_usd("gemini-3.5-flash-lite", usage, today, batch=True))
    sync = cost_usd("gemini-3.5-flash-lite", usage, today)
    assert sidecar.metadata.cost_usd == pytest.approx(sync / 2)
    assert collected.cost_usd == pytest.approx(25 * sidecar.metadata.cost_usd)
    assert collected.batch_saved_usd == pytest.approx(25 * (sync - sidecar.metadata.cost_usd))


def test_nothing_is_described_twice_and_a_third_run_submits_nothing(thirty):
    wd, fake, _, _, collected, again = thirty
    assert fake.batch.created == 1 and len(fake.batch.requests) == 30
    assert again.batch_jobs_submitted == 0 and again.described == [] and again.in_batch == []
    assert sorted(again.already) == sorted(collected.described)
    assert sorted(again.still_parked) == sorted(FAILURES)
    (record,) = BatchJobs(wd).records()
    assert record.ended == "succeeded" and record.counts == {"described": 25, "parked": 5}


def test_each_collected_job_is_one_task_run_and_one_table(thirty):
    wd, _, _, _, _, _ = thirty
    (record,) = BatchJobs(wd).records()
    job_id = record.job_name.rsplit("/", 1)[-1]
    # The display name starts with this workdir's key: the table is this test's. The job's name (fake000001)
    # repeats in other tests' fake servers: this test's task runs are the ones in the flow run that made the table.
    (artifact,) = prefect_api.artifacts(key=f"batch-{record.display_name}")
    runs = prefect_api.task_runs(artifact.flow_run_id, name=f"collect-{job_id}")
    assert len(runs) == 1 and runs[0].state.is_completed()
    rows = {row["asset"]: row["result"] for row in json.loads(artifact.data)}
    assert len(rows) == 30 and rows["b00.jpg"] == "described" and rows["b03.jpg"] == "parked: blocked:SAFETY"
