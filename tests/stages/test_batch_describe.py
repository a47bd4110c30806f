"""Batch mode of the describe stage, called plainly (no flow run); the real google-genai SDK, the fake Gemini
server's Batch API. A collected job's task run and table (real Prefect):
tests/orchestration/test_describe_runs_batch.py; a job parked in batch mode replayed by the replay flow:
tests/flows/test_replay_flow.py.

Each asset is a plain-coloured image; the fake answers each inline request by
the colour of its image (the same :class:`Script` as the sync tests, with more
colours), so a job mixes answers and per-request errors as a test sets them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset, read_sidecar
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.gemini import ratelimit
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.batch_jobs import BatchJobs
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import (  # noqa: F401  (fake_gemini is a fixture)
    FAKE_KEY,
    answer_json,
    answer_text,
    error,
    fake_gemini,
    finished,
    gemini_for_module,
    prompt_blocked,
)
from tests.stages import test_describe
from tests.stages.test_describe import Script, gemini_key  # noqa: F401  (gemini_key is a fixture)

#: 64 colours far enough apart to survive JPEG and the downscale; the sync tests' Script matches by them.
COLOURS = [(r, g, b) for r in (20, 90, 160, 230) for g in (20, 90, 160, 230) for b in (20, 90, 160, 230)]


@pytest.fixture(autouse=True)
def more_colours(monkeypatch):
    monkeypatch.setattr(test_describe, "COLOURS", COLOURS)
    monkeypatch.setattr(ratelimit, "_shared", {})


def plain_describe(wd: Workdir, settings: Settings, assets: list[Asset]) -> tuple[None, object]:
    """The stage called plainly (no flow run, no task runs): (no state, its report), as ``run_describe`` gives."""
    return None, describe_stage(RunContext(wd, settings), assets)


def batch_settings(**gemini) -> Settings:
    base = dict(mode="batch", max_attempts=3, retry_delay_s=0.05, timeout_s=5, requests_per_minute=6000,
                requests_per_day=0)
    return Settings(gemini=GeminiSettings(**(base | gemini)))


def make_assets(wd: Workdir, names: list[str], size: tuple[int, int] = (400, 300)) -> list[Asset]:
    assets = []
    for name, colour in zip(names, COLOURS, strict=False):
        path = wd.assets / name
        Image.new("RGB", size, colour).save(path, quality=90)
        assets.append(Asset(name=name, asset_id=sha256_file(path), path=path))
    assert len(assets) == len(names), "add colours"
    return assets


NAMES = [f"b{i:02d}.jpg" for i in range(30)]
FAILURES = {
    "b03.jpg": (finished("SAFETY"), "blocked:SAFETY"),
    "b09.jpg": (prompt_blocked("PROHIBITED_CONTENT"), "blocked:PROHIBITED_CONTENT"),
    "b14.jpg": (finished("RECITATION"), "refused:RECITATION"),
    "b21.jpg": (error(400, "Request contains an invalid argument."), "permanent:400"),
    "b27.jpg": (answer_text("this is not JSON"), "invalid_output"),
}


def test_an_expired_job_is_resubmitted_then_parked_after_the_limit(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = ["e0.jpg", "e1.jpg", "e2.jpg"]
    assets = make_assets(wd, names)
    fake_gemini.batch.finish_after_s = 0
    fake_gemini.batch.end_as = ["expired", "expired"]
    settings = batch_settings(batch_resubmits=1)
    _, first = plain_describe(wd, settings, assets)
    _, second = plain_describe(wd, settings, assets)  # job 1 expired: resubmitted once
    assert first.batch_jobs_submitted == 1 and second.batch_jobs_submitted == 1
    assert second.parked == {} and sorted(second.in_batch) == names
    _, third = plain_describe(wd, settings, assets)  # job 2 expired too: past the limit
    assert third.parked == {n: "batch:expired" for n in names} and third.batch_jobs_submitted == 0
    assert fake_gemini.batch.created == 2
    parked = open_store(wd, Settings()).list(status="parked")
    assert {j.error_class for j in parked} == {"batch:expired"} and {j.attempts for j in parked} == {2}
    records = BatchJobs(wd).records()
    assert [r.ended for r in records] == ["expired", "expired"] and [r.try_number for r in records] == [1, 2]
    _, fourth = plain_describe(wd, settings, assets)
    assert fourth.batch_jobs_submitted == 0 and sorted(fourth.still_parked) == names


def test_a_create_gemini_refuses_parks_its_assets_and_leaves_no_intent(fake_gemini, gemini_key,
                                                                         tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = ["x0.jpg", "x1.jpg"]
    assets = make_assets(wd, names)
    fake_gemini.batch.max_body_bytes = 1000  # every create is "Request payload size exceeds the limit"
    _, report = plain_describe(wd, batch_settings(), assets)
    assert fake_gemini.batch.created == 0 and report.batch_jobs_submitted == 0
    assert report.parked == {n: "permanent:400" for n in names} and report.in_batch == []
    (record,) = BatchJobs(wd).records()
    assert record.ended == "refused" and BatchJobs(wd).live() == []
    _, again = plain_describe(wd, batch_settings(), assets)
    assert sorted(again.still_parked) == names and fake_gemini.batch.created == 0


def test_assets_in_a_live_job_are_not_submitted_again(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["l0.jpg", "l1.jpg", "l2.jpg"])
    fake_gemini.batch.finish_after_s = 3600  # running for the whole test
    _, first = plain_describe(wd, batch_settings(), assets[:2])
    _, second = plain_describe(wd, batch_settings(), assets)  # a new asset since
    assert first.batch_jobs_submitted == 1 and second.batch_jobs_submitted == 1
    assert fake_gemini.batch.created == 2 and len(fake_gemini.batch.requests) == 3
    assert sorted(second.in_batch) == ["l0.jpg", "l1.jpg", "l2.jpg"]


# --- a crash between the create call and the record ------------------------------------------

CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path

    from tasks.core.records import list_assets
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.gemini import batch
    from tasks.stages.describe import describe_stage
    from tasks.stages.run_context import RunContext

    create = batch.GeminiBatches.submit
    when = sys.argv[2]

    def submit_and_die(self, requests, display_name):
        if when == "before":  # killed after the intent, before the create request is sent
            os.kill(os.getpid(), signal.SIGKILL)
        job = create(self, requests, display_name)
        os.kill(os.getpid(), signal.SIGKILL)  # the job exists at Gemini; its name is not recorded

    batch.GeminiBatches.submit = submit_and_die

    describe_stage(RunContext.open(sys.argv[1]), list_assets(Workdir(Path(sys.argv[1])).assets))
""")


def run_and_kill(wd: Workdir, fake, when: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GOOGLE_GEMINI_BASE_URL": fake.url, "GEMINI_API_KEY": FAKE_KEY}
    return subprocess.run([sys.executable, "-c", CHILD, str(wd.root), when], env=env, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("when, created_by_the_crashed_run", [("after", 1), ("before", 0)],
                         ids=["killed after the create", "killed before the create"])
def test_a_run_killed_between_create_and_record_never_makes_a_second_job(
        fake_gemini, gemini_key, tmp_path, when, created_by_the_crashed_run):
    wd = Workdir(tmp_path / "w").prepare()
    names = [f"k{i}.jpg" for i in range(6)]
    assets = make_assets(wd, names)
    wd.config_file.write_text('[gemini]\nmode = "batch"\nrequests_per_day = 0\n')
    fake_gemini.batch.finish_after_s = 0
    child = run_and_kill(wd, fake_gemini, when)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert fake_gemini.batch.created == created_by_the_crashed_run
    (intent,) = BatchJobs(wd).live()
    assert intent.job_name is None and sorted(intent.assets.values()) == names

    _, rerun = plain_describe(wd, batch_settings(), assets)  # adopts the job, or creates it now
    _, last = plain_describe(wd, batch_settings(), assets)  # collects whatever is left
    assert fake_gemini.batch.created == 1, "exactly one job for these assets"
    displayed = {job.display_name for job in fake_gemini.batch.jobs.values()}
    assert displayed == {intent.display_name}, "under the display name the intent recorded"
    described = rerun.described + last.described
    assert sorted(described) == names and len(set(described)) == len(described)
    assert open_store(wd, Settings()).list(status="parked") == []
    assert all(read_sidecar(wd.sidecar(n)) for n in names)


@pytest.mark.parametrize("line, named", [('mode = "fast"', "gemini.mode"),
                                         ("batch_resubmits = -1", "gemini.batch_resubmits")])
def test_a_wrong_batch_setting_is_refused_naming_the_key(tmp_path, line, named):
    from tasks.core.errors import ConfigError
    from tasks.core.settings import load_settings

    path = tmp_path / "microstock.toml"
    path.write_text(f"[gemini]\n{line}\n")
    with pytest.raises(ConfigError, match=named):
        load_settings(path)
    path.write_text("[gemini]\n")
    assert load_settings(path).gemini.mode == "sync", "sync unless asked"
