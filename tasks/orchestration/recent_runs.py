"""The last runs on the server at hand, with the address of each run's page (``microstock server start``'s
list: the pages a night's runs printed, open again)."""

from __future__ import annotations

from dataclasses import dataclass

from prefect.client.orchestration import get_client
from prefect.client.schemas.sorting import FlowRunSort
from prefect.utilities.urls import url_for


@dataclass(frozen=True)
class RecentRun:
    """A flow run as the list shows it."""

    name: str
    state: str
    started: str
    url: str


def recent_runs(limit: int = 5) -> list[RecentRun]:
    """The ``limit`` flow runs created last, newest first (PREFECT_API_URL must name the server)."""
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=limit)
    return [RecentRun(name=r.name, state=r.state.name if r.state else "?",
                      started=r.start_time.strftime("%Y-%m-%d %H:%M UTC") if r.start_time else "not started",
                      url=url_for("flow-run", obj_id=r.id) or "") for r in runs]
