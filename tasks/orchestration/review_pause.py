"""The review step's pause in Prefect: the form, the wait and its time-out, and the CLI's side of a paused run.

The decisions are :mod:`tasks.stages.review` (plain Python); this module is
how a stock-batch run asks: Prefect's pause-with-input
(``pause_flow_run(wait_for_input=ReviewAnswer)``), so the UI shows the run
as Paused with a form under the description the stage wrote. ``microstock
review approve/reject`` answers the same form (:func:`answer_paused_run`) of
the run :func:`paused_review_run` finds.
"""

from __future__ import annotations

import os
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.context import FlowRunContext
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run, resume_flow_run
from prefect.input import RunInput
from prefect.states import Running
from pydantic import Field

from tasks.core.reports import CsvReport, PackReport
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stages.review import Correction, ReviewReport, review_decisions

#: How often the paused run asks the server whether it was answered.
POLL_S = 5


class ReviewAnswer(RunInput):
    """The form of a paused stock-batch run."""

    reject: list[str] = Field(default_factory=list, description=(
        "File names of the assets to leave out: they get no CSV row and are never uploaded. "
        "Every other asset listed above is approved."))
    corrections: list[Correction] = Field(default_factory=list, description=(
        "Optional: a new title, description and/or keywords per asset, written to its sidecar and checked "
        "against every agency's rules before anything is uploaded (an asset that breaks a rule is held back "
        "there, as usual)."))


def ask(description: str, timeout_s: int) -> ReviewAnswer | None:
    """Pause the flow run until the form is answered; None when it is not answered within ``timeout_s``.

    After a time-out the run is set back to Running (forced: the server refuses to resume an expired
    pause), so the rest of the run — CSVs without the held assets, the summary — still happens.
    """
    try:
        return pause_flow_run(wait_for_input=ReviewAnswer.with_initial_data(description=description),
                              timeout=timeout_s, poll_interval=POLL_S, key="review")
    except FlowPauseTimeout:
        flow_run_id = FlowRunContext.get().flow_run.id
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(flow_run_id, Running(message="review: no answer in time"), force=True)
        return None


def review_stage(wd: Workdir, settings: Settings, packed: PackReport, csvs: CsvReport) -> ReviewReport:
    """The review step of a flow run: :func:`~tasks.stages.review.review_decisions`, asking with the run's pause."""
    return review_decisions(wd, settings, packed, csvs, ask)


def paused_review_run(wd: Workdir) -> str | None:
    """The id of the newest stock-batch run of this workdir paused for review on the Prefect server
    (``PREFECT_API_URL``); None without a server (the ephemeral one cannot hold a paused run) or run.

    The newest: a run whose process died while it waited stays Paused on the server, and the next run
    asks again — that one is listening.
    """
    if not os.environ.get("PREFECT_API_URL"):
        return None
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["stock-batch"])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))),
            sort=FlowRunSort.START_TIME_DESC)
    mine = [r for r in runs if r.parameters.get("workdir") in (str(wd.root), None)]
    return str(mine[0].id) if mine else None


def answer_paused_run(flow_run_id: str, reject: list[str]) -> None:
    """Submit the paused run's form: ``reject`` these, approve every other asset it asked about."""
    resume_flow_run(UUID(flow_run_id), run_input={"reject": reject})
