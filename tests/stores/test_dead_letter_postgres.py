"""The PostgreSQL dead-letter store beyond the shared contract: accounts, processes, passwords, choosing it.

Against a real PostgreSQL (tests/postgres.py); the contract itself runs in test_dead_letter.py.
"""

from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest

from harness.postgres import HOST
from tasks.core.errors import ConfigError, StoreUnavailable
from tasks.core.settings import load_settings
from tasks.stores.dead_letter import Summary
from tasks.stores.dead_letter_open import ACCOUNT_ENV
from tasks.stores.dead_letter_sql import DeadLetterDatabase, PostgresDeadLetterStore
from tests.postgres import postgres  # noqa: F401 (the session's PostgreSQL)


def park(store, job_id, error_class="exhausted:503"):
    return store.park(job_id, payload={"asset_id": job_id}, model="m", error_class=error_class,
                      error_message="boom", attempts=1, asset_name=f"{job_id}.jpg")


@pytest.fixture
def database(postgres):
    """A fresh database per test, so summaries over every account see only this test's."""
    name = f"dl_{uuid.uuid4().hex[:10]}"
    postgres.create_database(name)
    return postgres.url(name)


def test_each_account_sees_its_own_jobs_and_the_summary_covers_all(database):
    alice, bob = PostgresDeadLetterStore(database, "alice"), PostgresDeadLetterStore(database, "bob")
    park(alice, "same-image")
    park(bob, "same-image", error_class="blocked:SAFETY")
    park(bob, "other")

    assert [j.job_id for j in alice.list()] == ["same-image"]
    assert alice.get("other") is None
    # (Which comes first depends on whether a second ticked between the parks: the contract tests check the order.)
    assert sorted(j.job_id for j in bob.claim("r", limit=10)) == ["other", "same-image"]
    assert alice.claim("r2", limit=10)[0].job_id == "same-image", "bob's claim does not hold alice's job"
    assert alice.summary().by_class == [("exhausted:503", 1)]
    everyone = DeadLetterDatabase.postgres(database).summaries()
    assert set(everyone) == {"alice", "bob"}
    assert everyone["bob"].by_class == [("blocked:SAFETY", 1), ("exhausted:503", 1)]
    assert everyone["alice"] == alice.summary()
    assert bob.mark_recovered("other", "r") and bob.mark_recovered("same-image", "r")
    assert set(DeadLetterDatabase.postgres(database).summaries()) == {"alice"}, ("an account with nothing parked "
                                                                                 "drops out")
    assert bob.summary() == Summary()


def _claim_into(url: str, claimant: str, out) -> None:
    store = PostgresDeadLetterStore(url, "shared")
    got = []
    while batch := store.claim(claimant, limit=3):
        got += [j.job_id for j in batch]
    out.put(got)


def test_processes_claiming_at_once_never_share_a_job(database):
    store = PostgresDeadLetterStore(database, "shared")
    for j in range(60):
        park(store, f"job{j:02d}")
    url = database.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_into, args=(url, f"r{i}", out)) for i in range(3)]
    for p in procs:
        p.start()
    got = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    claimed = [job for part in got for job in part]
    assert sorted(claimed) == [f"job{j:02d}" for j in range(60)], "every job claimed exactly once"


def test_a_refused_login_names_the_store_and_never_shows_a_password(postgres):
    wrong = postgres.url("postgres").set(password="not-the-password-4711")
    with pytest.raises(StoreUnavailable) as err:
        PostgresDeadLetterStore(wrong, "alice")
    message = str(err.value)
    assert f"{HOST}:{postgres.port}" in message and "account alice" in message
    assert "password authentication failed" in message
    assert "not-the-password-4711" not in message and postgres.password not in message


def test_nothing_listening_is_unavailable_not_a_crash(postgres):
    from tasks.orchestration.local_server import free_port

    with pytest.raises(StoreUnavailable, match="cannot use the dead-letter store"):
        PostgresDeadLetterStore(postgres.url("postgres").set(port=free_port()), "alice", connect_timeout_s=2)


def test_only_psycopg_urls_and_named_accounts(postgres):
    with pytest.raises(ConfigError, match="not supported"):
        PostgresDeadLetterStore("postgresql+asyncpg://u@127.0.0.1/db", "alice")
    with pytest.raises(ConfigError, match="account"):
        PostgresDeadLetterStore(postgres.url("postgres"), "")


def test_a_password_in_the_config_file_is_refused_without_echoing_it(tmp_path):
    config = tmp_path / "microstock.toml"
    config.write_text('dead_letter_url = "postgresql+psycopg://u:hunter2-secret@127.0.0.1:5432/db"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert "dead_letter_url" in err.value.message and "pgpass" in err.value.message
    assert "hunter2-secret" not in err.value.message
    assert os.environ.get(ACCOUNT_ENV) is None
