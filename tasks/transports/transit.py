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

import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import StageStopped
from tasks.core.files import atomic_write_bytes
from tasks.core.state_files import set_aside

logger = logging.getLogger("microstock.transports")

#: The largest block servers are known to write at once (vsftpd's VSFTP_DATA_BUFSIZE).
SERVER_WRITE_BLOCK = 64 * 1024
#: A temp file :func:`~tasks.core.files.atomic_file` writes a marker through: ``.`` + the marker's name (or its
#: hash) + ``.`` + mkstemp's 8 random characters + ``.tmp``.
_TEMP_FILE = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp", re.DOTALL)
#: Never watch one file longer than this (a trickle that would take longer is left for the next run).
MAX_WATCH_S = 15 * 60.0


@dataclass(frozen=True)
class Settled:
    """The server's copy after watching: its size (None: not there) and whether it was still growing."""

    size: int | None
    growing: bool = False
    watched_s: float = 0.0


def quiet_window(rate: float | None, silent_s: float, floor_s: float, cap_s: float | None = None) -> float:
    """How long a live transfer at ``rate`` bytes/s can go without the file growing (see the module)."""
    window = max(floor_s, 2 * SERVER_WRITE_BLOCK / rate) if rate else max(floor_s, 2 * silent_s)
    return window if cap_s is None else max(floor_s, min(window, cap_s))


class SendsInFlight:
    """Sends begun and not yet recorded, one small file per name under ``folder`` holding when it began.

    A run killed while the server was still reading (or one that left a file
    "still arriving") leaves its marker, so the next run knows the send's age
    and watches the partial file at the pace it implies, not for a bare 3 s.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def begin(self, name: str) -> None:
        """Mark the send of ``name`` as begun now, the marker written whole (a crash mid-write leaves the old
        marker or none, never a torn one); a folder in its place is set aside first, with one warning
        (:func:`~tasks.core.files.atomic_file`). StageStopped ``unwritable`` (one line naming it) when it cannot
        be written: a send the next run could not date is not begun."""
        marker = self.folder / name
        try:
            atomic_write_bytes(marker, f"{time.time():.3f}\n".encode("ascii"))
        except OSError as exc:
            raise StageStopped(f"{marker} cannot be written ({exc.strerror or exc}): nothing more is sent — make "
                               f"{self.folder} writable by you and run again", kind="unwritable") from None

    def end(self, name: str) -> None:
        """Drop the marker of ``name`` (its send is recorded); a folder in its place is set aside; one that cannot
        be removed (a read-only folder) is left, with one warning: it only informs, and a recorded file is never
        looked at again."""
        marker = self.folder / name
        try:
            marker.unlink(missing_ok=True)
        except IsADirectoryError:
            logger.warning("%s is a folder, not a marker of a send: set aside as %s", marker, set_aside(marker).name)
        except OSError as exc:
            logger.warning("%s: the marker of a recorded send could not be removed (%s); it only informs — delete "
                           "it when its folder is writable again", marker, exc.strerror or exc)

    def clear_temp_files(self) -> int:
        """Remove the temp files a killed run's marker writes left (``.<name>.<8 random>.tmp``,
        :func:`~tasks.core.files.atomic_file`); never a marker (an upload name never starts with a dot). Called at
        the start of the agency's upload, under its lock: no other run writes here then, so every one is stale.
        How many were removed."""
        removed = 0
        try:
            entries = list(self.folder.iterdir())
        except OSError:  # none yet, or not a folder: begin() says so when it writes
            return 0
        for path in entries:
            if _TEMP_FILE.fullmatch(path.name) and path.is_file() and not path.is_symlink():
                try:
                    path.unlink()
                    removed += 1
                except OSError as exc:
                    logger.warning("%s: a killed run's temp file could not be removed (%s)", path,
                                   exc.strerror or exc)
        return removed

    def began(self, name: str) -> float | None:
        """When the send of ``name`` began, as a ``time.monotonic()`` value; None without a marker."""
        try:
            text = (self.folder / name).read_text(encoding="ascii")
            epoch = float(text)
        except (OSError, ValueError):  # none, or damaged (not ASCII, empty, not a number): it only informs
            return None
        if not text.endswith("\n"):  # cut short: "1764851" of "1764851234.567\n" is a number, but not the time
            return None
        if not math.isfinite(epoch):  # "inf", "nan": no time a send began
            return None
        return time.monotonic() - max(0.0, time.time() - epoch)


def watch(size_of: Callable[[], int | None], expected: int, size: int | None, *, sent_at: float | None,
          floor_s: float, sleep: Callable[[float], None],
          on_growth: Callable[[int | None, int | None], None], cap_s: float | None = None) -> Settled:
    """Watch the remote copy (now ``size`` bytes of ``expected``) until it is whole, absent, or settled.

    ``sent_at``: ``time.monotonic()`` when a send of this file began in this
    run, if one did (its reply did not come), or in an earlier run (its
    marker, :class:`SendsInFlight`); None when unknown. ``cap_s`` bounds the
    quiet window (an old marker's average rate says little about now).
    ``on_growth(before, after)`` is told each time the file changed between
    two looks.
    """
    watched, rate, missing = 0.0, None, expected - (size or 0)
    while size is not None and size < expected:
        since = time.monotonic() - sent_at if sent_at is not None else None
        if rate is None and since and size:
            rate = size / since
        window = quiet_window(rate, since or 0.0, floor_s, cap_s)
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
