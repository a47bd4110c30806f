"""Stage progress: a Prefect progress artifact for the UI, and listeners for the terminal.

The CLI adds a listener that drives rich progress bars; a deployment run has
none and shows the artifact only. A long transfer (a clip) has its own bar,
in MB, and a log line now and then (:class:`TransferProgress`).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from typing import Callable

#: listener(stage, done, total) — called on start, every advance and finish.
Listener = Callable[[str, int, int], None]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Receive every stage's progress (the terminal progress bars)."""
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


#: notice(text) — a line for whoever watches (the terminal prints it above the bars), e.g. what a paused run waits for.
Notice = Callable[[str], None]
_notices: list[Notice] = []


def add_notice(notice: Notice) -> None:
    """Receive every :func:`notify` line (the terminal)."""
    _notices.append(notice)


def remove_notice(notice: Notice) -> None:
    if notice in _notices:
        _notices.remove(notice)


def notify(text: str) -> None:
    """Tell whoever watches ``text`` now (nothing happens without a listener: a deployment run has its logs)."""
    for notice in list(_notices):
        notice(text)


def _in_a_run() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return bool(FlowRunContext.get() or TaskRunContext.get())


class StageProgress:
    """Counts one stage's items (from any thread); the ``progress-<stage>`` artifact follows every 5 %.

    The artifact is created and updated by one background thread of the run,
    so a stage never waits for Prefect's API to show progress (each update is
    a server write, ≈ 0.1 s here: it stalled the describe stage's submit loop).
    Leaving the ``with`` block posts the final count and waits for it.
    """

    def __init__(self, stage: str, total: int) -> None:
        self.stage, self.total, self.done = stage, total, 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._publisher: threading.Thread | None = None

    def __enter__(self) -> "StageProgress":
        # No run can be in progress unless Prefect is loaded: never load it here (a plain
        # ``upload_agency`` call or ``microstock ledger`` would wait seconds for the import).
        if "prefect" in sys.modules and _in_a_run():
            run_context = contextvars.copy_context()  # the artifact belongs to this flow or task run
            self._publisher = threading.Thread(target=run_context.run, args=(self._publish,),
                                               name=f"progress-{self.stage}", daemon=True)
            self._publisher.start()
        self._emit()
        return self

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
        self._emit()

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._emit()
        if self._publisher is not None:
            self._publisher.join(timeout=30)

    def _emit(self) -> None:
        for listener in list(_listeners):
            listener(self.stage, self.done, self.total)
        self._wake.set()

    def _publish(self) -> None:
        """The background thread: create the artifact, then post the count when it moved 5 % and at the end."""
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        try:
            artifact_id = create_progress_artifact(
                progress=0.0, key=f"progress-{self.stage}", description=f"{self.stage}: items done"
            )
            posted = 0.0
            while True:
                self._wake.wait()
                self._wake.clear()
                closed = self._closed
                pct = 100.0 * self.done / self.total if self.total else 100.0
                if pct - posted >= 5 or (closed and pct != posted):
                    update_progress_artifact(artifact_id, pct)
                    posted = pct
                if closed:
                    return
        except Exception as exc:  # progress is for show: it never fails the stage
            logging.getLogger(__name__).warning("progress of %s not shown in the UI (%s: %s)",
                                                self.stage, type(exc).__name__, exc)


# --- one long transfer -------------------------------------------------------------------------

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
