"""The one retry policy: doubling, capped backoff; a service's requested delay is honoured in full."""

from __future__ import annotations

import random

from tasks.core.errors import RateLimited, TransientError
from tasks.core.retry import MAX_BACKOFF_S, RATE_WINDOW_S, backoff_schedule, delay_before_retry, rate_limited_wait


def test_the_schedule_doubles_and_is_capped():
    assert backoff_schedule(2.0, 6) == [2.0, 4.0, 8.0, 16.0, MAX_BACKOFF_S, MAX_BACKOFF_S]


def test_jitter_stays_between_half_and_the_whole_delay():
    rng = random.Random(1)
    delays = [delay_before_retry(2.0, 3, TransientError("x", kind="retryable", code=503), rng) for _ in range(200)]
    assert min(delays) >= 4.0 and max(delays) <= 8.0 and len(set(delays)) > 100


def test_a_requested_delay_wins_even_above_the_cap():
    asked = RateLimited("x", retry_after=49.1)
    assert delay_before_retry(2.0, 1, asked, random.Random(0)) == 49.1
    assert rate_limited_wait(asked) == 49.1
    assert rate_limited_wait(RateLimited("x")) == RATE_WINDOW_S == 60  # a 429 that says nothing: a full minute
