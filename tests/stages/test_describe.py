"""The describe stage with the real google-genai SDK talking to the fake Gemini server, its logic called plainly
(:func:`describe_stage`: no flow run, no Prefect harness). What only Prefect shows (the task runs, the hook that
parks, the Parked state, the backstop, the flow staying Completed) is tests/orchestration/test_describe_runs.py.

Each asset is a plain-coloured image; the fake server recognises the asset
by the colour of the image the SDK sent, so every asset gets its own script
of replies however the jobs interleave.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.gemini.ratelimit import RateLimiter
from tasks.stages import run_context
from tasks.stages.describe import DescribeWith, describe_stage
from tasks.stages.offline_describer import OfflineDescriber
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tasks.stores.dead_letter_sql import SQLiteDeadLetterStore
from tests.fakes.gemini import (  # noqa: F401  (fake_gemini is a fixture)
    FAKE_KEY,
    answer_json,
    daily_quota,
    drop,
    error,
    fake_gemini,
    finished,
    garbage,
    gemini_for_module,
    key_invalid,
    prompt_blocked,
    rate_limited,
    slow,
    truncated,
)
from tests.fakes.overlap import lines_of, second_run_meets_the_first
from tests.gemini.test_ratelimit import FakeClock

COLOURS = [
    (220, 30, 30), (30, 200, 30), (30, 30, 220), (230, 230, 40), (40, 220, 220), (220, 40, 220),
    (250, 250, 250), (10, 10, 10), (128, 128, 128), (250, 140, 0), (120, 0, 160), (0, 120, 120),
]


def fast_settings(**gemini) -> Settings:
    base = dict(max_attempts=3, retry_delay_s=0.05, timeout_s=1.5, concurrency=4, requests_per_minute=6000,
                requests_per_day=0)
    return Settings(gemini=GeminiSettings(**(base | gemini)))


def make_assets(wd: Workdir, names: list[str]) -> list[Asset]:
    """Plain-coloured 2400×1800 JPEGs (big enough for every agency), one colour per asset."""
    assets = []
    for name, colour in zip(names, COLOURS, strict=False):
        path = wd.assets / name
        Image.new("RGB", (2400, 1800), colour).save(path, quality=85)
        assets.append(Asset(name=name, asset_id=sha256_file(path), path=path))
    assert len(assets) == len(names), "add colours"
    return assets


class Script:
    """Per-asset replies for the fake server, chosen by the colour of the image sent; records each call, at the
    request's arrival (``time.monotonic``) or, when given, at ``clock()`` as the server takes it."""

    def __init__(self, fake, names: list[str], clock: Callable[[], float] | None = None) -> None:
        self.names = list(names)
        self.replies: dict[str, deque] = {name: deque() for name in names}
        self.calls: dict[str, list[float]] = defaultdict(list)
        #: The reply once an asset's own replies are used up.
        self.fallback = lambda req: answer_json()
        self._clock = clock
        self._lock = threading.Lock()
        fake.default = self

    def set(self, name: str, *replies) -> None:
        self.replies[name].extend(replies)

    def asset_of(self, req) -> str:
        _, data = req.inline_images()[0]
        with Image.open(BytesIO(data)) as im:
            pixel = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
        nearest = min(range(len(self.names)),
                      key=lambda i: sum((a - b) ** 2 for a, b in zip(COLOURS[i], pixel, strict=True)))
        return self.names[nearest]

    def __call__(self, req):
        name = self.asset_of(req)
        with self._lock:
            self.calls[name].append(self._clock() if self._clock else req.at)
            item = self.replies[name].popleft() if self.replies[name] else self.fallback
        return item(req) if callable(item) else item

    def count(self, name: str) -> int:
        return len(self.calls[name])


@contextmanager
def stage_lines():
    """The lines the stage's module loggers (the ``tasks`` tree) write meanwhile, formatted."""
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("tasks")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def workdir_bytes(wd: Workdir) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in wd.root.rglob("*") if p.is_file()]


@pytest.fixture
def gemini_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    return FAKE_KEY


NAMES = ["ok.jpg", "flaky.jpg", "down.jpg", "dropped.jpg", "bad.jpg", "unsafe.jpg", "refused.jpg",
         "garbage.jpg", "cut.jpg", "sleepy.jpg"]

#: What each asset of the mixed run parks as, after how many attempts (the other four are described).
EXPECTED_PARKED = {
    "down.jpg": ("exhausted:503", 3),
    "dropped.jpg": ("exhausted:network", 3),
    "bad.jpg": ("permanent:400", 1),
    "unsafe.jpg": ("blocked:SAFETY", 1),
    "refused.jpg": ("blocked:PROHIBITED_CONTENT", 1),
    "garbage.jpg": ("invalid_output", 3),
}


def mixed_script(fake) -> Script:
    """The replies of the mixed run: each of :data:`NAMES` meets a different failure, or none."""
    script = Script(fake, NAMES)
    script.set("flaky.jpg", error(503))
    script.set("down.jpg", error(503), error(500), error(503))
    script.set("dropped.jpg", drop(), drop(), drop())
    script.set("bad.jpg", error(400, "Request contains an invalid argument."))
    script.set("unsafe.jpg", finished("SAFETY"))
    script.set("refused.jpg", prompt_blocked("PROHIBITED_CONTENT"))
    script.set("garbage.jpg", garbage(), truncated(), garbage())
    script.set("cut.jpg", truncated())
    script.set("sleepy.jpg", slow(3))
    return script


def assert_parked_as_expected(wd: Workdir, script: Script, report) -> None:
    """The mixed run's report, calls and dead-letter rows: each failure class with its attempts and error class."""
    assert sorted(report.described) == ["cut.jpg", "flaky.jpg", "ok.jpg", "sleepy.jpg"]
    assert report.parked == {name: cls for name, (cls, _) in EXPECTED_PARKED.items()}
    assert report.pending == [] and report.stopped is None
    expected_calls = {"ok.jpg": 1, "flaky.jpg": 2, "cut.jpg": 2, "sleepy.jpg": 2}
    expected_calls |= {name: attempts for name, (_, attempts) in EXPECTED_PARKED.items()}
    assert {n: script.count(n) for n in NAMES} == expected_calls

    store = open_store(wd, Settings())
    rows = {job.asset_name: job for job in store.list()}
    assert {n: (j.error_class, j.attempts, j.status) for n, j in rows.items()} == {
        n: (cls, attempts, "parked") for n, (cls, attempts) in EXPECTED_PARKED.items()
    }
    down = rows["down.jpg"]
    assert down.job_id == down.payload["asset_id"] == sha256_file(wd.assets / "down.jpg")
    assert down.payload["asset"] == "down.jpg" and down.model == "gemini-3.5-flash-lite"
    assert "stock" in down.payload["prompt"].lower()
    assert "503" in down.error_message


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """One run over assets that each meet a different failure, and a second run after it; shared by the tests
    below."""
    with gemini_for_module() as (fake, _):
        wd = Workdir(tmp_path_factory.mktemp("mixed")).prepare()
        assets = make_assets(wd, NAMES)
        script = mixed_script(fake)
        with stage_lines() as lines:
            report = describe_stage(RunContext(wd, fast_settings()), assets)
        calls_after_first = len(fake.requests)
        with stage_lines() as again_lines:
            again = describe_stage(RunContext(wd, fast_settings()), assets)
        yield wd, script, report, again, fake, "\n".join(lines), "\n".join(again_lines), calls_after_first


def test_each_failure_class_gets_its_attempts_and_error_class(mixed_run):
    wd, script, report, *_ = mixed_run
    assert_parked_as_expected(wd, script, report)


def test_nothing_is_lost(mixed_run):
    wd, _, report, *_ = mixed_run
    accounted = set(report.described) | set(report.parked) | set(report.pending)
    assert accounted == set(NAMES)
    for name in NAMES:
        assert wd.sidecar(name).exists() == (name in report.described)
    assert report.tokens == 4 * 321


def assert_rerun_calls_nothing(wd: Workdir, report, again, fake, calls_after_first: int) -> None:
    """A second run after the mixed run (``again``) made no call and found every asset described or parked."""
    assert len(fake.requests) == calls_after_first
    assert sorted(again.already) == sorted(report.described)
    assert sorted(again.still_parked) == sorted(report.parked)
    assert again.described == [] and again.parked == {} and again.pending == []
    with sqlite3.connect(wd.dead_letter_db) as con:
        assert con.execute("SELECT COUNT(*), SUM(attempts) FROM dead_letter").fetchone() == (
            len(EXPECTED_PARKED), sum(attempts for _, attempts in EXPECTED_PARKED.values()))


def test_a_rerun_calls_nothing_already_described_or_parked(mixed_run):
    wd, _, report, again, fake, _, _, calls_after_first = mixed_run
    assert_rerun_calls_nothing(wd, report, again, fake, calls_after_first)


def test_the_api_key_appears_nowhere(mixed_run):
    wd, _, _, _, fake, lines, again_lines, _ = mixed_run
    assert "describe down.jpg: attempt 1 of 3 failed (" in lines, "the run's lines were read"
    assert_key_nowhere(wd, fake, lines + "\n" + again_lines, again_lines)


def assert_key_nowhere(wd, fake, logs: str, again_lines: str) -> None:
    """The key went to Gemini in its header on every request, and is in no file of the workdir and in no line of
    ``logs`` (the run's and the rerun's: ``again_lines``, read as the check that they were)."""
    assert all(req.header("x-goog-api-key") == FAKE_KEY for req in fake.requests)
    for path, data in workdir_bytes(wd):
        assert FAKE_KEY.encode() not in data, path
    assert "parked by an earlier run" in again_lines, "the rerun's lines were read"
    assert FAKE_KEY not in logs


def on_clock(clock: FakeClock) -> DescribeWith:
    """The stage with its Gemini calls under one rate limiter on ``clock`` (handed in as ``quota``, as the Prefect
    side hands in the server's): every wait it takes is ``clock.sleep``, recorded and instant."""
    return DescribeWith(quota=lambda gemini, model: RateLimiter(gemini.requests_per_minute, gemini.concurrency,
                                                                clock))


def waits_over(clock: FakeClock, seconds: float) -> list[float]:
    """The waits ``clock`` was asked for that are longer than ``seconds`` (not the limiter's spacing of starts)."""
    return [s for s in clock.slept if s > seconds]


def test_retry_info_delay_is_honoured(fake_gemini, gemini_key, tmp_path):
    """A 429 saying RetryInfo 1.5 s: the limiter waits exactly that (not its 60 s default) before calling again,
    and a call already in flight then is not made twice. The waits are the limiter's clock's, asked for, not
    measured."""
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["told.jpg", "other.jpg"])
    clock = FakeClock()
    script = Script(fake_gemini, [a.name for a in assets], clock=clock.now)
    other_in_flight, told_refused = threading.Event(), threading.Event()

    def refused_while_other_is_in_flight(req):
        other_in_flight.wait(30)
        told_refused.set()
        return rate_limited("1.5s")

    def answered_after_told_was_refused(req):
        other_in_flight.set()
        told_refused.wait(30)
        return answer_json()

    script.set("told.jpg", refused_while_other_is_in_flight)
    script.set("other.jpg", answered_after_told_was_refused)
    report = describe_stage(RunContext(wd, fast_settings(concurrency=2)), assets, on_clock(clock))
    assert sorted(report.described) == ["other.jpg", "told.jpg"]
    assert waits_over(clock, 0.1) == [pytest.approx(1.5)]
    told = script.calls["told.jpg"]
    assert len(told) == 2 and told[1] >= told[0] + 1.5, "the second call came after the wait, on that clock"
    assert script.count("other.jpg") == 1


def test_without_retry_info_the_wait_is_the_one_the_message_names(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["untold.jpg"])
    clock = FakeClock()
    script = Script(fake_gemini, [a.name for a in assets], clock=clock.now)
    script.set("untold.jpg", rate_limited(None, retry_in="0.8117s"))
    report = describe_stage(RunContext(wd, fast_settings()), assets, on_clock(clock))
    assert waits_over(clock, 0.1) == [pytest.approx(0.8117)]
    untold = script.calls["untold.jpg"]
    assert report.described == ["untold.jpg"] and len(untold) == 2 and untold[1] >= untold[0] + 0.8117


def test_a_429_storm_parks_nothing_and_uses_no_attempt(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = ["busy.jpg", "also_busy.jpg"]
    assets = make_assets(wd, names)
    script = Script(fake_gemini, names)
    script.set("busy.jpg", rate_limited("0.1s"), rate_limited(None, retry_in="0.1s"), rate_limited("0.1s"))
    script.set("also_busy.jpg", rate_limited(None, retry_in="0.1s"), rate_limited("0.1s"))
    report = describe_stage(RunContext(wd, fast_settings(max_attempts=1, concurrency=2)), assets)
    assert sorted(report.described) == sorted(names) and report.parked == {} and report.stopped is None
    assert {n: script.count(n) for n in names} == {"busy.jpg": 4, "also_busy.jpg": 3}
    assert open_store(wd, Settings()).list() == []


def test_429s_past_the_runs_wait_limit_stop_the_stage_and_park_nothing(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = [f"r{i}.jpg" for i in range(4)]
    assets = make_assets(wd, names)
    fake_gemini.default = lambda req: rate_limited("0.2s")
    with stage_lines() as lines:
        report = describe_stage(RunContext(wd, fast_settings(concurrency=1, rate_limit_wait_s=0.5)), assets)
    assert len(fake_gemini.requests) == 3, "waits of 0.2 + 0.2 fit in 0.5 s, the third 429 does not"
    assert report.parked == {} and sorted(report.pending) == names
    assert "gemini.rate_limit_wait_s" in report.stopped
    assert open_store(wd, Settings()).list() == []
    assert "\n".join(lines).count("describe stopped:") == 1


def test_daily_quota_stops_the_stage_after_the_first_call(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = [f"q{i}.jpg" for i in range(6)]
    assets = make_assets(wd, names)
    script = Script(fake_gemini, [a.name for a in assets])
    for name in names:
        script.set(name, daily_quota())
    with stage_lines() as lines:
        report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets)
    assert len(fake_gemini.requests) == 1
    assert "daily quota" in report.stopped
    assert report.parked == {} and report.described == [] and sorted(report.pending) == names
    assert open_store(wd, Settings()).list() == []
    assert not any(wd.sidecar(n).exists() for n in names)
    assert "\n".join(lines).count("describe stopped:") == 1

    for name in names:  # the quota resets: the next run describes everything, once
        script.replies[name].clear()
    after = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets)
    assert sorted(after.described) == names and after.stopped is None
    first = script.asset_of(fake_gemini.requests[0])
    assert {n: script.count(n) for n in names} == {n: 2 if n == first else 1 for n in names}


@pytest.mark.parametrize("refusal", [error(401, "unauthenticated"), error(403, "permission denied"), key_invalid()],
                         ids=["401", "403", "API_KEY_INVALID"])
def test_a_refused_key_stops_the_stage_without_parking(fake_gemini, gemini_key, tmp_path, refusal):
    wd = Workdir(tmp_path / "w").prepare()
    names = [f"k{i}.jpg" for i in range(8)]
    assets = make_assets(wd, names)
    fake_gemini.default = lambda req: refusal
    report = describe_stage(RunContext(wd, fast_settings(concurrency=3)), assets)
    assert 1 <= len(fake_gemini.requests) <= 3, "at most the calls already in flight"
    assert "GEMINI_API_KEY" in report.stopped
    assert report.parked == {} and sorted(report.pending) == names
    assert open_store(wd, Settings()).list() == []


@contextmanager
def store_locked_while_doomed_fails(fake_gemini, tmp_path, monkeypatch):
    """Three assets; while ``doomed.jpg`` is described another process locks the dead-letter store, then Gemini
    refuses the job (400): yields (workdir, assets); the lock is let go after."""
    monkeypatch.setattr(run_context, "open_store",
                        lambda wd, settings, clock: SQLiteDeadLetterStore(wd.dead_letter_db, busy_timeout_s=0.3))
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["fine.jpg", "doomed.jpg", "also_fine.jpg"])
    SQLiteDeadLetterStore(wd.dead_letter_db)  # the store exists; another process is about to lock it
    holder = sqlite3.connect(wd.dead_letter_db, isolation_level=None, check_same_thread=False)

    def lock_then_refuse(req):
        holder.execute("BEGIN IMMEDIATE")
        return error(400, "bad request")

    Script(fake_gemini, [a.name for a in assets]).set("doomed.jpg", lock_then_refuse)
    try:
        yield wd, assets
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def assert_left_pending_then_described(wd, assets, report) -> None:
    """The locked store's job stayed pending, nothing parked; the next run (lock gone) describes it."""
    assert sorted(report.described) == ["also_fine.jpg", "fine.jpg"]
    assert report.pending == ["doomed.jpg"] and report.parked == {}
    assert open_store(wd, Settings()).list() == []
    again = describe_stage(RunContext(wd, fast_settings()), assets)
    assert again.described == ["doomed.jpg"] and sorted(again.already) == ["also_fine.jpg", "fine.jpg"]


def test_a_locked_store_leaves_the_job_pending_and_the_others_go_on(fake_gemini, gemini_key, tmp_path, monkeypatch):
    with store_locked_while_doomed_fails(fake_gemini, tmp_path, monkeypatch) as (wd, assets), stage_lines() as lines:
        report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets)
    assert "dead_letter.db" in "\n".join(lines)
    assert_left_pending_then_described(wd, assets, report)


def test_a_bug_in_the_describer_is_parked_once_with_its_traceback_and_the_others_go_on(tmp_path):
    class Buggy(OfflineDescriber):
        def describe(self, asset):
            if asset.name == "buggy.jpg":
                raise RuntimeError("a bug in a describer")
            return super().describe(asset)

    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["fine.jpg", "buggy.jpg"])
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("tasks").addHandler(handler)
    try:
        report = describe_stage(RunContext(wd, fast_settings(max_attempts=3)), assets, DescribeWith(describer=Buggy()))
    finally:
        logging.getLogger("tasks").removeHandler(handler)
    assert report.parked == {"buggy.jpg": "unknown:RuntimeError"} and report.described == ["fine.jpg"]
    assert [(j.asset_name, j.error_class, j.attempts) for j in open_store(wd, Settings()).list()] == [
        ("buggy.jpg", "unknown:RuntimeError", 1)], "a bug is not tried again, and parked once"
    (parked,) = [r for r in records if "parked" in r.getMessage()]
    assert parked.getMessage() == "parked buggy.jpg as unknown:RuntimeError after 1 attempt(s)"
    assert str(parked.exc_info[1]) == "a bug in a describer", "the traceback goes with the line"


def test_two_runs_describing_one_workdir_at_once_pay_for_each_asset_once(tmp_path):
    """Two runs on one workdir reach describe together (threads here: the lock is a per-file ``flock``, which two
    threads' opens contend for as two processes' do). The first holds its first describe call until the second
    has found the lock held and said it waits; the second then finds the first one's sidecars, so no asset's
    describe call is made twice."""
    calls: list[str] = []
    calls_lock = threading.Lock()
    first_is_describing, second_waits = threading.Event(), threading.Event()

    class Counting(OfflineDescriber):
        def describe(self, asset):
            with calls_lock:
                calls.append(asset.name)
                first_call = len(calls) == 1
            if first_call:  # the first run is describing: the second arrives now
                first_is_describing.set()
                second_waits.wait(30)
            return super().describe(asset)

    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["a.jpg", "b.jpg", "c.jpg"])
    reports = {}

    def one_run(which: str) -> None:
        try:
            reports[which] = describe_stage(RunContext(wd, fast_settings()), assets,
                                            DescribeWith(describer=Counting()))
        finally:
            second_waits.set()  # a run that never waited (no lock) must not leave the first one hanging

    with lines_of("tasks.stages.describe", "another run is describing", second_waits) as waiting:
        first_started = second_run_meets_the_first(one_run, first_is_describing, second_waits)
    assert first_started, "the first run reached its first describe call"
    assert waiting, "the second run found the lock held and said it waits"
    assert sorted(calls) == ["a.jpg", "b.jpg", "c.jpg"]
    assert (sorted(reports["first"].described), reports["first"].already) == (["a.jpg", "b.jpg", "c.jpg"], [])
    assert (reports["second"].described, sorted(reports["second"].already)) == ([], ["a.jpg", "b.jpg", "c.jpg"])


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once closed


def test_gemini_unreachable_for_every_job_stops_the_stage_and_parks_nothing(gemini_key, tmp_path, monkeypatch):
    """Regression (issue 35): Gemini at a closed port parked every job and the night read Completed. The service
    never answered: the jobs stay pending for the next run (nothing was paid), the stage says why, and the run's
    summary reads Incomplete with that reason."""
    from flows.run_outcome import exit_code, state_name
    from tasks.core.reports import CsvReport, Gathered, PackReport
    from tasks.observe.summary import BatchSummary

    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    wd = Workdir(tmp_path / "w").prepare()
    names = ["fox.jpg", "hill.jpg", "lake.jpg"]
    assets = make_assets(wd, names)
    report = describe_stage(RunContext(wd, fast_settings(concurrency=2)), assets)
    assert report.parked == {} and report.described == [] and sorted(report.pending) == names
    assert "unreachable" in report.stopped and "connection to Gemini failed" in report.stopped, report.stopped
    assert open_store(wd, Settings()).list() == [], "nothing parked: a re-run finishes them"
    summary = BatchSummary.from_stages(wd, Gathered(assets), report, CsvReport(), PackReport(), {})
    assert (state_name(summary), exit_code(summary)) == ("Incomplete", 3), "`microstock run` exits 3 on it"
    assert summary.headline().startswith("0 described · 0 parked · 3 pending · 0 uploaded · stopped: gemini:")
    assert "unreachable" in summary.headline()


def test_once_gemini_answered_a_job_that_cannot_reach_it_parks_as_its_own(fake_gemini,
                                                                           gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, ["first.jpg", "cut_off.jpg"])
    script = Script(fake_gemini, [a.name for a in assets])
    script.set("cut_off.jpg", drop(), drop(), drop())
    report = describe_stage(RunContext(wd, fast_settings(concurrency=1)), assets)
    assert report.described == ["first.jpg"] and report.parked == {"cut_off.jpg": "exhausted:network"}
    assert report.stopped is None and report.pending == []
