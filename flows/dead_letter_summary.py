"""Flow ``dead-letter-summary``: what is parked, by error class, and how old the oldest job is.

Meant to run daily (a deployment schedule). The text is the original
design's (``dead-letter: clean (0 parked)`` / ``dead-letter: N parked`` and
one line per error class) plus the oldest parked job's age; it goes to the
flow's log and to the markdown artifact ``dead-letter-summary``.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.logging import get_run_logger

from tasks.artifacts import publish_dead_letters
from tasks.dead_letter import open_store
from tasks.workdir import Workdir, default_workdir


@flow(name="dead-letter-summary")
def dead_letter_summary(workdir: str | None = None) -> str:
    """Log and publish the dead-letter summary; returns its text.

    Args:
        workdir: The workdir (empty: $MICROSTOCK_WORKDIR, else ./microstock-data).
    """
    wd = Workdir(Path(workdir) if workdir else default_workdir()).prepare()
    summary = open_store(wd).summary()
    text = summary.text()
    get_run_logger().info(text)
    create_markdown_artifact(summary.markdown(wd.dead_letter_db), key="dead-letter-summary",
                             description="Parked describe jobs by error class")
    publish_dead_letters(wd)
    return text
