"""The microstock events: names, resource ids, related batch, counts in the payload, nothing secret."""

from __future__ import annotations

import json

import pytest
from prefect.events.clients import AssertingEventsClient
from prefect.events.worker import EventsWorker

from flows.run_outcome import state_name
from tasks.observe import events
from tasks.observe.summary import BatchSummary

SECRET = "AIzaSy-this-is-the-secret-key-0123456789"
SHA = "ab" * 32


@pytest.fixture
def sent(prefect_harness, monkeypatch):
    """The events emitted during the test, captured by Prefect's asserting client."""
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", SECRET)
    worker = EventsWorker.instance(AssertingEventsClient)
    monkeypatch.setattr(EventsWorker, "instance", lambda *_: worker)
    captured: list = []

    def drained() -> list:
        worker.drain()
        captured.extend(e for e in worker._client.events if e.event.startswith("microstock."))
        return captured

    yield drained
    worker.drain()


def summary() -> BatchSummary:
    return BatchSummary(
        workdir="/data/w", assets=5, described=4, described_now=3, parked=1, pending=0,
        rejected={"bad.jpg": "empty file"}, describer="gemini:gemini-2.5-flash", tokens=1234,
        uploaded_now={"adobe": 3, "vecteezy": 2}, uploaded_total={"adobe": 4, "vecteezy": 4},
        upload_failed={"vecteezy": {"x.jpg": "timed out"}},
        targets={"adobe": "sftp://123@sftp.example:22/", "vecteezy": "/data/w/outbox/vecteezy"},
    )


def test_job_events_name_the_asset_and_carry_the_error_class(sent):
    events.PrefectEvents().job_parked(SHA, "sunset_017.jpg", "exhausted:503", 4, "gemini-2.5-flash")
    events.PrefectEvents().job_recovered(SHA, "sunset_017.jpg", 5)
    parked, recovered = sent()
    assert parked.event == "microstock.job.parked"
    assert parked.resource.id == f"microstock.asset.{SHA}"
    assert parked.resource.name == "sunset_017.jpg"
    assert parked.resource["microstock.error-class"] == "exhausted:503"
    assert parked.payload == {"asset": "sunset_017.jpg", "asset_id": SHA, "error_class": "exhausted:503",
                              "attempts": 4, "model": "gemini-2.5-flash"}
    assert recovered.event == "microstock.job.recovered"
    assert recovered.resource.id == f"microstock.asset.{SHA}"
    assert recovered.payload["attempts"] == 5


def test_upload_event_counts_per_agency_and_caps_the_file_list(sent):
    names = [f"img_{i:03d}.jpg" for i in range(events.MAX_FILES_LISTED + 20)]
    events.PrefectEvents().upload_completed("adobe", names, already=7, failed=2)
    (ev,) = sent()
    assert ev.event == "microstock.upload.completed"
    assert ev.resource.id == "microstock.agency.adobe"
    assert ev.payload["uploaded"] == len(names) and ev.payload["already"] == 7 and ev.payload["failed"] == 2
    assert ev.payload["files"] == names[: events.MAX_FILES_LISTED]


def test_batch_finished_inside_a_flow_run_is_the_flow_run_and_has_no_secret_or_target(sent):
    from prefect import flow
    from prefect.context import FlowRunContext

    @flow(name="events-probe")
    def probe() -> str:
        sink = events.PrefectEvents()
        sink.batch_finished(summary(), state_name(summary()))
        sink.upload_completed("adobe", ["a.jpg"], already=0, failed=0)
        return str(FlowRunContext.get().flow_run.id)

    flow_run_id = probe()
    batch, upload = sent()
    assert batch.event == "microstock.batch.finished"
    assert batch.resource.id == f"microstock.batch.{flow_run_id}"
    assert batch.payload["headline"] == "3 described · 1 parked · 1 rejected · 5 uploaded · 1 upload(s) left pending"
    assert batch.payload["state"] == "Incomplete" and batch.payload["left_pending"] == 1
    assert {k: batch.payload[k] for k in ("assets", "described", "parked", "rejected", "tokens", "uploaded")} == \
        {"assets": 5, "described": 3, "parked": 1, "rejected": 1, "tokens": 1234, "uploaded": 5}
    assert batch.payload["uploaded_per_agency"] == {"adobe": 3, "vecteezy": 2}
    assert batch.payload["upload_failed_per_agency"] == {"vecteezy": 1}
    assert {r.id for r in batch.related if r.role == "agency"} == {"microstock.agency.adobe",
                                                                   "microstock.agency.vecteezy"}
    # Prefect relates the event to the flow run it was emitted in.
    assert f"prefect.flow-run.{flow_run_id}" in {r.id for r in batch.related}
    # The upload event is tied to the same batch.
    assert {"microstock.batch." + flow_run_id} <= {r.id for r in upload.related if r.role == "batch"}
    text = json.dumps([batch.model_dump(mode="json"), upload.model_dump(mode="json")])
    assert SECRET not in text and "sftp://" not in text and "timed out" not in text
