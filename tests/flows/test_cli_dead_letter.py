"""`microstock dead-letter list|summary` and `microstock replay`, run in-process with typer's runner."""

from __future__ import annotations

import re

import pytest
from PIL import Image
from typer.testing import CliRunner

from flows.cli import app
from tasks.core.files import sha256_file
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fixture)

runner = CliRunner()
LINE = re.compile(r"^([0-9a-f]{64})  (\S+)  attempts=(\d+)  "
                  r"first_seen=(\S+Z)  last_seen=(\S+Z)  (parked|recovered)  (\S+)$")


def microstock(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def parked(tmp_path):
    """A workdir with two real assets whose jobs are parked, and one recovered job."""
    wd = Workdir(tmp_path / "work").prepare()
    wd.config_file.write_text("[gemini]\nmax_attempts = 2\nretry_delay_s = 0.05\nrequests_per_minute = 6000\n")
    store = open_store(wd, Settings())
    jobs = {}
    for name, colour, error_class, attempts in (("sea.jpg", (20, 60, 200), "exhausted:503", 4),
                                                ("fire.jpg", (220, 60, 20), "blocked:SAFETY", 1)):
        path = wd.assets / name
        Image.new("RGB", (2400, 1800), colour).save(path, quality=85)
        jobs[name] = sha256_file(path)
        store.park(jobs[name], payload={"asset": name, "asset_id": jobs[name]}, model="gemini-2.5-flash",
                   error_class=error_class, error_message="x", attempts=attempts, asset_name=name)
    store.park("f" * 64, payload={}, model="m", error_class="exhausted:500", error_message="x", attempts=2,
               asset_name="old.jpg")
    assert store.claim("earlier-replay", limit=1, error_class="exhausted:500")
    store.mark_recovered("f" * 64, "earlier-replay")
    return wd, jobs


def test_list_prints_one_line_per_job(parked):
    wd, jobs = parked
    result = microstock("dead-letter", "list", "--workdir", str(wd.root))
    assert result.exit_code == 0
    rows = [LINE.match(line).groups() for line in result.stdout.splitlines()]
    assert {(r[0], r[1], r[2], r[5], r[6]) for r in rows} == {
        (jobs["sea.jpg"], "exhausted:503", "4", "parked", "sea.jpg"),
        (jobs["fire.jpg"], "blocked:SAFETY", "1", "parked", "fire.jpg"),
        ("f" * 64, "exhausted:500", "2", "recovered", "old.jpg"),
    }
    only = microstock("dead-letter", "list", "--workdir", str(wd.root), "--status", "recovered")
    assert [LINE.match(line).group(7) for line in only.stdout.splitlines()] == ["old.jpg"]
    assert microstock("dead-letter", "list", "--workdir", str(wd.root), "--status", "lost").exit_code != 0


def test_summary_prints_the_report(parked, tmp_path):
    wd, _ = parked
    lines = microstock("dead-letter", "summary", "--workdir", str(wd.root)).stdout.splitlines()
    assert lines[:3] == ["dead-letter: 2 parked", "     1  blocked:SAFETY", "     1  exhausted:503"]
    assert re.fullmatch(r"  oldest parked job: \d+s old", lines[3])
    empty = tmp_path / "nothing-here"
    result = microstock("dead-letter", "summary", "--workdir", str(empty))
    assert result.stdout == "dead-letter: clean (0 parked)\n"
    assert not empty.exists(), "a summary creates nothing"


def test_a_locked_store_is_one_line_naming_the_file(parked, monkeypatch):
    import sqlite3

    from tasks.stores import dead_letter_sql as dead_letter

    wd, _ = parked
    original = dead_letter.SQLiteDeadLetterStore.__init__
    monkeypatch.setattr(dead_letter.SQLiteDeadLetterStore, "__init__",
                        lambda self, path, busy_timeout_s=10.0, **kw: original(self, path, busy_timeout_s=0.2, **kw))
    holder = sqlite3.connect(wd.dead_letter_db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = runner.invoke(app, ["dead-letter", "list", "--workdir", str(wd.root)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 2
    assert "dead_letter.db" in result.stderr and "locked" in result.stderr
    assert "Traceback" not in result.output


def test_replay_is_a_dry_run_unless_applied(prefect_harness, parked, fake_gemini, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "INFO")
    wd, jobs = parked
    dry = microstock("replay", "--workdir", str(wd.root), "--error-class", "exhausted")
    assert dry.exit_code == 0, dry.output
    assert f"[dry-run] would replay {jobs['sea.jpg']} (exhausted:503) sea.jpg, 4 attempt(s) so far" in dry.stdout
    assert "fire.jpg" not in dry.stdout and "dry run: 1 parked job(s) would be replayed" in dry.stdout
    assert fake_gemini.requests == []

    applied = microstock("replay", "--workdir", str(wd.root), "--error-class", "exhausted", "--apply")
    assert applied.exit_code == 0, applied.output
    assert "1 replayed · 1 recovered · 0 still failing" in applied.stdout
    assert len(fake_gemini.requests) == 1
    assert open_store(wd, Settings()).get(jobs["sea.jpg"]).status == "recovered"
    assert (wd.outbox("adobe") / "sea.jpg").exists() and "sea.jpg" in (wd.csv / "adobe.csv").read_text()
    assert FAKE_KEY not in applied.output
