"""Back-pressure from Prefect's server: a stage never gets far ahead of what the server has recorded.

A flow run sends every task run's states to the server as events; the server
records them afterwards, at its own pace. On the embedded SQLite server that
pace is a few dozen task runs a second, while the describe stage can start
150 a second (offline). Run far ahead and the server's in-memory event queue
(10,000 messages) overflows: it drops events, so task runs go missing from
the UI, and any API call waits behind the backlog (a tag's concurrency-slot
request got 503 and failed a 5,000-asset flow). :class:`ServerPace` keeps the
runs submitted but not yet recorded as finished under a bound, asking the
server (one count request) only when the bound may have been reached.

The bound is :data:`DEFAULT_AHEAD` unless ``MICROSTOCK_SERVER_PACE_AHEAD``
says otherwise (0: no pace) — for a server that keeps up with its record
(docs/BENCHMARKS.md measures where that holds; docs/OPERATIONS.md says when
to set it).
"""

from __future__ import annotations

import os
import time
from typing import Callable
from uuid import UUID

from tasks.core.errors import ConfigError

#: Task runs a stage may be ahead of the server (≈ 3 events each: well under the 10,000-message queue).
DEFAULT_AHEAD = 500
#: Environment variable that sets the bound for the process's flow runs (0: no pace).
AHEAD_ENV = "MICROSTOCK_SERVER_PACE_AHEAD"

_FINISHED = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
_UNFINISHED = ["RUNNING", "SCHEDULED", "PAUSED", "CANCELLING"]  # started (or awaiting a retry), not finished


class ServerPace:
    """Blocks a submit loop while ``ahead`` or more of its task runs are not yet recorded as finished.

    ``recorded()`` returns how many of the stage's task runs the server has
    recorded as finished; it is called only when the last answer leaves no
    room, then every ``poll_s`` until there is. When the count does not move
    for ``stall_s`` (runs lost, server unreachable) the loop goes on rather
    than wait for ever: the pace may slow a stage, never stop it. ``sleep``
    is injectable for tests.
    """

    def __init__(self, recorded: Callable[[], int], ahead: int = DEFAULT_AHEAD, poll_s: float = 0.5,
                 stall_s: float = 30.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self._recorded = recorded
        self.ahead = ahead
        self.poll_s = poll_s
        self.stall_s = stall_s
        self._sleep = sleep
        self._known = 0
        #: Seconds spent waiting for the server (for logs and benchmarks).
        self.waited_s = 0.0

    def before_submit(self, submitted: int) -> None:
        """Call before submitting the next task run, with how many this stage has submitted so far."""
        if submitted - self._known < self.ahead:
            return
        self._known = self._recorded()
        still = 0.0
        while submitted - self._known >= self.ahead and still < self.stall_s:
            self._sleep(self.poll_s)
            self.waited_s += self.poll_s
            still += self.poll_s
            now = self._recorded()
            if now > self._known:
                still = 0.0
            self._known = now
        if submitted - self._known >= self.ahead:  # stalled: go on, and ask again only after another `ahead`
            self._known = submitted


def finished_task_runs(flow_run_id: UUID, name_prefix: str) -> Callable[[], int]:
    """``recorded`` for :class:`ServerPace`: the flow run's task runs named ``<name_prefix>…`` the server has finished.

    One ``POST /task_runs/count`` per call. An API error counts as "no news"
    (the last known number), so the pace slows a stage but never fails it.
    """
    from prefect.client.orchestration import get_client

    body = {"flow_runs": {"id": {"any_": [str(flow_run_id)]}},
            "task_runs": {"name": {"like_": name_prefix}, "state": {"type": {"any_": _FINISHED}}}}
    last = 0

    def recorded() -> int:
        nonlocal last
        try:
            with get_client(sync_client=True) as client:
                response = client.request("POST", "/task_runs/count", json=body)
                response.raise_for_status()
                last = int(response.json())
        except Exception:  # the server is busy or unreachable: keep the last answer, wait and ask again
            pass
        return last

    return recorded


def configured_ahead() -> int:
    """The bound from ``MICROSTOCK_SERVER_PACE_AHEAD`` (a whole number ≥ 0), else :data:`DEFAULT_AHEAD`."""
    raw = os.environ.get(AHEAD_ENV, "").strip()
    if not raw:
        return DEFAULT_AHEAD
    if not raw.isdigit():
        raise ConfigError(f"{AHEAD_ENV}={raw!r}: give a whole number of task runs (0 turns the pace off)")
    return int(raw)


def pace_for_flow_run(name_prefix: str, ahead: int | None = None) -> ServerPace | None:
    """A pace for the current flow run's task runs named ``<name_prefix>…`` (bound: :func:`configured_ahead`).

    None outside a flow run, and when the bound is 0 (no pace).
    """
    from prefect.context import FlowRunContext

    ahead = configured_ahead() if ahead is None else ahead
    ctx = FlowRunContext.get()
    if ahead == 0 or ctx is None or ctx.flow_run is None:
        return None
    return ServerPace(finished_task_runs(ctx.flow_run.id, name_prefix), ahead=ahead)


def task_run_counts(flow_run_id: UUID) -> Callable[[], tuple[int, int]]:
    """``counts`` for :func:`wait_until_recorded`: (started and unfinished, finished) task runs of the flow run.

    Pending runs count as neither: a run the server has seen only created may
    never start (a stage whose tag slots were refused stays Pending for good,
    ``tasks.stage_tags``). Two ``POST /task_runs/count`` per call; an API
    error raises (the waiter gives up on it).
    """
    from prefect.client.orchestration import get_client

    of_run = {"flow_runs": {"id": {"any_": [str(flow_run_id)]}}}
    unfinished = {**of_run, "task_runs": {"state": {"type": {"any_": _UNFINISHED}}}}
    finished = {**of_run, "task_runs": {"state": {"type": {"any_": _FINISHED}}}}

    def counts() -> tuple[int, int]:
        with get_client(sync_client=True) as client:
            found = []
            for body in (unfinished, finished):
                response = client.request("POST", "/task_runs/count", json=body)
                response.raise_for_status()
                found.append(int(response.json()))
        return found[0], found[1]

    return counts


def wait_until_recorded(counts: Callable[[], tuple[int, int]], quiet_s: float = 1.5, limit_s: float = 120.0,
                        poll_s: float = 0.25, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until the server has recorded every task run of a flow run as finished; True when it has.

    The server records task runs from events, behind the flow; a process that
    stops its own (ephemeral) server right after the flow would lose the last
    records. ``counts()`` gives (started and unfinished, finished) runs.
    Recorded means: none started and unfinished, and neither number has moved
    for ``quiet_s`` (runs it has not heard of yet would move them). Gives up
    after ``limit_s`` or on an API error: the workdir is complete either way,
    only Prefect's history would be short.
    """
    start = clock()
    last, since = None, start
    while clock() - start < limit_s:
        try:
            unfinished, finished = counts()
        except Exception:
            return False
        now = clock()
        if (unfinished, finished) != last:
            last, since = (unfinished, finished), now
        elif unfinished == 0 and now - since >= quiet_s:
            return True
        sleep(poll_s)
    return False
