"""The test server's Batch API itself: what a create must look like, as the real service takes it."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.gemini import error, fake_gemini  # noqa: F401

SERVED = "gemini-3.5-flash-lite"


def create(fake, body: dict, model: str = SERVED) -> httpx.Response:
    return httpx.post(f"{fake.url}/v1beta/models/{model}:batchGenerateContent", json=body)


def batch_of(*requests: dict, display_name: str | None = "mx") -> dict:
    batch: dict = {"inputConfig": {"requests": {"requests": [{"request": r, "metadata": {"asset_id": str(i)}}
                                                             for i, r in enumerate(requests)]}}}
    if display_name is not None:
        batch["displayName"] = display_name
    return {"batch": batch}


HELLO = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


def test_a_valid_create_makes_a_pending_job_and_records_its_requests(fake_gemini):
    r = create(fake_gemini, batch_of(HELLO, HELLO))
    assert r.status_code == 200
    meta = r.json()["metadata"]
    assert r.json()["name"].startswith("batches/") and meta["state"] == "BATCH_STATE_PENDING"
    assert meta["displayName"] == "mx" and meta["model"] == f"models/{SERVED}"
    assert fake_gemini.batch.created == 1 and len(fake_gemini.batch.requests) == 2
    assert fake_gemini.batch.requests[0].path == f"/v1beta/models/{SERVED}:generateContent"


@pytest.mark.parametrize("body, status, message", [
    (batch_of(dict(HELLO, generationConfig={"temprature": 1})), 400, 'Unknown name "temprature"'),
    (batch_of(dict(HELLO, extra=1)), 400, 'Unknown name "extra"'),
    (batch_of(HELLO, display_name=None), 400, "display_name is required"),
    ({"batch": {"displayName": "mx", "inputConfig": {"requests": {"requests": []}}}}, 400, "must not be empty"),
    ({"batch": dict(batch_of(HELLO)["batch"], colour="red")}, 400, 'Unknown name "colour"'),
])
def test_a_create_the_real_service_would_refuse_is_refused_whole(fake_gemini, body, status, message):
    fake_gemini.push(error(503))
    r = create(fake_gemini, body)
    assert r.status_code == status and message in r.json()["error"]["message"]
    assert fake_gemini.batch.created == 0 and fake_gemini.batch.jobs == {}
    r = httpx.post(f"{fake_gemini.url}/v1beta/models/{SERVED}:generateContent", json=HELLO)
    assert r.status_code == 503  # the scripted reply was not spent on the refused create


def test_retired_model_and_wrong_api_version_get_the_real_404s(fake_gemini):
    r = create(fake_gemini, batch_of(HELLO), model="gemini-2.5-flash")
    assert r.status_code == 404 and "no longer available" in r.json()["error"]["message"]
    r = httpx.get(f"{fake_gemini.url}/v1/batches")
    assert r.status_code == 404 and "was not found on this server" in r.json()["error"]["message"]
    r = httpx.get(f"{fake_gemini.url}/v1beta/batches/unknown")
    assert r.status_code == 404 and r.json()["error"]["message"] == "Requested entity was not found."


def test_an_error_reply_becomes_a_per_request_status_with_the_grpc_code(fake_gemini):
    fake_gemini.push(error(400), error(429), error(503))
    name = create(fake_gemini, batch_of(HELLO, HELLO, HELLO, HELLO)).json()["name"]
    httpx.get(f"{fake_gemini.url}/v1beta/{name}")
    job = httpx.get(f"{fake_gemini.url}/v1beta/{name}").json()
    assert job["done"] is True and job["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    out = job["metadata"]["output"]["inlinedResponses"]["inlinedResponses"]
    assert [o.get("error", {}).get("code") for o in out] == [3, 8, 14, None]
    assert [o["metadata"]["asset_id"] for o in out] == ["0", "1", "2", "3"]  # input order, metadata echoed
    assert "candidates" in out[3]["response"]
    assert job["metadata"]["batchStats"] == {"requestCount": "4", "successfulRequestCount": "1",
                                             "failedRequestCount": "3", "pendingRequestCount": "0"}
