"""The rate limiter: never over the quota in any 60 s window, at the quota line under load, one pause for all.

Rate properties run on a fake clock (deterministic, instant); the thread tests
use the real clock with millisecond intervals and assert order and counts,
never durations.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.gemini.ratelimit import WINDOW_S, RateLimiter, shared_limiter


class FakeClock:
    """A clock that only moves when someone sleeps (or the test advances it)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += max(seconds, 1e-9)  # a real sleep always lets time pass

    def advance(self, seconds: float) -> None:
        self.t += seconds


def most_in_any_window(starts: list[float], window: float = WINDOW_S) -> int:
    """The largest number of starts inside one half-open window ``[t, t + window)``."""
    return max((bisect_left(starts, s + window) - i for i, s in enumerate(starts)), default=0)


# --- the rate, on a fake clock ----------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.floats(0, 30)),            # idle this long, then call
        st.tuples(st.just("pause"), st.floats(0, 90)),           # a 429 asking to wait this long
    ),
    min_size=1, max_size=250,
)


@settings(max_examples=150, deadline=None)
@given(per_minute=st.integers(1, 40), script=ops)
def test_no_60_second_window_ever_holds_more_than_the_quota(per_minute, script):
    clock = FakeClock()
    limiter = RateLimiter(per_minute, concurrency=4, clock=clock)
    starts: list[float] = []
    paused_until = float("-inf")
    for op, value in script:
        if op == "pause":
            paused_until = max(paused_until, clock.now() + value)
            limiter.pause(value)
            continue
        clock.advance(value)
        with limiter.slot() as started:
            assert started == clock.now()
            assert started >= paused_until, "a call started inside a pause"
            starts.append(started)
    assert starts == sorted(starts)
    assert most_in_any_window(starts) <= per_minute
    gaps = [b - a for a, b in pairwise(starts)]
    assert all(g >= limiter.interval - 1e-9 for g in gaps), "two starts closer than 60/per_minute"


def test_back_to_back_calls_run_exactly_at_the_quota_line():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=4, clock=clock)
    starts = []
    for _ in range(1200):
        with limiter.slot() as started:
            starts.append(started)
    assert starts[0] == 1000.0  # the first call does not wait
    assert most_in_any_window(starts) == 600  # the quota is used to the line and never passed
    assert starts[-1] - starts[0] == pytest.approx(1199 * 0.1)
    assert min(b - a for a, b in pairwise(starts)) == pytest.approx(0.1)


def test_an_idle_spell_saves_up_no_burst():
    clock = FakeClock()
    limiter = RateLimiter(60, concurrency=4, clock=clock)
    with limiter.slot():
        pass
    clock.advance(600)  # ten idle minutes
    starts = []
    for _ in range(3):
        with limiter.slot() as started:
            starts.append(started)
    assert [round(b - a, 9) for a, b in pairwise(starts)] == [1.0, 1.0]


def test_a_pause_holds_the_next_caller_whoever_was_refused():
    clock = FakeClock()
    limiter = RateLimiter(60, concurrency=4, clock=clock)
    with limiter.slot() as first:  # caller A
        clock.advance(0.5)
        limiter.pause(13)  # A got a 429 with RetryInfo 13s
    with limiter.slot() as b_start:  # caller B, never refused itself
        pass
    with limiter.slot() as c_start:
        pass
    assert first == 1000.0
    assert b_start == pytest.approx(1013.5)
    assert c_start == pytest.approx(1014.5), "after a pause, calls resume at the rate, not in a burst"
    limiter.pause(2)  # a shorter pause never shortens a longer one already set
    limiter.pause(0)
    with limiter.slot() as d_start:
        pass
    assert d_start == pytest.approx(c_start + 2)


def test_settings_out_of_range_are_refused():
    with pytest.raises(ValueError):
        RateLimiter(0, 1)
    with pytest.raises(ValueError):
        RateLimiter(60, 0)


# --- threads, real clock -----------------------------------------------------------------------------


def test_concurrency_bound_is_honoured_and_reached():
    limiter = RateLimiter(60_000, concurrency=3)  # 1 ms apart: the bound is what limits here
    active, most = 0, 0
    lock = threading.Lock()

    def call():
        nonlocal active, most
        with limiter.slot():
            with lock:
                active += 1
                most = max(most, active)
            time.sleep(0.03)
            with lock:
                active -= 1

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert active == 0
    assert most == 3


def test_a_place_is_given_back_when_the_call_fails():
    limiter = RateLimiter(60_000, concurrency=1)
    with pytest.raises(RuntimeError):
        with limiter.slot():
            raise RuntimeError("the call failed")
    done = threading.Event()
    t = threading.Thread(target=lambda: (limiter.slot().__enter__(), done.set()))
    t.start()
    assert done.wait(2), "the place of a failed call was not given back"


def test_a_429_pauses_every_thread_not_just_the_refused_one():
    limiter = RateLimiter(6_000, concurrency=4)  # 10 ms apart
    starts: list[tuple[str, float]] = []
    lock = threading.Lock()
    paused = threading.Event()
    window: list[float] = []

    def worker(name: str, calls: int):
        for i in range(calls):
            if name != "refused" and i == 2:
                paused.wait(5)  # the others still have calls to make once the 429 has come (no race to finish first)
            with limiter.slot() as started:
                with lock:
                    starts.append((name, started))
                if name == "refused" and i == 2:  # this call "got a 429 asking for 0.3 s"
                    asked = time.monotonic()
                    limiter.pause(0.3)
                    window.extend([time.monotonic(), asked + 0.3])
                    paused.set()
                time.sleep(0.005)

    threads = [threading.Thread(target=worker, args=("refused", 6))]
    threads += [threading.Thread(target=worker, args=(f"other-{k}", 6)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert paused.is_set() and len(starts) == 24
    pause_set, pause_ends = window
    inside = [(n, s) for n, s in starts if pause_set <= s < pause_ends]
    assert inside == [], f"calls started during the pause: {inside}"
    after = {n for n, s in starts if s >= pause_ends}
    assert after >= {"other-0", "other-1", "other-2"}, "the others did not carry on after the pause"


def test_one_limiter_per_model_and_settings_in_the_process():
    a = shared_limiter("test-model-x", 123, 2)
    assert shared_limiter("test-model-x", 123, 2) is a
    assert shared_limiter("test-model-y", 123, 2) is not a
    assert (a.per_minute, a.concurrency) == (123, 2)


# --- calls: a 429 is waited out and called again, within the run's allowance ------------------------

from tasks.core.errors import RateLimited, StageStopped  # noqa: E402
from tasks.core.retry import RATE_WINDOW_S  # noqa: E402
from tasks.gemini.ratelimit import WaitAllowance  # noqa: E402


def answers(*items):
    """A call that raises or returns ``items`` in turn, recording the clock at each start."""
    queue = list(items)

    def call():
        item = queue.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    return call


def test_a_429_without_a_said_delay_waits_a_full_minute_window_then_calls_again():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=1, clock=clock)
    starts = []
    call = answers(RateLimited("429", retry_after=None), RateLimited("429", retry_after=7.5), "ok")
    waits = WaitAllowance(1000)
    assert limiter.call(lambda: (starts.append(clock.now()), call())[1], waits) == "ok"
    assert RATE_WINDOW_S == 60.0
    assert starts[1] - starts[0] == pytest.approx(60.0) and starts[2] - starts[1] == pytest.approx(7.5)
    assert waits.spent_s == pytest.approx(67.5)


def test_the_allowance_is_shared_and_stops_the_call_that_would_pass_it():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=1, clock=clock)
    waits = WaitAllowance(100)
    limiter.call(answers(RateLimited("429", retry_after=None), "ok"), waits)
    with pytest.raises(StageStopped) as info:
        limiter.call(answers(RateLimited("429", retry_after=30), RateLimited("429", retry_after=30), "never"), waits)
    assert info.value.error_class == "quota:wait" and "gemini.rate_limit_wait_s" in info.value.message
    assert waits.spent_s == pytest.approx(90)


def test_the_check_before_each_start_runs_for_every_call_again():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=1, clock=clock)
    taken = []

    def budget():
        if len(taken) == 2:
            raise StageStopped("spent", kind="quota", code="daily")
        taken.append(clock.now())

    call = answers(RateLimited("429", retry_after=1), "ok")
    assert limiter.call(call, WaitAllowance(10), budget) == "ok" and len(taken) == 2
    with pytest.raises(StageStopped) as info:
        limiter.call(answers("never"), WaitAllowance(10), budget)
    assert info.value.error_class == "quota:daily"


# --- where a call's time went: waiting for the quota apart from the call itself -----------------------

from tasks.gemini.ratelimit import CallTimes  # noqa: E402


def taking(clock: FakeClock, seconds: float, *items):
    """``answers(*items)``, each try taking ``seconds`` on the fake clock (the time inside the call)."""
    call = answers(*items)

    def timed():
        clock.advance(seconds)
        return call()

    return timed


def test_the_wait_for_a_start_and_the_call_itself_are_counted_apart():
    clock = FakeClock()
    limiter = RateLimiter(6, concurrency=1, clock=clock)  # one start every 10 s
    first, second = CallTimes(), CallTimes()
    limiter.call(taking(clock, 1.5, "ok"), WaitAllowance(0), times=first)
    limiter.call(taking(clock, 2.0, "ok"), WaitAllowance(0), times=second)
    assert (first.quota_wait_s, first.call_s) == (0.0, 1.5), "the first start is free"
    assert second.quota_wait_s == pytest.approx(10.0 - 1.5) and second.call_s == pytest.approx(2.0)


def test_a_429s_pause_is_quota_wait_and_every_try_is_call_time():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=1, clock=clock)
    times = CallTimes()
    assert limiter.call(taking(clock, 0.5, RateLimited("429", retry_after=30), "ok"), WaitAllowance(100),
                        times=times) == "ok"
    assert times.call_s == pytest.approx(1.0), "the refused try counts as time in the call"
    assert times.quota_wait_s == pytest.approx(30.0), "the pause, from the 429's answer to the next start"


def test_the_daily_budgets_check_is_quota_wait_and_a_failed_call_is_still_counted():
    clock = FakeClock()
    limiter = RateLimiter(600, concurrency=1, clock=clock)
    times = CallTimes()
    with pytest.raises(StageStopped) as info:
        limiter.call(taking(clock, 0.25, RateLimited("429", retry_after=30)), WaitAllowance(10),
                     before_start=lambda: clock.advance(0.125), times=times)
    assert info.value.error_class == "quota:wait"
    assert (times.quota_wait_s, times.call_s) == (0.125, 0.25)

