"""Flow run names and one-line state messages that make the UI's runs list readable.

Prefect names a flow run with two random words; the contributor scanning the
runs list wants to see which night a run was for. :func:`dated_run_name` is
given as ``flow_run_name`` to every flow: ``stock-batch 2026-11-30 02:00:00 UTC``
(the run's scheduled start, so a late nightly run still names its night; to
the second, so two runs started in the same minute — a cron line and a
manual run — do not share a name in the runs list or a log).
"""

from __future__ import annotations

from datetime import datetime, timezone

from prefect import runtime

from tasks.stores.dead_letter import Summary


def when(moment: datetime | float) -> str:
    """``2026-11-30 02:00 UTC``: a time that does not go stale, unlike an age."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, timezone.utc)
    return f"{moment.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC"


def run_name(flow_name: str, start: datetime) -> str:
    """``stock-batch 2026-11-30 02:00:07 UTC``: the flow and its start, to the second."""
    return f"{flow_name} {start.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def dated_run_name() -> str:
    """``<flow name> <scheduled start, UTC, to the second>``."""
    return run_name(runtime.flow_run.flow_name, runtime.flow_run.scheduled_start_time)


def replay_run_name() -> str:
    """:func:`dated_run_name`, plus ``(dry run)`` when the replay changes nothing (its default)."""
    dry = runtime.flow_run.parameters.get("dry_run", True)
    return dated_run_name() + (" (dry run)" if dry else "")


def dead_letter_line(summary: Summary) -> str:
    """The dead-letter summary in one line, for the flow's final state message."""
    if not summary.by_class:
        return "dead-letter: clean (0 parked)"
    classes = ", ".join(f"{n} {error_class}" for error_class, n in summary.by_class)
    line = f"dead-letter: {summary.parked} parked ({classes})"
    if summary.oldest_first_seen is not None:
        line += f" · oldest parked since {when(summary.oldest_first_seen)}"
    return line
