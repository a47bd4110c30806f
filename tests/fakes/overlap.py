"""Two runs made to overlap for certain, with events (no sleeps): the first holds inside its work until the second
has met the lock and said it waits. Shared by the describe and pack stages' two-runs tests."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def lines_of(logger: str, containing: str, seen: threading.Event) -> Iterator[list[str]]:
    """The lines of ``logger`` that contain ``containing`` meanwhile; ``seen`` is set at the first."""
    lines: list[str] = []

    def emit(record: logging.LogRecord) -> None:
        if containing in record.getMessage():
            lines.append(record.getMessage())
            seen.set()

    handler = logging.Handler()
    handler.emit = emit
    logging.getLogger(logger).addHandler(handler)
    try:
        yield lines
    finally:
        logging.getLogger(logger).removeHandler(handler)


def second_run_meets_the_first(one_run: Callable[[str], None], first_is_working: threading.Event,
                               second_waits: threading.Event) -> bool:
    """``one_run("first")`` in a thread; once it sets ``first_is_working`` (and holds until ``second_waits``),
    ``one_run("second")`` runs to its end; then the first goes on. True when the first reached its work in time.
    ``one_run`` must set ``second_waits`` when it ends, so a run that never waited leaves nobody hanging."""
    first = threading.Thread(target=one_run, args=("first",))
    second = threading.Thread(target=one_run, args=("second",))
    first.start()
    first_started = first_is_working.wait(30)
    if first_started:
        second.start()
        second.join()
    second_waits.set()  # a first run that did not reach its work in time goes on unheld
    first.join()
    return first_started
