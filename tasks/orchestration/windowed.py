"""Submitting many task runs: a window of them at a time.

The describe stage runs one task per asset. Submitting them all at once
would hold every future in memory; :func:`submit_in_window` keeps at most
``window`` in flight and hands each finished future back to the stage as
soon as it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prefect.futures import PrefectFuture, as_completed

Item = TypeVar("Item")


def submit_in_window(task: Any, items: Sequence[Item], window: int, args: Callable[[Item], tuple], *,
                     on_done: Callable[[Item, PrefectFuture], None], stop: Callable[[], bool]) -> list[Item]:
    """Submit ``task(*args(item))`` for each item, at most ``window`` at a time, in order.

    ``on_done(item, future)`` is called in this thread as each run finishes
    (in the order they finish). Once ``stop()`` is true nothing more is
    submitted; the runs in flight still finish. Returns the items never
    submitted.
    """
    queue = list(items)
    queue.reverse()  # pop() from the end takes them in order
    in_flight: dict[PrefectFuture, Item] = {}
    while queue or in_flight:
        while queue and len(in_flight) < window and not stop():
            item = queue.pop()
            in_flight[task.submit(*args(item))] = item
        if not in_flight:
            break
        future = next(as_completed(list(in_flight)))
        on_done(in_flight.pop(future), future)
    queue.reverse()
    return queue
