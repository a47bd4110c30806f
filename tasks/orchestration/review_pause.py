"""The review step's pause in Prefect: the form, the wait and its time-out, and the CLI's side of a paused run.

The decisions are :mod:`tasks.stages.review` (plain Python); this module is
how a stock-batch run asks: Prefect's pause-with-input, its form made at
pause time from the waiting names (:func:`answer_form`), so the UI shows the
run as Paused — its message what it waits for — with a form under the
description the stage wrote, whose file fields are pickers of the waiting
names. ``microstock review approve/reject`` answers the same form
(:func:`answer_paused_run`) of the run :func:`paused_review_run` finds; the
server refuses an answer naming a file the form does not offer, and the
answer is read leniently (:class:`ReceivedAnswer`) so the stage refuses it
too, whatever reached the run.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Literal
from uuid import UUID, uuid4

from prefect.client.orchestration import get_client
from prefect.client.schemas import SetStateStatus
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
from prefect.flow_runs import resume_flow_run
from prefect.input import RunInput, keyset_from_paused_state
from prefect.states import Paused, Running
from prefect.utilities.urls import url_for
from pydantic import BaseModel, Field, create_model

from tasks.core.errors import ConfigError
from tasks.core.reports import CsvReport, PackReport
from tasks.core.workdir import Workdir
from tasks.observe import progress as stage_progress
from tasks.stages.review import Correction, Question, ReviewReport, review_decisions
from tasks.stages.run_context import RunContext

log = logging.getLogger(__name__)

#: How often the paused run asks the server whether it was answered.
POLL_S = 5

REJECT_HELP = ("The assets to leave out: they get no CSV row and are never uploaded. Every other asset listed "
               "above is approved.")
CORRECTIONS_HELP = ("Optional: a new title, description and/or keywords per asset, written to its sidecar and "
                    "checked against every agency's rules before anything is uploaded (an asset that breaks a rule "
                    "is held back there, as usual). A field left empty stays as it is.")


def answer_form(waiting: list[str]) -> type[RunInput]:
    """The form of a run paused for review, made at pause time: ``reject`` and each correction's ``file`` take
    only the waiting names (an enum in the input schema: the UI renders a picker, and Prefect's server refuses
    any other name on resume); the correction fields are plain text boxes, empty meaning unchanged."""
    name = Literal[tuple(waiting)]  # type: ignore[valid-type]
    correction = create_model(
        "Correction",
        file=(name, Field(description="The asset, as listed above.")),
        title=(str, Field("", description="The new title (empty: unchanged).")),
        description=(str, Field("", description="The new description (empty: unchanged).")),
        keywords=(str, Field("", description="The new keywords, comma-separated, most important first "
                                             "(empty: unchanged).")))
    return create_model("ReviewAnswer", __base__=RunInput,
                        reject=(list[name], Field(default_factory=list, description=REJECT_HELP)),
                        corrections=(list[correction], Field(default_factory=list, description=CORRECTIONS_HELP)))


class FormCorrection(BaseModel):
    """One correction as the form sent it (its types checked by the server against the form), any name taken:
    the stage refuses names not waiting."""

    file: str
    title: str = ""
    description: str = ""
    keywords: str = ""

    def correction(self) -> Correction:
        """The stage's :class:`~tasks.stages.review.Correction`: an empty field is no change; the keywords are
        split at commas (text with no keyword in it clears them, which an agency's rule then holds back)."""
        words = [w.strip() for w in self.keywords.split(",") if w.strip()] if self.keywords.strip() else None
        return Correction(file=self.file, title=self.title or None, description=self.description or None,
                          keywords=words)


class ReceivedAnswer(RunInput):
    """The answer as it was sent, read leniently: whatever names it holds reach the stage, which decides."""

    reject: list[str] = Field(default_factory=list)
    corrections: list[FormCorrection] = Field(default_factory=list)

    def answer(self) -> "Answered":
        return Answered(list(self.reject), [c.correction() for c in self.corrections])


class Answered:
    """An answer for :func:`~tasks.stages.review.review_decisions` (the stage's ``Answer``)."""

    def __init__(self, reject: list[str], corrections: list[Correction]) -> None:
        self.reject, self.corrections = reject, corrections


def ask(question: Question) -> Answered | None:
    """Pause the flow run — Paused, its message what it waits for — until the form is answered; None when it
    is not answered within the question's time.

    Prefect's ``pause_flow_run`` makes the same three calls (propose Paused with the input keyset, save the
    form's schema, poll); here because its Paused state can carry no message. After a time-out the run is set
    back to Running (forced: the server refuses to resume an expired pause), so the rest of the run — CSVs
    without the held assets, the summary — still happens.
    """
    context = FlowRunContext.get()
    if context is None:
        raise ConfigError("review: a run can only pause for review inside a flow run")
    flow_run_id = context.flow_run.id
    form = answer_form(question.waiting).with_initial_data(description=question.description)
    url = url_for("flow-run", obj_id=flow_run_id)  # None without a UI to point at
    paused = Paused(timeout_seconds=question.timeout_s, pause_key=f"review-{uuid4().hex[:8]}",
                    message=question.message + (f" · the form: {url}" if url else ""))
    keyset = keyset_from_paused_state(paused)
    paused.state_details.run_input_keyset = keyset
    with get_client(sync_client=True) as client:
        # Orchestrated (force=False), as pause_flow_run's proposal: no rule answers a pause with WAIT.
        result = client.set_flow_run_state(flow_run_id, paused)
        if result.status != SetStateStatus.ACCEPT:
            raise ConfigError(f"review: the run could not pause (the server answered {result.status.value}: "
                              f"{getattr(result.details, 'reason', None) or 'no reason given'})")
        form.save(keyset)
        if url:
            announce_form(url, question)
        deadline = time.monotonic() + question.timeout_s
        while True:
            time.sleep(max(0.0, min(POLL_S, deadline - time.monotonic())))
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_running():
                return ReceivedAnswer.load(keyset).answer()
            if time.monotonic() >= deadline:
                break
        client.set_flow_run_state(flow_run_id, Running(message="review: no answer in time"), force=True)
    return None


def announce_form(url: str, question: Question) -> None:
    """Say where the paused run's form is (``url``, the run's page), the moment it is there: on the terminal (a
    pipe too: a cron log shows it) and in the run's log — not only when the run ends. The Paused state's message
    ends with it too, so a notification on ``prefect.flow-run.Paused`` carries it
    (docs/automations/notify-run-paused.yaml)."""
    line = f"review: the form of this run waits at {url} (Resume) — {len(question.waiting)} asset(s)"
    log.info(line)
    stage_progress.notify(line)


def review_stage(ctx: RunContext, packed: PackReport, csvs: CsvReport) -> ReviewReport:
    """The review step of a flow run: :func:`~tasks.stages.review.review_decisions`, asking with the run's pause."""
    return review_decisions(ctx.wd, ctx.settings, packed, csvs, ask, ctx.events)


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


def answer_paused_run(flow_run_id: str, reject: list[str]) -> str | None:
    """Submit the paused run's form: ``reject`` these, approve every other asset it asked about.

    Returns None when the run took the answer, else why it was refused (a name it is not waiting for: the
    server checks the answer against the form's choices) — the run then still waits.
    """
    try:
        resume_flow_run(UUID(flow_run_id), run_input={"reject": reject})
    except RuntimeError as exc:  # Prefect's resume_flow_run: "Cannot resume this run: <the server's reason>"
        return str(exc)
    return None
