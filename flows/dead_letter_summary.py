"""Flow ``dead-letter-summary``: what is parked, by error class, and how old the oldest job is.

Meant to run daily (a deployment schedule). The text is the original
design's (``dead-letter: clean (0 parked)`` / ``dead-letter: N parked`` and
one line per error class) plus the oldest parked job's age; it goes to the
flow's log and to the markdown artifact ``dead-letter-summary``; in one line, it is the
run's final state message (what the UI's runs list shows).
"""

from __future__ import annotations

from prefect import flow
from prefect.logging import get_run_logger
from prefect.states import Completed

from tasks.observe.artifacts import publish_dead_letter_summary, publish_dead_letters
from tasks.observe.run_names import dated_run_name, dead_letter_line
from tasks.stages.run_context import RunContext


@flow(name="dead-letter-summary", flow_run_name=dated_run_name)
def dead_letter_summary(workdir: str | None = None):
    """Log and publish the dead-letter summary; returns its text, and ends with it in one line as the state message.

    Args:
        workdir: The workdir (empty: $MICROSTOCK_WORKDIR, else ./microstock-data).
    """
    ctx = RunContext.open(workdir)
    ctx.wd.prepare()
    summary = ctx.store.summary()
    text = summary.text()
    get_run_logger().info(text)
    publish_dead_letter_summary(summary, ctx.wd)
    publish_dead_letters(ctx.wd, lambda: ctx.store)
    return Completed(message=dead_letter_line(summary), data=text)
