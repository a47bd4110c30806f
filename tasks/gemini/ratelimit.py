"""The one rate limiter of the Gemini calls: the contributor's quota, never exceeded, and used to the line.

Gemini's limit is requests per minute, counted by Google over the project and
model, so the limiter is shared by every call of the process
(:func:`shared_limiter`) rather than owned by one task. Prefect's server-side
``rate_limit`` was measured at ≈ 1 call/s when 4/s was asked (SQLite server, Prefect 3.9),
so the limiter is in-process and exact:

* **Rate.** Call starts are spaced at least ``60 / per_minute`` seconds apart
  (a token bucket that holds one token: no burst after an idle spell), and a
  start is allowed only when the ``per_minute``-th start before it is at least
  60 s old. So **no 60-second window ever holds more than ``per_minute``
  starts**, whatever the clock's rounding, the callers' timing or the pauses.
* **Concurrency.** At most ``concurrency`` calls are inside :meth:`RateLimiter.slot`
  at once. A caller takes its concurrency place first, then waits for its
  start, so a start is never spent on a caller that cannot run.
* **Pause.** :meth:`RateLimiter.pause` (a 429) sets one shared "not before"
  time: every caller, not only the one that was refused, waits it out, so one
  429 does not become a storm of 429s.
* **Calls.** :meth:`RateLimiter.call` is how a Gemini call goes through all of
  it: a slot, the caller's check before each start (the daily request budget,
  :mod:`tasks.gemini.daybudget`), and on a 429 a pause of
  :func:`~tasks.core.retry.rate_limited_wait` and the same call again — a 429
  is not a failed attempt. The time a run may spend so is its
  :class:`WaitAllowance`; when that is spent the call raises StageStopped
  ``quota:wait`` (the stage stops, the rest stays pending). Where the time
  went is counted in a :class:`CallTimes` when the caller passes one: the
  wait for the quota apart from the time inside the call.

Waiting uses an injectable :class:`Clock`, so tests run the limiter on a fake
clock, deterministic and instant.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, TypeVar

from tasks.core.errors import RateLimited, StageStopped
from tasks.core.retry import rate_limited_wait

T = TypeVar("T")

#: The quota's window: Gemini counts requests per minute.
WINDOW_S = 60.0


class Clock(Protocol):
    """Where the limiter reads the time and waits."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (> 0)."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``time.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class CallTimes:
    """Where one :meth:`RateLimiter.call`'s time went, in seconds of the limiter's clock."""

    #: From asking for a slot to the call's start, every try: a free place, the quota's next start,
    #: a 429's pause, the check before the start (the daily budget).
    quota_wait_s: float = 0.0
    #: Inside the call itself, every try (the ones refused with a 429 too).
    call_s: float = 0.0


class RateLimiter:
    """At most ``per_minute`` call starts in any 60 s window, evenly spaced; at most ``concurrency`` calls at once.

    Thread-safe. Use :meth:`slot` around each call; report a 429 with
    :meth:`pause`.
    """

    def __init__(self, per_minute: int, concurrency: int, clock: Clock | None = None) -> None:
        if per_minute < 1 or concurrency < 1:
            raise ValueError("per_minute and concurrency must be at least 1")
        self.per_minute = per_minute
        self.concurrency = concurrency
        #: Shortest gap between two starts.
        self.interval = WINDOW_S / per_minute
        self._clock: Clock = clock or MonotonicClock()
        self._lock = threading.Lock()
        self._places = threading.BoundedSemaphore(concurrency)
        #: The last ``per_minute`` starts, oldest first.
        self._starts: deque[float] = deque(maxlen=per_minute)
        self._next_start = float("-inf")
        self._not_before = float("-inf")

    def __repr__(self) -> str:
        return f"RateLimiter(per_minute={self.per_minute}, concurrency={self.concurrency})"

    @contextmanager
    def slot(self) -> Iterator[float]:
        """Hold one of the ``concurrency`` places, wait for a start, and yield its time (``clock.now()``).

        The place is given back when the block ends, however it ends.
        """
        self._places.acquire()
        try:
            yield self._start()
        finally:
            self._places.release()

    def pause(self, seconds: float) -> None:
        """No caller starts a call sooner than ``seconds`` from now (a longer pause already set is kept)."""
        with self._lock:
            self._not_before = max(self._not_before, self._clock.now() + max(seconds, 0.0))

    def call(self, fn: Callable[[], T], waits: "WaitAllowance", before_start: Callable[[], None] | None = None,
             times: CallTimes | None = None) -> T:
        """``fn()`` in a slot, called again after every 429 once the pause it asked for has passed.

        ``before_start`` runs in the slot before each call (it may raise, e.g.
        StageStopped ``quota:daily`` when the day's budget is spent). A 429
        pauses every caller of this limiter for
        :func:`~tasks.core.retry.rate_limited_wait` and takes that time from
        ``waits``; StageStopped ``quota:wait`` when it is used up.
        ``times``, when given, gets the time waited for the quota and the time
        spent in ``fn`` added to it, however the call ends.
        """
        times = times if times is not None else CallTimes()
        while True:
            asked = self._clock.now()
            with self.slot():
                if before_start is not None:
                    before_start()
                began = self._clock.now()
                times.quota_wait_s += began - asked
                try:
                    return fn()
                except RateLimited as exc:
                    wait = rate_limited_wait(exc)
                    self.pause(wait)
                    waits.spend(wait, exc)
                finally:
                    times.call_s += self._clock.now() - began

    def _earliest(self) -> float:
        at = max(self._next_start, self._not_before)
        if len(self._starts) == self.per_minute:
            at = max(at, self._starts[0] + WINDOW_S)
        return at

    def _start(self) -> float:
        while True:
            with self._lock:
                now = self._clock.now()
                at = self._earliest()
                if now >= at:
                    self._starts.append(now)
                    self._next_start = now + self.interval
                    return now
            # Woken callers look again: a pause may have moved the time, or another caller taken it.
            self._clock.sleep(at - now)


class WaitAllowance:
    """The seconds one run may spend waiting on 429 answers (``gemini.rate_limit_wait_s``); thread-safe."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.spent_s = 0.0
        self._lock = threading.Lock()

    def spend(self, seconds: float, exc: RateLimited) -> None:
        """Count a wait of ``seconds``; StageStopped ``quota:wait`` (naming the setting) when it would pass
        the limit."""
        with self._lock:
            if self.spent_s + seconds > self.limit_s:
                raise StageStopped(f"{exc.message}; this run has already waited {self.spent_s:g} s on rate limits "
                                   f"and may wait {self.limit_s:g} s in all (`gemini.rate_limit_wait_s`): "
                                   "the rest waits for the next run", kind="quota", code="wait")
            self.spent_s += seconds


_shared: dict[tuple[str, int, int], RateLimiter] = {}
_shared_lock = threading.Lock()


def shared_limiter(model: str, per_minute: int, concurrency: int) -> RateLimiter:
    """The process's one limiter for ``model`` at these settings, made on first use.

    Every describe call of the process with the same model and settings gets
    the same limiter (Gemini counts the quota per project and model), so two
    flow runs in one process share the quota instead of each using all of it.
    """
    key = (model, per_minute, concurrency)
    with _shared_lock:
        limiter = _shared.get(key)
        if limiter is None:
            limiter = _shared[key] = RateLimiter(per_minute, concurrency)
        return limiter
