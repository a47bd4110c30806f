"""The progress of one long transfer (a clip of hundreds of MB), told by the transport as bytes go.

Below tasks/observe in the layering (transports may not import it), so the
terminal's listeners are added here by :func:`tasks.observe.progress.add_listener`.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

#: listener(label, done, total) — the same shape as the stage listeners of tasks/observe/progress.py.
_listeners: list[Callable[[str, int, int], None]] = []


def add_listener(listener: Callable[[str, int, int], None]) -> None:
    """Receive every long transfer's progress in MB (the terminal's bars)."""
    _listeners.append(listener)


def remove_listener(listener: Callable[[str, int, int], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


#: Files from this size on show their transfer's progress: clips (tens of MB to Adobe's 3.9 GB); a packed
#: still is well under it, and over in seconds.
LONG_TRANSFER_BYTES = 32 * 1024 * 1024
#: A long transfer's log line (the run's log in Prefect) comes at most this often.
TRANSFER_LOG_EVERY_S = 10.0
_MB = 1_000_000
_log = logging.getLogger(__name__)


class TransferProgress:
    """The bytes of one long transfer, told by the transport as they are handed over (``progress(sent)``).

    For a file of at least :data:`LONG_TRANSFER_BYTES`: a bar on the terminal
    named ``↑ <file> MB`` counting megabytes (the stage listeners, told each
    time another MB went), and a log line when it starts and then at most
    every ``log_every_s`` seconds with bytes, share and rate. A shorter file
    shows nothing: its upload stage's count is enough.
    """

    def __init__(self, where: str, name: str, total: int, *, log_every_s: float = TRANSFER_LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.where, self.name, self.total = where.rstrip("/"), name, total
        self.shown = total >= LONG_TRANSFER_BYTES
        self.label = f"↑ {name} MB"
        self._every_s, self._clock = log_every_s, clock
        self._mb = -1
        if self.shown:
            self._started = self._logged = clock()
            _log.info("%s/%s: sending %s MB", self.where, name, f"{total / _MB:,.0f}")
            self(0)

    def __call__(self, sent: int) -> None:
        if not self.shown:
            return
        mb = sent // _MB if sent < self.total else -(-self.total // _MB)  # the last MB counts once whole
        if mb != self._mb:
            self._mb = mb
            for listener in list(_listeners):
                listener(self.label, mb, -(-self.total // _MB))
        now = self._clock()
        if now - self._logged >= self._every_s and sent < self.total:
            self._logged = now
            rate = sent / (now - self._started) / _MB
            _log.info("%s/%s: %s of %s MB sent (%d %%, %.1f MB/s)", self.where, self.name,
                      f"{sent / _MB:,.0f}", f"{self.total / _MB:,.0f}", 100 * sent // self.total, rate)
