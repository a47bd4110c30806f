"""The dead-letter store: one row per job, atomic claims, safe across threads and processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from tasks.core.errors import (
    AuthenticationFailed,
    ContentBlocked,
    InvalidOutput,
    PermanentError,
    RateLimited,
    StoreUnavailable,
    TransientError,
    error_class_of_parked,
)
from tasks.stores import dead_letter
from tasks.stores.dead_letter import DeadLetterStore, Summary
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore, SQLiteDeadLetterStore
from tests.fakes.dead_letter_memory import MemoryDeadLetterStore
from tests.postgres import postgres  # noqa: F401 (the session's PostgreSQL)

SEED_QUERY = (
    "SELECT error_class, COUNT(*) AS n FROM dead_letter "
    "WHERE status = 'parked' GROUP BY error_class ORDER BY n DESC"
)


def park(store, job_id, *, error_class="exhausted:503", attempts=1, message="boom", **kw):
    return store.park(job_id, payload={"asset": f"{job_id}.jpg", "asset_id": job_id}, model="gemini-test",
                      error_class=error_class, error_message=message, attempts=attempts, asset_name=f"{job_id}.jpg",
                      **kw)


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    """The stores' time: a test moves it on by hand (``clock.now += 500``)."""
    return FakeClock(1_000_000)


@pytest.fixture
def sqlite_store(tmp_path) -> SQLiteDeadLetterStore:
    return SQLiteDeadLetterStore(tmp_path / "dead_letter.db", busy_timeout_s=2)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request, tmp_path, clock) -> DeadLetterStore:
    """The contract tests run against every backend (PostgreSQL: a real server, a fresh account per test)."""
    if request.param == "memory":
        return MemoryDeadLetterStore(clock=clock)
    if request.param == "postgres":
        return PostgresDeadLetterStore(request.getfixturevalue("postgres").url("postgres"),
                                       f"acct-{uuid.uuid4().hex[:8]}",
                                       clock=clock)
    return SQLiteDeadLetterStore(tmp_path / "dead_letter.db", busy_timeout_s=2, clock=clock)


def pg_rows(store: PostgresDeadLetterStore, where: str = "TRUE") -> int:
    """Rows of the store's account in the real table, read with SQL of the test's own."""
    from sqlalchemy import create_engine, text

    engine = create_engine(store.url)
    try:
        with engine.connect() as con:
            return con.execute(text(f"SELECT COUNT(*) FROM dead_letter WHERE account = :a AND ({where})"),
                               {"a": store.account}).scalar_one()
    finally:
        engine.dispose()


def test_parking_again_updates_the_one_row(store, clock):
    park(store, "a", error_class="exhausted:503", attempts=4, message="first")
    clock.now += 500
    row = park(store, "a", error_class="permanent:400", attempts=1, message="second")

    assert (row.attempts, row.first_seen, row.last_seen) == (5, 1_000_000, 1_000_500)
    assert (row.error_class, row.error_message, row.status) == ("permanent:400", "second", "parked")
    assert [j.job_id for j in store.list()] == ["a"]
    if isinstance(store, SQLiteDeadLetterStore):
        with sqlite3.connect(store.path) as con:
            assert con.execute("SELECT COUNT(*) FROM dead_letter").fetchone()[0] == 1
    if isinstance(store, PostgresDeadLetterStore):
        assert pg_rows(store) == 1


def test_table_has_the_original_columns_and_wal(sqlite_store):
    store = sqlite_store
    park(store, "a")
    with sqlite3.connect(store.path) as con:
        cols = {r[1] for r in con.execute("PRAGMA table_info(dead_letter)")}
        assert {"job_id", "payload_json", "model", "error_class", "error_message", "attempts",
                "first_seen", "last_seen", "status"} <= cols
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute(SEED_QUERY).fetchall() == [("exhausted:503", 1)]
        last_seen = con.execute("SELECT last_seen FROM dead_letter").fetchone()[0]
        assert isinstance(last_seen, int)


def test_a_table_made_by_the_original_design_gains_the_new_columns(tmp_path):
    path = tmp_path / "dead_letter.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE dead_letter (job_id TEXT PRIMARY KEY, payload_json TEXT, model TEXT, "
                    "error_class TEXT, error_message TEXT, attempts INTEGER, first_seen REAL, last_seen REAL, "
                    "status TEXT)")
        con.execute("INSERT INTO dead_letter VALUES ('old', '{}', 'm', 'permanent:400', 'x', 1, 1.5, 2.5, 'parked')")
    store = SQLiteDeadLetterStore(path)
    assert [j.job_id for j in store.list(status="parked")] == ["old"]
    park(store, "new")
    assert store.summary().by_class == [("exhausted:503", 1), ("permanent:400", 1)]


def test_a_file_written_before_the_account_column_opens_and_keeps_working(tmp_path, clock):
    """A dead_letter.db made by the store before ``account`` existed: its rows, claims and index carry over."""
    path = tmp_path / "dead_letter.db"
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("""
            CREATE TABLE IF NOT EXISTS dead_letter (
                job_id        TEXT PRIMARY KEY,
                payload_json  TEXT NOT NULL,
                model         TEXT NOT NULL,
                error_class   TEXT NOT NULL,
                error_message TEXT NOT NULL,
                attempts      INTEGER NOT NULL,
                first_seen    INTEGER NOT NULL,
                last_seen     INTEGER NOT NULL,
                status        TEXT NOT NULL DEFAULT 'parked'
            )""")
        for name, decl in {"asset_name": "TEXT NOT NULL DEFAULT ''", "task_run_id": "TEXT", "claimed_by": "TEXT",
                           "claimed_at": "INTEGER"}.items():
            con.execute(f"ALTER TABLE dead_letter ADD COLUMN {name} {decl}")
        con.execute("CREATE INDEX IF NOT EXISTS dead_letter_status ON dead_letter (status, last_seen)")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("INSERT INTO dead_letter VALUES ('old', '{\"asset_id\": \"old\"}', 'm', 'exhausted:503', 'x', 3,"
                    " 999000, 999500, 'parked', 'old.jpg', 'run-1', NULL, NULL)")
        con.execute("INSERT INTO dead_letter VALUES ('held', '{}', 'm', 'blocked:SAFETY', 'y', 1,"
                    " 999100, 999600, 'parked', 'held.jpg', NULL, 'r0', 999600)")

    store = SQLiteDeadLetterStore(path, clock=clock)
    old = store.get("old")
    assert (old.payload, old.attempts, old.first_seen, old.asset_name, old.task_run_id) == (
        {"asset_id": "old"}, 3, 999000, "old.jpg", "run-1")
    assert park(store, "old", attempts=2).attempts == 5, "parking again updates the old row"
    park(store, "new")
    assert [j.job_id for j in store.list()] == ["held", "new", "old"]
    assert [j.job_id for j in store.claim("r1", limit=5)] == ["new", "old"], "the old claim still holds"
    assert store.mark_recovered("held", "r0") and store.summary().by_class == [("exhausted:503", 2)]
    with closing(sqlite3.connect(path)) as con:
        assert con.execute("SELECT COUNT(*) FROM dead_letter").fetchone()[0] == 3
        assert con.execute("SELECT DISTINCT account FROM dead_letter").fetchall() == [("",)]
        assert con.execute(SEED_QUERY).fetchall() == [("exhausted:503", 2)]
    assert SQLiteDeadLetterStore(path).get("new").status == "parked", "opening it again changes nothing"


def test_claims_are_exclusive_and_can_be_released(store):
    for j in "abcde":
        park(store, j)
    first = store.claim("r1", limit=3)
    second = store.claim("r2", limit=10)
    assert len(first) == 3 and len(second) == 2
    assert not {j.job_id for j in first} & {j.job_id for j in second}
    assert store.claim("r3", limit=10) == []

    job = first[0]
    assert not store.mark_recovered(job.job_id, "r2"), "only the claimant may settle a job"
    assert store.release(job.job_id, "r1", error_message="asset gone")
    again = store.get(job.job_id)
    assert (again.status, again.claimed_by, again.error_message) == ("parked", None, "asset gone")
    assert [j.job_id for j in store.claim("r3", limit=10)] == [job.job_id]
    assert store.mark_recovered(job.job_id, "r3")
    assert store.get(job.job_id).status == "recovered"
    assert store.summary().parked == 4


def test_claim_filters_by_error_class_prefix_and_takes_stale_claims(store, clock):
    clock.now = 2_000_000
    park(store, "a", error_class="exhausted:503")
    park(store, "b", error_class="blocked:SAFETY")
    park(store, "c", error_class="exhausted_like_but_not")
    assert [j.job_id for j in store.claim("r1", limit=5, error_class="exhausted:")] == ["a"]
    assert store.claim("r2", limit=5, error_class="exhausted:") == []
    clock.now += dead_letter.CLAIM_TIMEOUT_S + 1
    assert [j.job_id for j in store.claim("r2", limit=5, error_class="exhausted:")] == ["a"]


def test_summary_text(store, clock):
    assert store.summary().text() == "dead-letter: clean (0 parked)"
    clock.now = 3_000_000
    park(store, "a", error_class="exhausted:503")
    clock.now += 3600
    park(store, "b", error_class="exhausted:503")
    park(store, "c", error_class="blocked:SAFETY")
    clock.now += 2 * 86400
    summary = store.summary()
    assert summary == Summary(by_class=[("exhausted:503", 2), ("blocked:SAFETY", 1)], oldest_first_seen=3_000_000)
    assert summary.text(now=clock.now).splitlines() == [
        "dead-letter: 3 parked",
        "     2  exhausted:503",
        "     1  blocked:SAFETY",
        "  oldest parked job: 2d 01h old",
    ]


def test_the_api_key_is_never_stored(store, monkeypatch):
    key = "AIzaSy-test-secret-key-0123456789"
    monkeypatch.setenv("GEMINI_API_KEY", key)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    store.park("a", payload={"prompt": f"x {key} y"}, model="m", error_class="unknown:ValueError",
               error_message=f"bad url ?key={key}", attempts=1)
    claimed = store.claim("r", limit=1)
    store.release("a", "r", error_message=f"again {key}")
    job = store.get("a")
    assert key not in job.error_message and key not in str(job.payload)
    assert "***" in job.error_message and claimed
    if isinstance(store, SQLiteDeadLetterStore):
        assert key.encode() not in store.path.read_bytes()
        for extra in store.path.parent.glob("dead_letter.db-*"):
            assert key.encode() not in extra.read_bytes()
    if isinstance(store, PostgresDeadLetterStore):
        assert pg_rows(store, f"payload_json LIKE '%{key}%' OR error_message LIKE '%{key}%'") == 0
        assert pg_rows(store, "payload_json LIKE '%***%'") == 1


def _park_many(path: str, prefix: str, jobs: int, rounds: int) -> None:
    store = SQLiteDeadLetterStore(Path(path), busy_timeout_s=30)
    for r in range(rounds):
        for j in range(jobs):
            park(store, f"job{j}", attempts=1, message=f"{prefix}-{r}")


def _claim_into(path: str, claimant: str, out) -> None:
    store = SQLiteDeadLetterStore(Path(path), busy_timeout_s=30)
    got = []
    while batch := store.claim(claimant, limit=3):
        got += [j.job_id for j in batch]
    out.put(got)


def test_concurrent_parking_from_threads_and_processes(sqlite_store):
    store = sqlite_store
    jobs, rounds = 5, 10
    threads = [threading.Thread(target=_park_many, args=(str(store.path), f"t{i}", jobs, rounds)) for i in range(4)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_park_many, args=(str(store.path), f"p{i}", jobs, rounds)) for i in range(2)]
    for w in threads + procs:
        w.start()
    for w in threads + procs:
        w.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    rows = store.list()
    assert sorted(j.job_id for j in rows) == [f"job{j}" for j in range(jobs)]
    assert all(j.attempts == 6 * rounds for j in rows), [j.attempts for j in rows]


def test_two_processes_claiming_at_once_never_share_a_job(sqlite_store):
    store = sqlite_store
    for j in range(40):
        park(store, f"job{j:02d}")
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_into, args=(str(store.path), f"r{i}", out)) for i in range(2)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert not set(got[0]) & set(got[1])
    assert sorted(got[0] + got[1]) == [f"job{j:02d}" for j in range(40)]


def test_a_locked_store_gives_one_clear_message_naming_the_file(tmp_path):
    path = tmp_path / "dead_letter.db"
    store = SQLiteDeadLetterStore(path, busy_timeout_s=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable) as err:
            park(store, "a")
        assert str(path) in str(err.value) and "locked" in str(err.value)
        assert store.get("a") is None, "reading still works while another process writes (WAL)"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert park(store, "a").attempts == 1


def test_a_file_that_is_not_a_database_is_named(tmp_path):
    path = tmp_path / "dead_letter.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailable, match="dead_letter.db"):
        SQLiteDeadLetterStore(path)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (PermanentError("bad request", code=400), "permanent:400"),
        (PermanentError("no such model"), "permanent"),
        (ContentBlocked("SAFETY"), "blocked:SAFETY"),
        (InvalidOutput("not json"), "invalid_output"),
        (RateLimited("slow down", retry_after=3), "exhausted:429"),
        (TransientError("overloaded", kind="retryable", code=503), "exhausted:503"),
        (TransientError("no answer", kind="timeout"), "exhausted:timeout"),
        (TransientError("reset", kind="network"), "exhausted:network"),
        (AuthenticationFailed("401"), "auth"),
        (KeyError("x"), "unknown:KeyError"),
    ],
)
def test_error_class_of_parked(exc, expected):
    assert error_class_of_parked(exc) == expected
