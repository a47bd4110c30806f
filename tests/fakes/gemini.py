"""A fake Gemini REST server on 127.0.0.1 for the real google-genai SDK to talk to.

It speaks ``POST /{v1,v1beta}/models/{model}:generateContent`` over real HTTP
(any other path gets the real 404 body, recorded but not scripted).
What it answers is scripted per request: replies queued with
:meth:`FakeGemini.push` are used first, in order; when the queue is empty the
``default`` callable builds the reply from the request (a valid metadata
answer unless a test sets another). Every request is recorded whole (path,
every header, raw and decoded body, arrival time) so tests can check what the
SDK really sent, e.g. that the API key travels only in ``x-goog-api-key``.

Replies are built with the small functions below; their bodies have the
shapes the real API returns (``{"error": {"code", "message", "status",
"details"}}`` with ``google.rpc.RetryInfo`` / ``QuotaFailure`` / ``ErrorInfo``;
``promptFeedback.blockReason``; ``finishReason``; ``usageMetadata``;
``inlineData`` images).

Use the :func:`fake_gemini` fixture: it starts a server for one test and sets
``GOOGLE_GEMINI_BASE_URL`` to it (the SDK reads that variable itself).
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

#: A key shaped like a real one; tests assert it never leaks past the request header.
FAKE_KEY = "AIzaSyFAKE-test-key-0123456789abcdefghij"

GOOD_METADATA = {
    "title": "Sunset over a calm sea",
    "description": "A glowing sun setting over a calm sea under an orange sky.",
    "keywords": ["sunset", "sea", "sun", "horizon", "ocean", "evening", "calm", "orange sky", "water", "dusk"],
    "adobe_category": 11,
    "category_hints": ["landscape", "nature"],
    "dreamstime_hints": ["sunsets", "seascapes"],
}


@dataclass
class Reply:
    """What the server does with one request."""

    status: int = 200
    #: JSON-able body, or raw bytes sent as they are.
    body: Any = None
    content_type: str = "application/json; charset=UTF-8"
    #: Seconds to wait before answering (interrupted when the server stops).
    delay: float = 0.0
    #: Close the connection without sending anything.
    drop: bool = False


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    #: Request target as sent, including any query string.
    path: str
    #: Every header, in order, as (name, value).
    headers: list[tuple[str, str]]
    raw_body: bytes
    #: ``time.monotonic()`` when the request line arrived.
    at: float
    json: Any = None

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def model(self) -> str:
        """The model named in the path (``/v1beta/models/<model>:generateContent``)."""
        return self.path.split("?", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]

    def inline_images(self) -> list[tuple[str, bytes]]:
        """(mime type, bytes) of every inline image part sent, decoding either base64 alphabet."""
        out = []
        for content in (self.json or {}).get("contents", []):
            for part in content.get("parts", []):
                blob = part.get("inlineData") or part.get("inline_data")
                if blob:
                    mime = blob.get("mimeType") or blob.get("mime_type")
                    data = blob["data"].replace("+", "-").replace("/", "_")
                    out.append((mime, base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))))
        return out

    def texts(self) -> list[str]:
        """The text parts sent (the prompt)."""
        return [p["text"] for c in (self.json or {}).get("contents", []) for p in c.get("parts", []) if "text" in p]


# --- replies ------------------------------------------------------------------------


def _usage(total: int) -> dict:
    return {"promptTokenCount": total - 60, "candidatesTokenCount": 60, "totalTokenCount": total}


def answer_text(text: str, *, finish_reason: str = "STOP", tokens: int = 321) -> Reply:
    """200 with one candidate whose single part is ``text``."""
    return Reply(body={
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish_reason, "index": 0}],
        "usageMetadata": _usage(tokens),
        "modelVersion": "fake",
    })


def answer_json(obj: Any = None, *, tokens: int = 321) -> Reply:
    """200 with ``obj`` (default: valid stock metadata) as the JSON text of the answer."""
    return answer_text(json.dumps(GOOD_METADATA if obj is None else obj), tokens=tokens)


def answer_image(data: bytes, mime_type: str = "image/png", *, tokens: int = 1290, with_text: str | None = None) -> Reply:
    """200 with an image part (``inlineData``, standard base64 as the real API sends)."""
    parts: list[dict] = [{"text": with_text}] if with_text else []
    parts.append({"inlineData": {"mimeType": mime_type, "data": base64.b64encode(data).decode()}})
    return Reply(body={
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _usage(tokens),
    })


def finished(reason: str) -> Reply:
    """200 whose candidate stopped for ``reason`` (SAFETY, IMAGE_SAFETY ...) with no content."""
    return Reply(body={
        "candidates": [{"finishReason": reason, "index": 0,
                        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]}],
        "usageMetadata": _usage(100),
    })


def prompt_blocked(reason: str = "SAFETY") -> Reply:
    """200 with no candidates: the prompt itself was blocked."""
    return Reply(body={"promptFeedback": {"blockReason": reason}, "usageMetadata": _usage(80)})


def truncated(obj: Any = None) -> Reply:
    """200 stopped at MAX_TOKENS in the middle of the JSON."""
    text = json.dumps(GOOD_METADATA if obj is None else obj)
    return answer_text(text[: len(text) // 2], finish_reason="MAX_TOKENS")


def garbage() -> Reply:
    """200 whose body is not JSON at all."""
    return Reply(body=b"<html><body>502 upstream hiccup</body></html>", content_type="text/html")


def drop() -> Reply:
    """Close the connection without a reply."""
    return Reply(drop=True)


def slow(seconds: float, then: Reply | None = None) -> Reply:
    """``then`` (default: valid metadata) after ``seconds``."""
    r = then or answer_json()
    return Reply(status=r.status, body=r.body, content_type=r.content_type, delay=seconds, drop=r.drop)


_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           408: "DEADLINE_EXCEEDED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def error(code: int, message: str = "", *, status: str | None = None, details: list[dict] | None = None) -> Reply:
    """An error with the real body shape ``{"error": {code, message, status, details?}}``."""
    err: dict[str, Any] = {"code": code, "message": message or f"fake error {code}", "status": status or _STATUS.get(code, "UNKNOWN")}
    if details is not None:
        err["details"] = details
    return Reply(status=code, body={"error": err})


def retry_info(delay: str) -> dict:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def quota_failure(quota_id: str) -> dict:
    return {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
        "quotaValue": "250",
    }]}


def rate_limited(retry_delay: str | None = "2s", quota_id: str = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier") -> Reply:
    """429 RESOURCE_EXHAUSTED with QuotaFailure and (unless None) RetryInfo, as the real API sends."""
    details = [quota_failure(quota_id)]
    if retry_delay is not None:
        details.append(retry_info(retry_delay))
    return error(429, "You exceeded your current quota, please check your plan and billing details.", details=details)


def daily_quota() -> Reply:
    """429 whose QuotaFailure names a per-day quota (RetryInfo present too, as in real answers)."""
    return rate_limited("43s", quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier")


def key_invalid() -> Reply:
    """400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID: what a wrong key gets."""
    return error(400, "API key not valid. Please pass a valid API key.", details=[{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
        "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}])


# --- the server ---------------------------------------------------------------------

_ROUTE = re.compile(r"^/(v1|v1beta)/models/[^/:?]+:generateContent(\?.*)?$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: Headers and body go out in two writes; with Nagle on, the body waits for the client's
    #: delayed ACK (≈ 40 ms per reply), which no real endpoint adds.
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def do_POST(self):
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        req = Request("POST", self.path, list(self.headers.items()), raw, arrived, decoded)
        fake = self.server.fake
        if _ROUTE.match(self.path):
            reply = fake._next_reply(req)
        else:  # what the real endpoint says to a path it does not serve
            fake._record(req)
            reply = error(404, f"The requested URL {self.path.split('?', 1)[0]} was not found on this server.")
        if reply.delay and fake._stopping.wait(reply.delay):
            self.close_connection = True
            return
        if reply.drop:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (timeout) and closed the socket
            self.close_connection = True



class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: "FakeGemini"


class FakeGemini:
    """A Gemini REST endpoint on 127.0.0.1 with scripted replies and a record of every request."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.default: Callable[[Request], Reply] = lambda req: answer_json()
        self._queue: deque[Reply | Callable[[Request], Reply]] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-gemini", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeGemini":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def push(self, *replies: Reply | Callable[[Request], Reply]) -> None:
        """Queue replies (or functions of the request) for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    def _record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)

    def _next_reply(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            item = self._queue.popleft() if self._queue else self.default
        return item(req) if callable(item) else item


@pytest.fixture
def fake_gemini(monkeypatch):
    """A running :class:`FakeGemini`; the SDK is pointed at it through ``GOOGLE_GEMINI_BASE_URL``."""
    fake = FakeGemini().start()
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)
    yield fake
    fake.stop()
