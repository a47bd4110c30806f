"""Submitting many task runs: a window of them at a time, never far ahead of Prefect's server.

The describe stage runs one task per asset. Submitting them all at once
would hold every future in memory and outrun the server that records them
(:mod:`tasks.orchestration.server_pace`); :func:`submit_in_window` keeps at
most ``window`` in flight, paces submissions by the server's record, and
hands each finished future back to the stage as soon as it is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prefect.futures import PrefectFuture, as_completed

from tasks.orchestration.server_pace import pace_for_flow_run

log = logging.getLogger(__name__)

Item = TypeVar("Item")


def submit_in_window(task: Any, items: Sequence[Item], window: int, args: Callable[[Item], tuple], *,
                     on_done: Callable[[Item, PrefectFuture], None], stop: Callable[[], bool],
                     run_name_prefix: str) -> list[Item]:
    """Submit ``task(*args(item))`` for each item, at most ``window`` at a time, in order.

    ``on_done(item, future)`` is called in this thread as each run finishes
    (in the order they finish). Once ``stop()`` is true nothing more is
    submitted; the runs in flight still finish. Returns the items never
    submitted. ``run_name_prefix`` names the task runs counted for the pace.
    """
    queue = list(items)
    queue.reverse()  # pop() from the end takes them in order
    in_flight: dict[PrefectFuture, Item] = {}
    pace = pace_for_flow_run(run_name_prefix)  # never far ahead of what Prefect's server has recorded
    submitted = 0
    while queue or in_flight:
        while queue and len(in_flight) < window and not stop():
            if pace is not None:
                pace.before_submit(submitted)
            item = queue.pop()
            in_flight[task.submit(*args(item))] = item
            submitted += 1
        if not in_flight:
            break
        future = next(as_completed(list(in_flight)))
        on_done(in_flight.pop(future), future)
    if pace is not None and pace.waited_s:
        log.info("waited %.0f s in all for Prefect's server to record %s runs", pace.waited_s,
                 run_name_prefix.rstrip("-"))
    queue.reverse()
    return queue
