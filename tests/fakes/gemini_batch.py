"""The Batch API of the fake Gemini server (:mod:`tests.fakes.gemini` routes these paths here).

Paths, as google-genai 3.6.1 calls them (``google/genai/batches.py``) under the
server's API version:

* ``POST models/{model}:batchGenerateContent`` — create. The body must be
  ``{"batch": {"displayName", "inputConfig": {"requests": {"requests": [
  {"request": {...generateContent body...}, "metadata": {...}}]}}}}`` (or
  ``inputConfig.fileName``, refused here: the fake has no Files API). The
  model is checked, and every inline request is checked like a
  ``generateContent`` body (:func:`tests.fakes.gemini.refusal`); the first
  refusal refuses the whole create, as proto parsing of the body would. A
  missing ``displayName`` (the reference says "Required"), an unknown
  ``batch`` field or an empty request list is a 400 INVALID_ARGUMENT; a body
  over :attr:`FakeBatches.max_body_bytes` (Google: inline requests "under
  20MB") is a 400 "Request payload size exceeds the limit" (the real answer
  over the limit was not observed: docs/GEMINI.md).
* ``GET batches/{id}`` — the job; ``GET batches?pageSize=&pageToken=`` — the
  jobs, newest first, without their output (``operations`` +
  ``nextPageToken``; default page size :data:`PAGE_SIZE`);
  ``POST batches/{id}:cancel`` — ``{}``; a job not yet ended becomes
  CANCELLED, an ended one stays as it is. An unknown id is the real 404
  NOT_FOUND "Requested entity was not found.".

A job resource has the REST shape the SDK parses (``_BatchJob_from_mldev``):
``name`` ``batches/<id>``, ``metadata`` with ``displayName``, ``model``,
``state`` ``BATCH_STATE_*``, ``createTime``, ``updateTime``, ``endTime``,
``batchStats``, and for a SUCCEEDED job ``output.inlinedResponses.inlinedResponses``
— one item per inline request, in input order, each with the request's
``metadata`` and either the ``response`` (a generateContent body) or the
``error`` (a ``google.rpc.Status``: gRPC ``code`` number and ``message``; no
``details``: google-genai 3.6.1 types ``JobError.details`` as ``list[str]``
and fails to read a job holding detail objects, and whether the service puts
any there was not confirmed).

Controls for tests (on ``fake.batch``):

* states: a job is created PENDING; each ``GET`` of it moves it one step,
  PENDING → RUNNING → its end. With :attr:`FakeBatches.finish_after_s` set,
  gets and lists show it RUNNING until that many seconds after the create,
  then its end.
* :attr:`FakeBatches.end_as` — how each created job ends, in creation order:
  ``"succeeded"`` (when the list is empty), ``"failed"``, ``"expired"``,
  ``"cancelled"``; or a callable ``(job) -> str``.
* answers: when a job succeeds, each inline request is answered, in order, by
  the same machinery as ``generateContent`` (the ``fake.push`` queue first,
  then ``fake.default``), so a test pushes e.g. five error replies among 30.
  A 200 reply becomes the item's ``response``; an error reply becomes its
  ``error`` (HTTP status → gRPC code, same message); a reply that is not
  JSON or drops the connection becomes a 13 INTERNAL error.
* :attr:`FakeBatches.echo_metadata` — False: responses come back without
  the requests' ``metadata``, as reported of the real service
  (googleapis/python-genai#2008).
* records: :attr:`FakeBatches.jobs` (by name), :attr:`FakeBatches.requests`
  (every accepted inline request as a :class:`tests.fakes.gemini.Request`
  with the path its ``generateContent`` would have, so it can be compared
  with a sync request), :attr:`FakeBatches.created` (creates accepted).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

#: Jobs per list page when the request names no ``pageSize`` (the real default was not confirmed).
PAGE_SIZE = 25
#: google.rpc.Code numbers of the status names the fake's error replies carry.
GRPC_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
              "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
              "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
              "DATA_LOSS": 15, "UNAUTHENTICATED": 16}
ENDS = ("succeeded", "failed", "expired", "cancelled")
BATCH_FIELDS = frozenset({"displayName", "inputConfig", "priority", "webhookConfig", "model"})


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class FakeBatchJob:
    """One job as the fake holds it."""

    name: str
    display_name: str
    model: str
    #: The inline items as sent: ``{"request": {...}, "metadata": {...}}``.
    items: list[dict]
    end_as: str
    created_at: float = field(default_factory=time.monotonic)
    create_time: str = field(default_factory=_now)
    update_time: str = field(default_factory=_now)
    end_time: str | None = None
    state: str = "PENDING"
    #: The inline responses, once it succeeded.
    output: list[dict] | None = None

    @property
    def ended(self) -> bool:
        return self.state in ("SUCCEEDED", "FAILED", "EXPIRED", "CANCELLED")

    def resource(self, with_output: bool = True) -> dict:
        """The job in the REST shape of ``batches.get`` (an Operation whose metadata is the batch)."""
        n = len(self.items)
        done = len(self.output or [])
        failed = sum(1 for r in self.output or [] if "error" in r)
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{self.model}", "displayName": self.display_name, "name": self.name,
            "createTime": self.create_time, "updateTime": self.update_time, "state": f"BATCH_STATE_{self.state}",
            "batchStats": {"requestCount": str(n), "successfulRequestCount": str(done - failed),
                           "failedRequestCount": str(failed), "pendingRequestCount": str(n - done)},
        }
        if self.end_time:
            meta["endTime"] = self.end_time
        if with_output and self.output is not None:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": self.output}}
        body: dict[str, Any] = {"name": self.name, "metadata": meta}
        if self.ended:
            body["done"] = True
        if self.state == "FAILED":
            body["error"] = {"code": 13, "message": "The batch failed (fake)."}
        return body


class FakeBatches:
    """The batch jobs of one fake server. ``request_of(model, body)`` builds a Request for an inline
    request; ``refuse(req)`` is the server's refusal (None: accepted); ``reply(req)`` the next scripted
    reply; ``reply_type`` and ``error`` build replies."""

    def __init__(self, api_version: str, *, request_of: Callable, refuse: Callable, reply: Callable,
                 reply_type: type, error: Callable) -> None:
        self.api_version = api_version
        self._request_of, self._refuse, self._reply = request_of, refuse, reply
        self._ok, self._error = (lambda body: reply_type(body=body)), error
        #: Seconds after its create when a job ends (None: it ends on its second GET).
        self.finish_after_s: float | None = None
        #: How created jobs end, consumed in creation order; or a callable of the job.
        self.end_as: list[str] | Callable[[FakeBatchJob], str] = []
        #: False: answers come back without the requests' metadata.
        self.echo_metadata = True
        #: The largest create body accepted, in bytes.
        self.max_body_bytes = 20 * 1024 * 1024
        self.jobs: dict[str, FakeBatchJob] = {}
        self.requests: list = []
        self.created = 0
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    def handle(self, method: str, path: str, req) -> Any:
        """The reply to a batch path, or None when ``path`` is not one."""
        v = re.escape(self.api_version)
        route = urlsplit(path).path
        if method == "POST" and (m := re.match(rf"^/{v}/models/([^/:]+):batchGenerateContent$", route)):
            return self._create(m.group(1), req)
        if method == "POST" and (m := re.match(rf"^/{v}/batches/([^/:]+):cancel$", route)):
            return self._cancel(f"batches/{m.group(1)}")
        if method == "GET" and (m := re.match(rf"^/{v}/batches/([^/:]+)$", route)):
            return self._get(f"batches/{m.group(1)}")
        if method == "GET" and re.match(rf"^/{v}/batches$", route):
            return self._list(parse_qs(urlsplit(path).query))
        return None

    # --- endpoints -------------------------------------------------------------------

    def _invalid(self, message: str):
        return self._error(400, message, status="INVALID_ARGUMENT")

    def _create(self, model: str, req) -> Any:
        if len(req.raw_body) > self.max_body_bytes:
            return self._invalid(f"Request payload size exceeds the limit: {self.max_body_bytes} bytes.")
        body = req.json if isinstance(req.json, dict) else {}
        batch = body.get("batch")
        if set(body) != {"batch"} or not isinstance(batch, dict):
            return self._invalid("Invalid JSON payload received: the body must be one \"batch\" object.")
        unknown = [k for k in batch if k not in BATCH_FIELDS]
        if unknown:
            return self._invalid(f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at 'batch': "
                                 "Cannot find field.")
        if not batch.get("displayName"):
            return self._invalid("batch.display_name is required.")
        source = batch.get("inputConfig") or {}
        if "fileName" in source:
            return self._invalid("This fake serves inline requests only.")
        items = (source.get("requests") or {}).get("requests")
        if not isinstance(items, list) or not items:
            return self._invalid("batch.input_config.requests.requests must not be empty.")
        accepted = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or set(item) - {"request", "metadata"} or "request" not in item:
                return self._invalid(f"Invalid JSON payload received at 'batch.input_config.requests.requests[{i}]'.")
            inline = self._request_of(model, item["request"])
            refused = self._refuse(inline)
            if refused is not None:
                return refused
            accepted.append(inline)
        with self._lock:
            name = f"batches/fake{next(self._ids):06d}"
            job = FakeBatchJob(name, batch["displayName"], model, items, end_as="succeeded")
            job.end_as = self.end_as(job) if callable(self.end_as) else (self.end_as.pop(0) if self.end_as else
                                                                         "succeeded")
            assert job.end_as in ENDS, f"fake.batch.end_as: {job.end_as!r} is not one of {ENDS}"
            self.jobs[name] = job
            self.requests.extend(accepted)
            self.created += 1
            return self._ok(job.resource())

    def _missing(self):
        return self._error(404, "Requested entity was not found.", status="NOT_FOUND")

    def _get(self, name: str) -> Any:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                return self._missing()
            self._advance(job, step=True)
            return self._ok(job.resource())

    def _list(self, query: dict[str, list[str]]) -> Any:
        size = int((query.get("pageSize") or [PAGE_SIZE])[0])
        start = int((query.get("pageToken") or ["0"])[0])
        with self._lock:
            jobs = list(reversed(self.jobs.values()))
            for job in jobs[start:start + size]:
                self._advance(job, step=False)
            body: dict[str, Any] = {"operations": [j.resource(with_output=False) for j in jobs[start:start + size]]}
        if start + size < len(jobs):
            body["nextPageToken"] = str(start + size)
        return self._ok(body)

    def _cancel(self, name: str) -> Any:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                return self._missing()
            if not job.ended:
                self._end(job, "CANCELLED")
            return self._ok({})

    # --- progression ------------------------------------------------------------------

    def _advance(self, job: FakeBatchJob, *, step: bool) -> None:
        if job.ended:
            return
        if self.finish_after_s is not None:
            if time.monotonic() - job.created_at >= self.finish_after_s:
                self._end(job, job.end_as.upper())
            elif job.state == "PENDING":
                job.state, job.update_time = "RUNNING", _now()
        elif step:
            if job.state == "PENDING":
                job.state, job.update_time = "RUNNING", _now()
            else:
                self._end(job, job.end_as.upper())

    def _end(self, job: FakeBatchJob, state: str) -> None:
        if state == "SUCCEEDED":
            job.output = [self._answer(job.model, item) for item in job.items]
        job.state, job.update_time = state, _now()
        job.end_time = job.update_time

    def _answer(self, model: str, item: dict) -> dict:
        reply = self._reply(self._request_of(model, item["request"]))
        out: dict[str, Any] = {}
        body = reply.body
        if reply.drop or not isinstance(body, dict):
            out["error"] = {"code": 13, "message": "Internal error encountered."}
        elif reply.status == 200:
            out["response"] = body
        else:
            err = body.get("error", {})
            out["error"] = {"code": GRPC_CODES.get(err.get("status", ""), 2), "message": err.get("message", "")}
        if "metadata" in item and self.echo_metadata:
            out["metadata"] = item["metadata"]
        return out

