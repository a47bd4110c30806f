"""The Gemini quota shared through the Prefect server's rate limit (tasks/orchestration/shared_quota.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from tasks.core.errors import ConfigError
from tasks.core.settings import GeminiSettings, Settings, load_settings
from tasks.gemini.ratelimit import WINDOW_S, RateLimiter
from tasks.orchestration.describe_runs import IN_PREFECT
from tasks.orchestration.local_server import LocalServer, free_port
from tasks.orchestration.shared_quota import (
    HOLD_S,
    SLOTS_PER_CALL,
    SharedQuotaLimiter,
    budget,
    ensure_limit,
    limit_and_decay,
    limit_name,
    shared_quota_limiter,
)
from tasks.stages.describe_job import DescribeRun
from tasks.stages.run_context import RunContext
from tests.fakes.dead_letter_memory import MemoryDeadLetterStore
from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json, fake_gemini, slow  # noqa: F401 (a fixture)
from tests.postgres import start_postgres


@given(st.integers(min_value=3, max_value=30_000))
def test_the_servers_limit_never_allows_more_than_the_budget_in_60_seconds_and_the_budget_keeps_a_margin(rpm):
    slots, decay = limit_and_decay(rpm)
    # Room for at least one call, and slots that decay: Prefect refuses a rate limit without decay.
    assert slots >= SLOTS_PER_CALL and slots % SLOTS_PER_CALL == 0 and decay > 0
    # At most L + decay × (60 s + the longest a granted start may be held) slots in any 60 s window,
    # SLOTS_PER_CALL of them a call.
    assert (slots + decay * (WINDOW_S + HOLD_S)) / SLOTS_PER_CALL <= budget(rpm) + 1e-9
    assert budget(rpm) <= rpm - 1


def test_a_shared_quota_below_three_a_minute_is_refused_when_the_settings_are_read(tmp_path):
    path = tmp_path / "microstock.toml"
    path.write_text('[gemini]\nquota_project = "studio"\nrequests_per_minute = 2\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"microstock.toml: gemini: .*requests_per_minute of at least 3"):
        load_settings(path)
    path.write_text('[gemini]\nrequests_per_minute = 2\n', encoding="utf-8")
    assert load_settings(path).gemini.requests_per_minute == 2  # the in-process limiter paces any rate


def test_the_limit_is_named_per_google_project_and_model():
    assert limit_name("studio-prod", "gemini-3.5-flash-lite") == "gemini-rpm:studio-prod:gemini-3.5-flash-lite"


def test_without_a_project_or_without_a_server_the_in_process_limiter_stays(monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    # Another test of this worker process may have set a server in Prefect's settings (the test harness).
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert shared_quota_limiter(GeminiSettings(), "gemini-3.5-flash-lite") is None
        assert shared_quota_limiter(GeminiSettings(quota_project="studio"), "gemini-3.5-flash-lite") is None
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        assert shared_quota_limiter(GeminiSettings(), "gemini-3.5-flash-lite") is None  # no project named


def test_the_limit_is_created_once_and_updated_when_the_quota_changes(prefect_harness):
    from prefect import get_client

    name = limit_name("create-once", "gemini-3.5-flash-lite")
    with get_client(sync_client=True) as client:
        ensure_limit(client, name, 600)
        ensure_limit(client, name, 600)
        first = client.read_global_concurrency_limit_by_name(name)
        assert (first.limit, first.slot_decay_per_second) == pytest.approx(limit_and_decay(600))
        ensure_limit(client, name, 120)
        again = client.read_global_concurrency_limit_by_name(name)
        assert again.id == first.id
        assert (again.limit, again.slot_decay_per_second) == pytest.approx(limit_and_decay(120))


def test_the_moment_the_limiter_computes_for_free_slots_is_one_the_server_grants_at(prefect_harness):
    from prefect import get_client

    name = limit_name("asks-when-free", "gemini-3.5-flash-lite")
    with get_client(sync_client=True) as client:
        slots, decay = ensure_limit(client, name, 120)
        client.increment_concurrency_slots(names=[name], slots=slots, mode="rate_limit")  # every slot taken
        for calls in (1, 2):
            limit = client.read_global_concurrency_limit_by_name(name)
            assert SharedQuotaLimiter._free_calls(limit) < calls
            time.sleep(SharedQuotaLimiter._until_free(limit, calls))
            limit = client.read_global_concurrency_limit_by_name(name)
            assert SharedQuotaLimiter._free_calls(limit) >= calls
            # Granted, not refused with 423: the limiter's arithmetic is the server's, on the safe side.
            client.increment_concurrency_slots(names=[name], slots=calls * SLOTS_PER_CALL, mode="rate_limit")


def test_a_429_in_one_process_pauses_every_process_sharing_the_limit(prefect_harness):
    from prefect import get_client

    name = limit_name("pause-shared", "gemini-3.5-flash-lite")
    got_429, other = SharedQuotaLimiter(name, 600, 2), SharedQuotaLimiter(name, 600, 2)
    for limiter in (got_429, other):  # both connected, the limit made
        with limiter.slot():
            pass

    got_429.pause(3.0)
    paused = time.monotonic()
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(name)
    assert limit.active_slots > limit.limit, "the server's limit was not filled past its top"
    with other.slot():
        waited = time.monotonic() - paused
    assert waited >= 2.9, "the other limiter started while the one that met the 429 was pausing"


def test_describe_run_takes_its_starts_from_the_server_when_a_project_is_named(prefect_harness, workdir, fake_gemini,
                                                                                 monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    Image.new("RGB", (64, 48), "teal").save(workdir.assets / "teal.jpg")
    from tasks.core.records import list_assets

    studio = Settings(gemini=GeminiSettings(quota_project="studio", requests_per_day=0))
    shared = DescribeRun.start(RunContext(workdir, studio, given_store=MemoryDeadLetterStore()), quota=IN_PREFECT.quota)
    alone = DescribeRun.start(RunContext(workdir, Settings(gemini=GeminiSettings(requests_per_day=0)),
                                         given_store=MemoryDeadLetterStore()), quota=IN_PREFECT.quota)
    assert isinstance(shared.gate.limiter, SharedQuotaLimiter)
    assert shared.gate.limiter.name == limit_name("studio", shared.describer.model)
    assert type(alone.gate.limiter) is RateLimiter

    meta = shared.gate.describe(list_assets(workdir.assets)[0])
    assert meta.title
    assert len(fake_gemini.requests) == 1


# --- two processes, one quota, a PostgreSQL-backed server (make test-cluster) -------------------------------------


def most_in_window(times: list[float], window: float) -> int:
    """Most arrivals inside one half-open window ``[t, t + window)``."""
    times = sorted(times)
    return max((bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


@pytest.fixture(scope="module")
def postgres_server():
    """`prefect server start` on 127.0.0.1 with its database on a real PostgreSQL, as the cluster runs it."""
    pg_gen = start_postgres()
    pg = next(pg_gen)
    home = Path(tempfile.mkdtemp(prefix="microstock-quota-"))
    saved = dict(os.environ)
    try:
        os.environ.update(pg.prefect_server_env(home / "pgpass"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
        with LocalServer(home / "server", free_port()) as server:
            yield server
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(home, ignore_errors=True)
        pg_gen.close()


@pytest.mark.cluster
def test_two_processes_sharing_one_quota_through_the_server_never_exceed_it_in_any_60_seconds(postgres_server,
                                                                                               tmp_path):
    rpm, seconds = 120, 75
    fake = FakeGemini().start()
    fake.default = lambda req: slow(0.25, answer_json())
    try:
        procs = []
        for n in range(2):
            wd = tmp_path / f"caller-{n}"
            (wd / "assets").mkdir(parents=True)
            for i, colour in enumerate(("red", "green", "blue", "orange")):
                Image.new("RGB", (64, 48), colour).save(wd / "assets" / f"p{n}_{i}.jpg")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "PREFECT_"))}
            env.update(PREFECT_API_URL=postgres_server.api_url, PREFECT_HOME=str(tmp_path / f"home-{n}"),
                       PREFECT_SERVER_ANALYTICS_ENABLED="false", GEMINI_API_KEY=FAKE_KEY,
                       GOOGLE_GEMINI_BASE_URL=fake.url)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.orchestration.quota_caller", str(wd), str(seconds), str(rpm), "4",
                 "shared-test"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=seconds + 240) for p in procs]
    finally:
        fake.stop()
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]

    assert all(r["limiter"] == "SharedQuotaLimiter" for r in results)
    assert {r["name"] for r in results} == {limit_name("shared-test", GeminiSettings().model)}
    assert all(r["described"] > 0 for r in results)  # both processes got starts from the one limit
    arrivals = [req.at for req in fake.requests if ":generateContent" in req.path]
    assert len(arrivals) == sum(r["described"] for r in results)
    assert most_in_window(arrivals, 60.0) <= rpm
