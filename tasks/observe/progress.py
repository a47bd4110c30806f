"""Stage progress: a Prefect progress artifact for the UI, and listeners for the terminal.

The CLI adds a listener that drives rich progress bars; a deployment run has
none and shows the artifact only. A long transfer (a clip) has its own bar,
in MB, and a log line now and then (tasks/transports/progress.py).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from typing import Callable

from tasks.transports import progress as transfers

#: listener(stage, done, total) — called on start, every advance and finish.
Listener = Callable[[str, int, int], None]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Receive every stage's progress (the terminal progress bars), long transfers' too."""
    _listeners.append(listener)
    transfers.add_listener(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)
    transfers.remove_listener(listener)


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


#: How long leaving a stage waits for its progress thread's last post to Prefect's API.
PUBLISH_WAIT_S = 30.0

log = logging.getLogger(__name__)


class StageProgress:
    """Counts one stage's items (from any thread); the ``progress-<stage>`` artifact follows every 5 %.

    The artifact is created and updated by one background thread of the run,
    so a stage never waits for Prefect's API to show progress (each update is
    a server write, ≈ 0.1 s here: it stalled the describe stage's submit loop).
    Leaving the ``with`` block posts the final count and waits for it, at most
    :data:`PUBLISH_WAIT_S`; a thread still waiting on the API then (its server
    killed) is left behind silent: whatever it meets later, the stage, the run
    and perhaps logging itself are over (its late warning, after the summary,
    was ``--- Logging error ---`` and two tracebacks).
    """

    def __init__(self, stage: str, total: int) -> None:
        self.stage, self.total, self.done = stage, total, 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._publisher: threading.Thread | None = None
        #: The progress thread is done (under ``_lock``), and the stage was left without it (it stays silent).
        self._published = self._left_behind = False

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
        if self._publisher is None:
            return
        self._publisher.join(timeout=PUBLISH_WAIT_S)
        with self._lock:
            self._left_behind = not self._published
        if self._left_behind:  # said now, while the run is there to log it
            log.warning("progress of %s not shown in the UI: Prefect's API did not answer in %.0f s",
                        self.stage, PUBLISH_WAIT_S)

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
                    break
        except Exception as exc:  # progress is for show: it never fails the stage
            with self._lock:
                if not self._left_behind:
                    log.warning("progress of %s not shown in the UI (%s: %s)", self.stage, type(exc).__name__, exc)
        finally:
            with self._lock:
                self._published = True
