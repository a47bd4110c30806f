"""How a stock-batch run ends, decided from what its summary reports: the flow's final state and ``microstock run``'s
exit code (docs/INTERFACE.md, "Exit codes"; docs/OPERATIONS.md, the final states).

The summary (:class:`~tasks.observe.summary.BatchSummary`) keeps the facts — what was left undone, which agency or
stage stopped — and decides nothing; the flow and the CLI decide here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.observe.summary import BatchSummary

if TYPE_CHECKING:
    from prefect.states import State

#: The name of a stock-batch run's final state when it left work undone: a Failed-type state, so the UI shows it
#: red and the dashboard counts it, never as done; its result is still the summary. Prefect emits
#: ``prefect.flow-run.Incomplete`` for it, which an automation matches (docs/automations/notify-batch-incomplete.yaml).
INCOMPLETE = "Incomplete"

def state_name(summary: BatchSummary) -> str:
    """The final state's name: :data:`INCOMPLETE` when the run left something undone (``summary.undone()``: uploads
    left pending, review waiting, a stage stopped), else ``Completed`` — parked jobs alone keep a run Completed."""
    return INCOMPLETE if summary.undone() else "Completed"


def final_state(summary: BatchSummary) -> "State":
    """The stock-batch flow's final state: named :func:`state_name` (Incomplete is Failed-type, Completed is
    Completed), its message the summary's headline, its result the summary."""
    from prefect.states import Completed, Failed

    name = state_name(summary)
    final = Failed if name == INCOMPLETE else Completed
    return final(name=name, message=summary.headline(), data=summary.model_dump())


def exit_code(summary: BatchSummary) -> int:
    """``microstock run``'s exit code for a run that finished: ``STOPPED_EARLY`` of the CLI's one table
    (:data:`flows.cli_common.EXIT_CODES`) when an agency's uploads or a stage (the describe service unreachable, the
    day's quota, …) stopped before the end, or own files were held back everywhere because no describer saw them
    (``summary.not_seen``: the way on is a describer or the contributor's words), so a cron job knows; else 0
    (parked jobs, review waiting and files left pending after their retries alone exit 0)."""
    from flows.cli_common import STOPPED_EARLY  # the CLI's table; the flow itself never needs it

    return STOPPED_EARLY if summary.upload_stopped or summary.stopped or summary.not_seen else 0
