"""The events the stages emit, so a user can build Automations on them: the :class:`Events` port of a run.

Five events, each about one resource:

==============================  ====================================  ==================================
event                           resource (``prefect.resource.id``)    payload
==============================  ====================================  ==================================
``microstock.job.parked``       ``microstock.asset.<sha256>``         asset, error_class, attempts, model
``microstock.job.recovered``    ``microstock.asset.<sha256>``         asset, attempts
``microstock.upload.completed`` ``microstock.agency.<name>``          uploaded, already, failed, files
``microstock.batch.finished``   ``microstock.batch.<flow run id>``    the run's counts (see below)
``microstock.review.waiting``   ``microstock.batch.<flow run id>``    waiting (count), flow_run_id
==============================  ====================================  ==================================

The asset resource also carries the label ``microstock.error-class`` on a
parked event, so a trigger can match e.g. ``"permanent:*"``. Events emitted
inside a flow or task run also get Prefect's related resources (flow run,
task run, deployment, tags) attached by Prefect; upload and batch events
relate to the batch (``microstock.batch.<flow run id>``, role ``batch``).

Payloads hold names, counts and error classes only — never an error message,
a key, a password or a target URL (which may name a user) — so nothing
secret can reach an event. Emitting never raises.

Where they go is the run's (``RunContext.events``), one of two sinks of one interface, as a store has
backends: :class:`PrefectEvents` sends them to Prefect (a run opened by a flow or command); :class:`MemoryEvents`
keeps them in the order emitted (a stage called plainly, with no Prefect run to send them to: a test reads them
there). Every event is built once, here, whichever sink takes it.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any

from tasks.observe.summary import BatchSummary

logger = logging.getLogger("microstock.events")

JOB_PARKED = "microstock.job.parked"
JOB_RECOVERED = "microstock.job.recovered"
UPLOAD_COMPLETED = "microstock.upload.completed"
BATCH_FINISHED = "microstock.batch.finished"
REVIEW_WAITING = "microstock.review.waiting"

#: At most this many file names in one upload event (the rest are counted only).
MAX_FILES_LISTED = 100


def asset_resource_id(asset_id: str) -> str:
    return f"microstock.asset.{asset_id}"


def agency_resource_id(agency: str) -> str:
    return f"microstock.agency.{agency}"


def batch_resource_id(flow_run_id: str) -> str:
    return f"microstock.batch.{flow_run_id}"


def current_batch_id() -> str | None:
    """The id of the flow run this code runs in (a batch is a flow run); None outside one."""
    if "prefect" not in sys.modules:  # no run can be in progress unless Prefect is loaded
        return None
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx and ctx.flow_run else None


def _batch_related(batch_id: str | None) -> list[dict[str, str]]:
    if not batch_id:
        return []
    return [{"prefect.resource.id": batch_resource_id(batch_id), "prefect.resource.role": "batch"}]


class Events:
    """Where a run's events go: the interface (a sink implements :meth:`emit`; the five events are built here).

    Each event method's contract: it builds the event of the module's table and hands it to :meth:`emit` once;
    it never raises.
    """

    def emit(self, event: str, resource: dict[str, str], payload: dict[str, Any],
             related: list[dict[str, str]]) -> None:
        """Take one event: its name, its resource (``prefect.resource.id`` and labels), its payload and its related
        resources. Never raises: an event that cannot be taken is logged and the run goes on."""
        raise NotImplementedError

    def job_parked(self, asset_id: str, asset_name: str, error_class: str, attempts: int, model: str) -> None:
        """A describe job was parked in the dead-letter store (first time or again after a replay)."""
        self.emit(
            JOB_PARKED,
            {"prefect.resource.id": asset_resource_id(asset_id), "prefect.resource.name": asset_name,
             "microstock.error-class": error_class},
            {"asset": asset_name, "asset_id": asset_id, "error_class": error_class, "attempts": attempts,
             "model": model},
            _batch_related(current_batch_id()),
        )

    def job_recovered(self, asset_id: str, asset_name: str, attempts: int) -> None:
        """A parked job succeeded on replay (its status is now ``recovered``)."""
        self.emit(
            JOB_RECOVERED,
            {"prefect.resource.id": asset_resource_id(asset_id), "prefect.resource.name": asset_name},
            {"asset": asset_name, "asset_id": asset_id, "attempts": attempts},
            _batch_related(current_batch_id()),
        )

    def upload_completed(self, agency: str, uploaded: list[str], already: int, failed: int) -> None:
        """An agency's upload stage finished: what was confirmed now, what the ledger already had, what failed."""
        self.emit(
            UPLOAD_COMPLETED,
            {"prefect.resource.id": agency_resource_id(agency), "prefect.resource.name": agency},
            {"agency": agency, "uploaded": len(uploaded), "already": already, "failed": failed,
             "files": sorted(uploaded)[:MAX_FILES_LISTED]},
            _batch_related(current_batch_id()),
        )

    def batch_finished(self, summary: BatchSummary, state: str) -> None:
        """A stock-batch run finished as ``state`` (its final state's name, decided by the flow): its counts
        (never paths, targets or messages)."""
        batch_id = current_batch_id() or "local"
        agencies = sorted(summary.targets)
        payload = {
            "headline": summary.headline(reasons=False),
            #: ``Completed``, or ``Incomplete`` when uploads were left pending (the flow run's final state name).
            "state": state,
            "left_pending": summary.uploads_left_pending(),
            "stopped_agencies": sorted(summary.upload_stopped),
            "assets": summary.assets,
            "described": summary.described_now,
            "described_total": summary.described,
            "parked": summary.parked,
            "pending": summary.pending,
            "rejected": len(summary.rejected),
            "tokens": summary.tokens,
            "uploaded": sum(summary.uploaded_now.values()),
            "uploaded_per_agency": dict(summary.uploaded_now),
            "upload_failed_per_agency": {a: len(f) for a, f in summary.upload_failed.items()},
            "describer": summary.describer,
        }
        self.emit(
            BATCH_FINISHED,
            {"prefect.resource.id": batch_resource_id(batch_id), "prefect.resource.name": "stock-batch"},
            payload,
            [{"prefect.resource.id": agency_resource_id(a), "prefect.resource.role": "agency"} for a in agencies],
        )

    def review_waiting(self, count: int) -> None:
        """A stock-batch run paused for review: ``count`` assets wait for the contributor's answer."""
        batch_id = current_batch_id() or "local"
        self.emit(
            REVIEW_WAITING,
            {"prefect.resource.id": batch_resource_id(batch_id), "prefect.resource.name": "stock-batch"},
            {"waiting": count, "flow_run_id": batch_id},
            [],
        )


class PrefectEvents(Events):
    """The events sent to Prefect (``prefect.events.emit_event``): a run opened by a flow or a command. An event
    Prefect cannot take is logged by its type only, and the run goes on."""

    def emit(self, event: str, resource: dict[str, str], payload: dict[str, Any],
             related: list[dict[str, str]]) -> None:
        try:
            from prefect.events import emit_event  # here, not at import: the stages that emit stay free of Prefect

            emit_event(event=event, resource=resource, related=related, payload=payload)
        except Exception as exc:  # an event must never take a stage down
            logger.warning("could not emit %s (%s)", event, type(exc).__name__)


@dataclass(frozen=True)
class Event:
    """One event as :class:`MemoryEvents` keeps it."""

    event: str
    resource: dict[str, str]
    payload: dict[str, Any]
    related: list[dict[str, str]]


class MemoryEvents(Events):
    """The events kept in memory, in the order emitted (from any thread), in :attr:`sent`: a stage called plainly,
    outside any Prefect run, has nothing to send them to."""

    def __init__(self) -> None:
        self.sent: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: str, resource: dict[str, str], payload: dict[str, Any],
             related: list[dict[str, str]]) -> None:
        with self._lock:
            self.sent.append(Event(event, dict(resource), dict(payload), list(related)))
