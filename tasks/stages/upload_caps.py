"""Upload caps: at most so many files to an agency per day, week or month, counted in the ledger.

An agency may cap what a contributor sends, by level (docs/AGENCIES.md, "Upload caps": no shipped agency
states a figure that could be confirmed, so the cap is the contributor's setting, ``[agencies.<name>]
upload_cap`` and ``upload_cap_per``, or a spec's ``[uploads]``). The ledger is the only truth of what was
sent: the files it records for the agency since the window began (UTC: the day, the ISO week from Monday, the
calendar month) count, reconciled ones included. A run sends the pending files up to what is left of the cap,
in name order (stable across runs); the rest stay pending with the reason and the day the next window opens.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tasks.agencies.catalog import catalog
from tasks.core.records import UploadItem
from tasks.core.settings import AgencySettings
from tasks.core.workdir import Workdir
from tasks.stores.ledger_lines import parse_line

Window = Literal["day", "week", "month"]


@dataclass(frozen=True)
class UploadCap:
    """``limit`` files per ``per``, and where the figure comes from (``your setting`` or the spec's source)."""

    limit: int
    per: Window
    source: str


def upload_cap(wd: Workdir, agency: str, settings: AgencySettings) -> UploadCap | None:
    """The agency's cap: the contributor's setting, else its spec's ``[uploads]``; None when neither has one."""
    if settings.upload_cap is not None:
        return UploadCap(settings.upload_cap, settings.upload_cap_per, "your setting")
    spec = catalog(wd).specs.get(agency)
    uploads = spec.uploads if spec is not None else None
    if uploads is None or uploads.cap is None:
        return None
    return UploadCap(uploads.cap, uploads.per, uploads.source or f"{agency}'s spec")


def window_start(per: Window, now: dt.datetime) -> dt.datetime:
    """When the window holding ``now`` (UTC) began."""
    day = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if per == "week":
        return day - dt.timedelta(days=day.weekday())
    if per == "month":
        return day.replace(day=1)
    return day


def next_window(per: Window, now: dt.datetime) -> dt.datetime:
    """When the window after the one holding ``now`` begins."""
    start = window_start(per, now)
    if per == "day":
        return start + dt.timedelta(days=1)
    if per == "week":
        return start + dt.timedelta(weeks=1)
    return (start + dt.timedelta(days=32)).replace(day=1)


def sent_since(ledger: Path, agency: str, since: dt.datetime) -> int:
    """Files the ledger records for ``agency`` at or after ``since``; lines it cannot read count for nothing."""
    stamp = since.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the ledger's own form: compared as text
    try:
        text = ledger.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return 0
    count = 0
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            entry = parse_line(line, (agency,))
        except ValueError:
            continue
        count += entry.timestamp >= stamp
    return count


def within_cap(pending: list[UploadItem], cap: UploadCap, ledger: Path, agency: str,
               now: dt.datetime) -> tuple[list[UploadItem], dict[str, str]]:
    """The pending files this run may send (name order, up to what is left of ``cap``), and name -> why for
    the rest, which stay pending."""
    start = window_start(cap.per, now)
    sent = sent_since(ledger, agency, start)
    room = max(0, cap.limit - sent)
    ordered = sorted(pending, key=lambda i: i.name)
    why = (f"cap reached — next window {next_window(cap.per, now):%Y-%m-%d} (UTC): {agency} takes {cap.limit} a "
           f"{cap.per} ({cap.source}); {sent} sent since {start:%Y-%m-%d}, the ledger says")
    return ordered[:room], {i.name: why for i in ordered[room:]}
