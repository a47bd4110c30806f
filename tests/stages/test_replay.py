"""The replay stage called plainly, with the real SDK and fake Gemini server, where it is its own logic (two
replays at once); through the real flows (dry run, recovered assets reaching the CSVs, outbox and ledger, the
summary): tests/flows/test_replay_flow.py.

The describe stage over coloured photos parks some jobs (503s that outlast
the retries, a safety block); the replays then recover them.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.records import list_assets
from tasks.core.settings import Settings, load_settings
from tasks.core.workdir import Workdir
from tasks.stages.describe import describe_stage
from tasks.stages.replay import replay_jobs
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import FAKE_KEY, FakeGemini, error, finished, slow
from tests.stages.test_describe import COLOURS, Script

FAST_CONFIG = ("[gemini]\nmax_attempts = 2\nretry_delay_s = 0.05\ntimeout_s = 5\nconcurrency = 2\n"
               "requests_per_minute = 6000\n")


@pytest.fixture
def gemini(monkeypatch):
    fake = FakeGemini().start()
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    yield fake
    fake.stop()


def photos(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, colour in zip(names, COLOURS, strict=False):
        Image.new("RGB", (2400, 1800), colour).save(folder / name, quality=85)
    return folder


def new_workdir(tmp_path: Path) -> Workdir:
    wd = Workdir(tmp_path / "work").prepare()
    wd.config_file.write_text(FAST_CONFIG)
    return wd


NAMES = ["calm.jpg", "storm1.jpg", "storm2.jpg", "unsafe.jpg"]
#: Calls each parked asset got in the batch (max_attempts = 2; a block is not retried).
BATCH_ATTEMPTS = {"storm1.jpg": 2, "storm2.jpg": 2, "unsafe.jpg": 1}


def parking_script(gemini: FakeGemini) -> Script:
    """The replies that park three of :data:`NAMES`: storm1/storm2 outlast their retries (503), unsafe is
    blocked; calm is described."""
    script = Script(gemini, NAMES)
    script.set("storm1.jpg", error(503), error(503))
    script.set("storm2.jpg", error(503), error(503))
    script.set("unsafe.jpg", finished("SAFETY"))
    return script


def parked_describe(tmp_path: Path, gemini: FakeGemini):
    """:func:`parking_script`'s batch through the describe stage alone, called plainly (its events kept in its
    context). Returns the workdir and the script."""
    source = photos(tmp_path / "photos", NAMES)
    wd = new_workdir(tmp_path)
    script = parking_script(gemini)
    for name in NAMES:
        (wd.assets / name).write_bytes((source / name).read_bytes())
    ctx = RunContext(wd, load_settings(wd.config_file))
    report = describe_stage(ctx, list_assets(wd.assets))
    assert (len(report.described), len(report.parked)) == (1, 3)
    assert sorted(e.payload["asset"] for e in ctx.events.sent) == ["storm1.jpg", "storm2.jpg", "unsafe.jpg"]
    return wd, script


def test_two_replays_at_once_never_take_the_same_job(gemini, tmp_path):
    wd, script = parked_describe(tmp_path, gemini)
    script.fallback = lambda req: slow(0.7)  # slow answers keep the first replay busy while the second claims
    results: list[dict] = []
    settings = load_settings(wd.config_file)

    def one_replay():
        store, claimant = open_store(wd, Settings()), f"replay-{threading.get_ident()}"
        report = replay_jobs(RunContext(wd, settings, given_store=store), claimant, store.claim(claimant, limit=20))
        results.append({"recovered": report.recovered, "scanned": report.scanned})

    threads = [threading.Thread(target=one_replay) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(results) == 2
    assert sum(r["recovered"] for r in results) == 3
    assert sum(r["scanned"] for r in results) == 3, results
    replayed = {name: script.count(name) - attempts for name, attempts in BATCH_ATTEMPTS.items()}
    assert replayed == {"storm1.jpg": 1, "storm2.jpg": 1, "unsafe.jpg": 1}, "each job was replayed by one replay only"
    assert open_store(wd, Settings()).summary().parked == 0
