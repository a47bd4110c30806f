"""Stage progress: a Prefect progress artifact for the UI, and listeners for the terminal.

The CLI adds a listener that drives rich progress bars; a deployment run has
none and shows the artifact only.
"""

from __future__ import annotations

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


class StageProgress:
    """Counts one stage's items; updates the ``progress-<stage>`` artifact every 5 %."""

    def __init__(self, stage: str, total: int) -> None:
        self.stage, self.total, self.done = stage, total, 0
        self._artifact_id = None
        self._last_pct = -1.0

    def __enter__(self) -> "StageProgress":
        # Prefect is loaded here, not at import, so commands that never run a flow start fast.
        from prefect.artifacts import create_progress_artifact
        from prefect.context import FlowRunContext, TaskRunContext

        if FlowRunContext.get() or TaskRunContext.get():
            self._artifact_id = create_progress_artifact(
                progress=0.0, key=f"progress-{self.stage}", description=f"{self.stage}: items done"
            )
        self._emit(force=True)
        return self

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._emit()

    def __exit__(self, *exc: object) -> None:
        self._emit(force=True)

    def _emit(self, force: bool = False) -> None:
        for listener in list(_listeners):
            listener(self.stage, self.done, self.total)
        pct = 100.0 * self.done / self.total if self.total else 100.0
        if self._artifact_id is not None and (force or pct - self._last_pct >= 5):
            from prefect.artifacts import update_progress_artifact

            update_progress_artifact(self._artifact_id, pct)
            self._last_pct = pct
