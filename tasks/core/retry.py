"""The one retry policy: how long to wait before trying a failed call again.

Everywhere (describe, generate, upload) the rule is the same:

* the delay before retry *n* (1, 2, …) is ``first_s · 2^(n-1)``, capped at
  :data:`MAX_BACKOFF_S`, with jitter so that callers who failed together do
  not come back together (our own loops draw between half and the whole
  delay; the describe task hands the schedule to Prefect with
  ``retry_jitter_factor`` = :data:`JITTER_FACTOR`);
* when the service said how long to wait (``retry_after``: Gemini's
  RetryInfo), the wait is at least that, uncapped: asking again sooner is
  refused again.

The describe task hands the schedule to Prefect (:func:`backoff_schedule`).

A rate-limited answer (HTTP 429) is not a failed attempt: the caller waits
:func:`rate_limited_wait` — what the service said, else a full quota window
(:data:`RATE_WINDOW_S`) — and calls again, and only the total time spent
waiting is bounded (``gemini.rate_limit_wait_s``; ``tasks.gemini.ratelimit``).
"""

from __future__ import annotations

import random

from tasks.core.errors import TransientError

#: No backoff delay is longer than this (a service's own request can be).
MAX_BACKOFF_S = 30.0
#: Prefect's ``retry_jitter_factor`` for the describe task's schedule.
JITTER_FACTOR = 0.5


def backoff_schedule(first_s: float, retries: int) -> list[float]:
    """Nominal delays before retry 1, 2, …: ``first_s × 2^i``, capped at :data:`MAX_BACKOFF_S`."""
    return [min(first_s * 2**i, MAX_BACKOFF_S) for i in range(max(retries, 1))]


#: Wait after a 429 that does not say how long: Gemini's per-minute quota window.
RATE_WINDOW_S = 60.0


def rate_limited_wait(exc: TransientError) -> float:
    """Seconds to wait after a 429: what the service asked for with ``exc``, else :data:`RATE_WINDOW_S`."""
    return RATE_WINDOW_S if exc.retry_after is None else exc.retry_after


def delay_before_retry(first_s: float, retry: int, exc: TransientError, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``retry`` (1 = the first retry) after ``exc``."""
    nominal = backoff_schedule(first_s, retry)[retry - 1]
    jittered = nominal * (rng or random).uniform(0.5, 1.0)
    return max(jittered, exc.retry_after or 0.0)
