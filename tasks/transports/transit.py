"""Is a partial remote file still arriving? Watching the server's copy before anything is sent again.

A partial file under the upload's name has two possible pasts: a transfer
that died (send it again) or one still being received (sending again would
deliver it twice — the server keeps reading the first transfer, then takes
the second). Only the server's own view tells them apart, so the file is
watched until it settles:

- **whole** (the size sent): the first transfer arrived; confirm and record it.
- **incomplete and no longer growing** for a whole quiet window: the
  transfer is over; sending again is safe.
- **still growing** when the watch's budget is spent: left alone, pending
  for the next run, with that reason.

The quiet window is derived from the rate the server was seen writing, not
fixed: servers write what they read in blocks (vsftpd: 64 KiB), so at 15
KB/s the file on disk grows only every 4.4 s, and a fixed 3 s would call a
live transfer dead. A live transfer grows at least once per block at the
rate observed; the window is two of those (never less than the floor). The
rate is the server's copy divided by the time since the send began — a
lower bound while the writes lag behind the reads, so the window errs long —
or, when it grew between two looks, that growth over that time; when
nothing arrived at all, the silence so far, doubled, stands in for it.
The budget is twice the time the missing bytes need at that rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: The largest block servers are known to write at once (vsftpd's VSFTP_DATA_BUFSIZE).
SERVER_WRITE_BLOCK = 64 * 1024
#: Never watch one file longer than this (a trickle that would take longer is left for the next run).
MAX_WATCH_S = 15 * 60.0


@dataclass(frozen=True)
class Settled:
    """The server's copy after watching: its size (None: not there) and whether it was still growing."""

    size: int | None
    growing: bool = False
    watched_s: float = 0.0


def quiet_window(rate: float | None, silent_s: float, floor_s: float) -> float:
    """How long a live transfer at ``rate`` bytes/s can go without the file growing (see the module)."""
    if rate:
        return max(floor_s, 2 * SERVER_WRITE_BLOCK / rate)
    return max(floor_s, 2 * silent_s)


def watch(size_of: Callable[[], int | None], expected: int, size: int | None, *, sent_at: float | None,
          floor_s: float, sleep: Callable[[float], None],
          on_growth: Callable[[int | None, int | None], None]) -> Settled:
    """Watch the remote copy (now ``size`` bytes of ``expected``) until it is whole, absent, or settled.

    ``sent_at``: ``time.monotonic()`` when a send of this file began in this
    run, if one did (its reply did not come); None for a file found partial,
    left by an earlier run. ``on_growth(before, after)`` is told each time
    the file changed between two looks.
    """
    watched, rate, missing = 0.0, None, expected - (size or 0)
    while size is not None and size < expected:
        since = time.monotonic() - sent_at if sent_at is not None else None
        if rate is None and since and size:
            rate = size / since
        window = quiet_window(rate, since or 0.0, floor_s)
        budget = min(MAX_WATCH_S, max(2 * window, 2 * missing / rate if rate else 0.0))
        sleep(window)
        watched += window
        now = size_of()
        if now == size:
            return Settled(size, watched_s=watched)
        on_growth(size, now)
        if now is not None and now > size and window > 0:
            rate = max(rate or 0.0, (now - size) / window)
        size = now
        if watched >= budget and size is not None and size < expected:
            return Settled(size, growing=True, watched_s=watched)
    return Settled(size, watched_s=watched)
