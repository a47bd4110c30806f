"""One Gemini quota shared by every process and machine of a Prefect server: the describe limiter's starts from
the server.

Google counts requests per minute over a **project and model**. Accounts whose
keys belong to the same Google project share that quota, but the in-process
:class:`~tasks.gemini.ratelimit.RateLimiter` sees only its own process. With
``[gemini] quota_project`` set and a Prefect server to talk to
(``PREFECT_API_URL``), the describe stage takes its call starts from a Prefect
global concurrency limit used as a rate limit instead — one per project and
model, named ``gemini-rpm:<project>:<model>`` — which every process of every
account on that server shares. :class:`SharedQuotaLimiter` changes how a
start is obtained (``_start``) and makes a 429's pause every sharing
process's (``pause``); concurrency places and
:meth:`~tasks.gemini.ratelimit.RateLimiter.call` are the in-process limiter's.

**Why the total stays under the quota.** A call takes :data:`SLOTS_PER_CALL`
of the limit's slots. The server keeps ``active_slots`` (≤ ``limit`` = L)
that decay by ``floor(decay × seconds since the row's last update)``; an
increment is granted only while the slots after decay plus the ones asked
for fit in L. So in any window of T seconds at most ``L + decay × T`` slots
are granted (the decay is never more than the time allows; it only loses
fractions). A granted start is used at once or, when a 429 pause
intervenes, dropped after :data:`HOLD_S`; a start is therefore used at most
``HOLD_S`` after its grant, and any 60 s window holds at most
``(L + decay × (60 + HOLD_S)) / SLOTS_PER_CALL`` starts. The limit is set so
that this is the **budget**: ``per_minute`` less :data:`MARGIN` (3 %, at
least one call).

**Why it gets close to the budget.** Measured (docs/BENCHMARKS.md), Prefect's
own ``rate_limit()`` reached 70–78 % of the asked rate, for two reasons read
in the server's code: a refused caller sleeps the server's ``Retry-After``
(its wait *plus every caller denied before it*), and every refusal rewrites
the row's ``updated`` time without decaying the slots, so all the decay
since the last update is lost; a grant loses the fraction of a slot decayed
so far. Here:

* a process asks only right after a read of the limit (a read changes
  nothing) shows the slots free by the server's own figures (``active_slots``
  and ``updated``): two processes rarely ask within the same few
  milliseconds, so refusals are rare and lose little;
* between reads it sleeps until the server's figures say enough slots will
  have decayed for the callers waiting in this process (up to the process's
  concurrency), plus a random few milliseconds so that processes waiting
  for the same slots do not all read at once;
* ten slots a call make the fraction a grant loses a tenth of a call at
  most, not up to a whole one: arriving late costs nothing while the
  limit's burst has room.

One thread per process talks to the server; the others wait for its grants.

All processes sharing a project must set the same ``requests_per_minute``
(each writes the limit it computes; the last writer wins).
"""

from __future__ import annotations

import atexit
import logging
import math
import random
import threading
import time
from collections import deque

from httpx import HTTPError, HTTPStatusError
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.exceptions import ObjectAlreadyExists
from prefect.settings import get_current_settings

from tasks.core.settings import GeminiSettings
from tasks.gemini.ratelimit import WINDOW_S, Clock, RateLimiter

#: Share of ``per_minute`` kept back (at least one call): starts are counted at the client, requests
#: at Google a few milliseconds later, and the clocks of the machines differ a little.
MARGIN = 0.03
#: The limit's slots one call takes: the server keeps only whole decayed slots and forgets the fraction at every
#: grant or refusal, so with ten a call that loss is under a tenth of a call.
SLOTS_PER_CALL = 10
#: Seconds' worth of the budget one process may take at once (the limit, at least one call).
BURST_S = 1.0
#: A granted start not used within this many seconds (a 429 pause began meanwhile) is dropped.
HOLD_S = 0.5
#: Slots count as decayed only this long after the server's figures say so: the clocks of the server and of this
#: machine may differ by a few milliseconds, and asking too early is a refusal, which loses the decay.
CLOCK_MARGIN_S = 0.05
#: Up to this much is added at random to each sleep, so processes waiting for the same slots read one after another.
JITTER_S = 0.03
#: Shortest and longest sleep between two reads of the limit.
MIN_POLL_S = 0.005
MAX_POLL_S = 2.0
LOCKED = 423

log = logging.getLogger(__name__)


def limit_name(project: str, model: str) -> str:
    """The server's name of the limit for ``model`` in Google project ``project``."""
    return f"gemini-rpm:{project}:{model}"


def budget(per_minute: int) -> int:
    """Starts allowed in any 60 s window: ``per_minute`` less :data:`MARGIN` (at least one call less, never < 1)."""
    return max(1, per_minute - max(1, math.ceil(per_minute * MARGIN)))


def limit_and_decay(per_minute: int) -> tuple[int, float]:
    """The server-side limit (L slots) and slot decay per second that hold :func:`budget` calls in every 60 s window.

    A call takes :data:`SLOTS_PER_CALL` slots; L is :data:`BURST_S` seconds' worth of calls (at least one).
    """
    allowed = budget(per_minute)
    burst = max(1, min(allowed // 2, round(allowed / WINDOW_S * BURST_S)))
    return burst * SLOTS_PER_CALL, (allowed - burst) * SLOTS_PER_CALL / (WINDOW_S + HOLD_S)


def ensure_limit(client: SyncPrefectClient, name: str, per_minute: int) -> tuple[int, float]:
    """Create the limit ``name`` for ``per_minute``, or update it to that; the same call twice changes nothing."""
    slots, decay = limit_and_decay(per_minute)
    try:
        client.upsert_global_concurrency_limit_by_name(name, slots, slot_decay_per_second=decay)
    except ObjectAlreadyExists:  # another process created it between our read and our create
        client.upsert_global_concurrency_limit_by_name(name, slots, slot_decay_per_second=decay)
    return slots, decay


class SharedQuotaLimiter(RateLimiter):
    """A :class:`RateLimiter` whose starts come from the Prefect server's rate limit ``name`` (shared by processes)."""

    def __init__(self, name: str, per_minute: int, concurrency: int, clock: Clock | None = None) -> None:
        super().__init__(per_minute, concurrency, clock)
        self.name = name
        self._cond = threading.Condition(self._lock)
        self._client: SyncPrefectClient | None = None
        self._grants: deque[float] = deque()
        self._waiting = 0
        self._fetching = False
        self.slots, self.decay = 0, 0.0

    def __repr__(self) -> str:
        return f"SharedQuotaLimiter({self.name!r}, per_minute={self.per_minute}, concurrency={self.concurrency})"

    def pause(self, seconds: float) -> None:
        """No caller of this process starts for ``seconds``, and no process sharing the limit either.

        A 429 from Google speaks of the project's quota, which every process
        sharing the limit uses, so the server's limit is filled past its top
        by ``seconds`` of decay: its first slot frees only after the pause
        (a longer pause already there is kept). When the server cannot be
        told, this process still pauses; the others meet their own 429.
        """
        super().pause(seconds)
        if seconds <= 0 or self._client is None:
            return
        try:
            with get_client(sync_client=True) as client:  # its own client: the fetching thread may be using ours
                limit = client.read_global_concurrency_limit_by_name(self.name)
                held = limit.limit + math.ceil(limit.slot_decay_per_second * seconds)
                if held > limit.active_slots - self._decayed(limit):
                    client.update_global_concurrency_limit(self.name, GlobalConcurrencyLimitUpdate(active_slots=held))
        except HTTPError as exc:
            log.warning("a 429 paused this process only: the server's limit %s could not be filled (%s)",
                        self.name, type(exc).__name__)

    def _start(self) -> float:
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    now = self._clock.now()
                    while self._grants and now - self._grants[0] > HOLD_S:
                        self._grants.popleft()  # held past a pause: dropped, never used late
                    if now < self._not_before:
                        self._cond.wait(self._not_before - now)
                    elif self._grants:
                        self._grants.popleft()
                        return now
                    elif self._fetching:
                        self._cond.wait(MAX_POLL_S)
                    else:
                        self._fetch_unlocked()
            finally:
                self._waiting -= 1

    def _fetch_unlocked(self) -> None:
        """With the lock released, obtain at least one start from the server and add them to the grants."""
        self._fetching = True
        self._cond.release()
        got = 0
        try:
            got = self._take()
        finally:
            self._cond.acquire()
            self._fetching = False
            at = self._clock.now()
            self._grants.extend([at] * got)
            self._cond.notify_all()

    def _connect(self) -> SyncPrefectClient:
        if self._client is None:
            client = get_client(sync_client=True)
            client.__enter__()
            atexit.register(client.__exit__, None, None, None)
            self.slots, self.decay = ensure_limit(client, self.name, self.per_minute)
            self._client = client
        return self._client

    def _take(self) -> int:
        """Block until the server grants at least one start; how many it granted.

        Reads the limit; when the server's figures show free slots for the
        callers waiting here (up to this process's concurrency), asks at once
        for as many starts as callers wait; otherwise sleeps until they will
        have decayed and reads again. A refusal (another process asked in the
        same few milliseconds) means a fresh read.
        """
        client = self._connect()
        most = max(1, min(self.concurrency, self.slots // SLOTS_PER_CALL))
        while True:
            if self._clock.now() < self._not_before:  # a 429 pause: take nothing that would be held through it
                return 0
            limit = client.read_global_concurrency_limit_by_name(self.name)
            need = max(1, min(most, self._waiting))
            free = self._free_calls(limit)
            if free < need:
                time.sleep(self._until_free(limit, need))
                continue
            want = max(1, min(self._waiting, free))
            try:
                client.increment_concurrency_slots(names=[self.name], slots=want * SLOTS_PER_CALL, mode="rate_limit")
                return want
            except HTTPStatusError as exc:
                if exc.response.status_code != LOCKED:
                    raise

    @staticmethod
    def _decayed(limit) -> int:
        """The slots of ``limit`` decayed by now by the server's reckoning, less :data:`CLOCK_MARGIN_S` of them."""
        elapsed = time.time() - limit.updated.timestamp() - CLOCK_MARGIN_S
        return math.floor(limit.slot_decay_per_second * max(elapsed, 0.0))

    @staticmethod
    def _free_calls(limit) -> int:
        """Calls whose slots are free in ``limit`` now (the server's floor(decay × elapsed), with the clock margin)."""
        active = max(0, limit.active_slots - SharedQuotaLimiter._decayed(limit))
        return (limit.limit - active) // SLOTS_PER_CALL

    @staticmethod
    def _until_free(limit, calls: int) -> float:
        """Seconds until the slots of ``calls`` calls are free in ``limit``, plus a random jitter."""
        decayed_needed = limit.active_slots - (limit.limit - calls * SLOTS_PER_CALL)
        elapsed = time.time() - limit.updated.timestamp()
        wait = decayed_needed / limit.slot_decay_per_second + CLOCK_MARGIN_S - elapsed
        return min(max(wait, MIN_POLL_S), MAX_POLL_S) + random.uniform(0.0, JITTER_S)


def server_api_url() -> str | None:
    """The Prefect server this process talks to (``PREFECT_API_URL``); None on the ephemeral default."""
    return get_current_settings().api.url or None


_shared: dict[tuple[str, int, int], SharedQuotaLimiter] = {}
_shared_lock = threading.Lock()


def shared_quota_limiter(gemini: GeminiSettings, model: str) -> SharedQuotaLimiter | None:
    """The process's limiter on the server's shared quota of ``model``, or None when that is off.

    On when ``gemini.quota_project`` names the Google project and a Prefect
    server is set (``PREFECT_API_URL``); one limiter per limit name and
    settings in the process, like :func:`~tasks.gemini.ratelimit.shared_limiter`.
    The describe stage gets it handed in (``tasks.orchestration.describe_runs.IN_PREFECT``).
    """
    if not gemini.quota_project or server_api_url() is None:
        return None
    key = (limit_name(gemini.quota_project, model), gemini.requests_per_minute, gemini.concurrency)
    with _shared_lock:
        limiter = _shared.get(key)
        if limiter is None:
            limiter = _shared[key] = SharedQuotaLimiter(*key)
        return limiter
