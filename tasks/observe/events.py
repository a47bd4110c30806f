"""Prefect events the stages emit, so a user can build Automations on them.

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
secret can reach an event. Emitting never raises: an event that cannot be
sent is logged by Prefect and the run goes on.
"""

from __future__ import annotations

import logging
import sys
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


def _emit(event: str, resource: dict[str, str], payload: dict[str, Any],
          related: list[dict[str, str]] | None = None) -> None:
    try:
        from prefect.events import emit_event  # here, not at import: the stages that emit stay free of Prefect

        emit_event(event=event, resource=resource, related=related or [], payload=payload)
    except Exception as exc:  # an event must never take a stage down
        logger.warning("could not emit %s (%s)", event, type(exc).__name__)


def job_parked(asset_id: str, asset_name: str, error_class: str, attempts: int, model: str) -> None:
    """A describe job was parked in the dead-letter store (first time or again after a replay)."""
    _emit(
        JOB_PARKED,
        {"prefect.resource.id": asset_resource_id(asset_id), "prefect.resource.name": asset_name,
         "microstock.error-class": error_class},
        {"asset": asset_name, "asset_id": asset_id, "error_class": error_class, "attempts": attempts, "model": model},
        _batch_related(current_batch_id()),
    )


def job_recovered(asset_id: str, asset_name: str, attempts: int) -> None:
    """A parked job succeeded on replay (its status is now ``recovered``)."""
    _emit(
        JOB_RECOVERED,
        {"prefect.resource.id": asset_resource_id(asset_id), "prefect.resource.name": asset_name},
        {"asset": asset_name, "asset_id": asset_id, "attempts": attempts},
        _batch_related(current_batch_id()),
    )


def upload_completed(agency: str, uploaded: list[str], already: int, failed: int) -> None:
    """An agency's upload stage finished: what was confirmed now, what the ledger already had, what failed."""
    _emit(
        UPLOAD_COMPLETED,
        {"prefect.resource.id": agency_resource_id(agency), "prefect.resource.name": agency},
        {"agency": agency, "uploaded": len(uploaded), "already": already, "failed": failed,
         "files": sorted(uploaded)[:MAX_FILES_LISTED]},
        _batch_related(current_batch_id()),
    )


def batch_finished(summary: BatchSummary) -> None:
    """A stock-batch run finished: its counts (never paths, targets or messages)."""
    batch_id = current_batch_id() or "local"
    agencies = sorted(summary.targets)
    payload = {
        "headline": summary.headline(reasons=False),
        #: ``Completed``, or ``Incomplete`` when uploads were left pending (the flow run's final state name).
        "state": summary.state_name(),
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
    _emit(
        BATCH_FINISHED,
        {"prefect.resource.id": batch_resource_id(batch_id), "prefect.resource.name": "stock-batch"},
        payload,
        [{"prefect.resource.id": agency_resource_id(a), "prefect.resource.role": "agency"} for a in agencies],
    )


def review_waiting(count: int) -> None:
    """A stock-batch run paused for review: ``count`` assets wait for the contributor's answer."""
    batch_id = current_batch_id() or "local"
    _emit(
        REVIEW_WAITING,
        {"prefect.resource.id": batch_resource_id(batch_id), "prefect.resource.name": "stock-batch"},
        {"waiting": count, "flow_run_id": batch_id},
    )
