"""A fake Gemini REST server on 127.0.0.1 for the real google-genai SDK to talk to.

It speaks ``POST /{api_version}/models/{model}:generateContent`` over real HTTP
(and the Batch API: ``fake.batch``, :mod:`tests.fakes.gemini_batch` says what it
serves and how tests steer it; the Models API, ``models.list`` and ``models.get``:
``fake.models``, :mod:`tests.fakes.gemini_models`; the Files API: ``fake.files``; the
Interactions API that makes clips: ``fake.interactions``, :mod:`tests.fakes.gemini_interactions`), and only
what the real service accepts, before
any script is consulted:

* only its one API version (``api_version``, default ``v1beta``); any other
  path gets the real 404 body;
* only models it serves (:data:`SERVED_MODELS`): a retired one
  (:data:`RETIRED_MODELS`) gets the real 404 "is no longer available" body, an
  unknown one the real "is not found for API version" body;
* only known request fields: an unknown top-level or ``generationConfig``
  field, or a ``responseSchema`` keyword the proto ``Schema`` does not have,
  gets the real 400 "Invalid JSON payload received. Unknown name …" body.

These refusals are recorded like every request. What it answers otherwise is
scripted per request: replies queued with
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
import io
import json
import re
import socket
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest
from PIL import Image

from tests.fakes.gemini_batch import FakeBatches
from tests.fakes.gemini_files import FakeFiles
from tests.fakes.gemini_interactions import CLIP_MODELS, FakeInteractions
from tests.fakes.gemini_models import FakeModels

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
    #: More response headers (the Files API's ``x-goog-upload-url`` / ``x-goog-upload-status``).
    headers: dict[str, str] | None = None


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


def _usage(total: int, thoughts: int = 0) -> dict:
    """``usageMetadata``: 60 answer tokens, ``thoughts`` thinking tokens, the rest prompt (total includes all)."""
    usage = {"promptTokenCount": total - 60 - thoughts, "candidatesTokenCount": 60, "totalTokenCount": total}
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def answer_text(text: str, *, finish_reason: str = "STOP", tokens: int = 321, thoughts: int = 0) -> Reply:
    """200 with one candidate whose single part is ``text``."""
    return Reply(body={
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish_reason,
                        "index": 0}],
        "usageMetadata": _usage(tokens, thoughts),
        "modelVersion": "fake",
    })


def answer_json(obj: Any = None, *, tokens: int = 321, thoughts: int = 0) -> Reply:
    """200 with ``obj`` (default: valid stock metadata) as the JSON text of the answer."""
    return answer_text(json.dumps(GOOD_METADATA if obj is None else obj), tokens=tokens, thoughts=thoughts)


def answer_image(data: bytes, mime_type: str = "image/png", *, tokens: int = 1290,
                 with_text: str | None = None) -> Reply:
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
                        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                           "blocked": True}]}],
        "usageMetadata": _usage(100),
    })


def prompt_blocked(reason: str = "SAFETY") -> Reply:
    """200 with no candidates: the prompt itself was blocked."""
    return Reply(body={"promptFeedback": {"blockReason": reason}, "usageMetadata": _usage(80)})


def truncated(obj: Any = None, reason: str = "MAX_TOKENS") -> Reply:
    """200 stopped at ``reason`` (MAX_TOKENS, CONTINUATION) in the middle of the JSON."""
    text = json.dumps(GOOD_METADATA if obj is None else obj)
    return answer_text(text[: len(text) // 2], finish_reason=reason)


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
           408: "DEADLINE_EXCEEDED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
           504: "DEADLINE_EXCEEDED"}


def error(code: int, message: str = "", *, status: str | None = None, details: list[dict] | None = None) -> Reply:
    """An error with the real body shape ``{"error": {code, message, status, details?}}``."""
    err: dict[str, Any] = {"code": code, "message": message or f"fake error {code}",
                           "status": status or _STATUS.get(code, "UNKNOWN")}
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


def rate_limited(retry_delay: str | None = "2s", quota_id: str = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                 *, retry_in: str | None = None) -> Reply:
    """429 RESOURCE_EXHAUSTED with QuotaFailure and (unless None) RetryInfo, as the real API sends;
    ``retry_in`` ends the message with "Please retry in <retry_in>." as current answers do."""
    details = [quota_failure(quota_id)]
    if retry_delay is not None:
        details.append(retry_info(retry_delay))
    message = "You exceeded your current quota, please check your plan and billing details."
    return error(429, message + (f"\nPlease retry in {retry_in}." if retry_in else ""), details=details)


def daily_quota() -> Reply:
    """429 whose QuotaFailure names a per-day quota (RetryInfo present too, as in real answers)."""
    return rate_limited("43s", quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier")


def key_invalid() -> Reply:
    """400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID: what a wrong key gets."""
    return error(400, "API key not valid. Please pass a valid API key.", details=[{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
        "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}])


def location_refused() -> Reply:
    """400 FAILED_PRECONDITION for a request from an unsupported region (no details, as observed)."""
    return error(400, "User location is not supported for the API use.", status="FAILED_PRECONDITION")


#: The image sizes each image model makes (docs/GEMINI.md); asked for one it does not make, it makes its largest.
IMAGE_SIZES = {"gemini-3.1-flash-image": ("512", "1K", "2K", "4K"), "gemini-3-pro-image": ("1K", "2K", "4K"),
               "gemini-3.1-flash-lite-image": ("1K",)}
#: The long side at 1:1 of each size; other ratios keep about the same pixel count.
_SIDE = {"512": 512, "1K": 1024, "2K": 2048, "4K": 4096}


def generated_image(req: "Request") -> Reply:
    """The image a model would make for this request: its ``imageSize`` (or its largest) at its ``aspectRatio``."""
    config = (req.json or {}).get("generationConfig", {})
    image = config.get("imageConfig") or config.get("image_config") or {}
    asked = image.get("imageSize") or image.get("image_size") or "1K"
    sizes = IMAGE_SIZES.get(req.model, ("1K",))
    side = _SIDE[asked if asked in sizes else sizes[-1]]
    w, h = (int(x) for x in (image.get("aspectRatio") or image.get("aspect_ratio") or "1:1").split(":"))
    width, height = round(side * (w / h) ** 0.5 / 16) * 16, round(side * (h / w) ** 0.5 / 16) * 16
    # Noise drawn at 1/16 of the size and enlarged in blocks: each image its own (the near-duplicate guard lets
    # them all through) at the full size, yet ~100 KB of PNG made in a fraction of a second (full noise: ~10 MB, 5 s).
    noise = Image.effect_noise((max(1, width // 16), max(1, height // 16)), 40).convert("RGB")
    buf = io.BytesIO()
    noise.resize((width, height), Image.Resampling.NEAREST).save(buf, "PNG")
    return answer_image(buf.getvalue(), tokens=1680)


def image_or_metadata(req: "Request") -> Reply:
    """An image for an image request (``responseModalities`` IMAGE), else valid stock metadata."""
    config = (req.json or {}).get("generationConfig", {})
    modalities = config.get("responseModalities") or config.get("response_modalities") or []
    return generated_image(req) if "IMAGE" in modalities else answer_json()


# --- what the real service accepts (docs/GEMINI.md: sources) ---------------------------

#: Models the service answers (generally available on 2026-11-30, Google's models page).
SERVED_MODELS = frozenset({"gemini-3.8-flash", "gemini-3.6-flash", "gemini-3.5-flash-lite", "gemini-3.1-flash-lite",
                           "gemini-3.7-flash", "gemini-3.5-flash", "gemini-3.1-flash-image", "gemini-3-pro-image",
                           "gemini-3.1-flash-lite-image"})
#: Models shut down: 404 "is no longer available" (the wording observed after a shutdown).
RETIRED_MODELS = frozenset({"gemini-2.0-flash", "gemini-2.0-flash-lite", "gemini-2.5-flash", "gemini-2.5-flash-lite",
                            "gemini-2.5-flash-image", "gemini-3-pro-image-preview", "gemini-3.1-flash-image-preview"})
#: Top-level fields of a generateContent request body.
REQUEST_FIELDS = frozenset({"contents", "systemInstruction", "generationConfig", "safetySettings", "tools",
                            "toolConfig", "cachedContent"})
#: ``generationConfig`` fields the SDK maps for the Developer API (google-genai 3.6.1).
GENERATION_CONFIG_FIELDS = frozenset({
    "temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences", "responseLogprobs",
    "logprobs", "presencePenalty", "frequencyPenalty", "seed", "responseMimeType", "responseSchema",
    "responseJsonSchema", "responseModalities", "mediaResolution", "speechConfig", "thinkingConfig", "imageConfig",
    "enableEnhancedCivicAnswers", "serviceTier"})
#: Values of ``generationConfig.mediaResolution`` (the proto enum ``GenerationConfig.MediaResolution``, as the SDK's
#: ``types.MediaResolution`` lists them).
MEDIA_RESOLUTIONS = frozenset({"MEDIA_RESOLUTION_UNSPECIFIED", "MEDIA_RESOLUTION_LOW", "MEDIA_RESOLUTION_MEDIUM",
                               "MEDIA_RESOLUTION_HIGH"})
#: Fields of the proto ``Schema`` behind ``responseSchema`` (``additionalProperties`` is not one).
SCHEMA_FIELDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default", "items", "minimum", "maximum"})


def _known(key: str, fields: frozenset[str]) -> bool:
    """Proto JSON parsing takes a field's lowerCamelCase name or its proto (snake_case) name; the SDK sends both."""
    head, *rest = key.split("_")
    return key in fields or head + "".join(w[:1].upper() + w[1:] for w in rest) in fields


def model_not_found(model: str, api_version: str) -> Reply:
    return error(404, f"models/{model} is not found for API version {api_version}, or is not supported for "
                      "generateContent. Call ListModels to see the list of available models and their supported "
                      "methods.")


def model_retired(model: str) -> Reply:
    return error(404, f"This model models/{model} is no longer available. Please update your code to use a newer "
                      "model for the latest features and improvements.")


def unknown_field(name: str, where: str = "") -> Reply:
    """The real 400 for a field the API does not have (``where``: its proto path, empty at the top)."""
    message = f"Invalid JSON payload received. Unknown name \"{name}\"" + (f" at '{where}'" if where else "") + \
        ": Cannot find field."
    violation = {"description": message} | ({"field": where} if where else {})
    return error(400, message, details=[{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                         "fieldViolations": [violation]}])


def _schema_refusal(schema: Any, where: str) -> Reply | None:
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        if not _known(key, SCHEMA_FIELDS):
            return unknown_field(key, where)
        if key == "properties" and isinstance(value, dict):
            for i, sub in enumerate(value.values()):
                found = _schema_refusal(sub, f"{where}.properties[{i}].value")
                if found:
                    return found
        elif key == "items":
            found = _schema_refusal(value, f"{where}.items")
            if found:
                return found
        elif key in ("anyOf", "any_of") and isinstance(value, list):
            for i, sub in enumerate(value):
                found = _schema_refusal(sub, f"{where}.any_of[{i}]")
                if found:
                    return found
    return None


def refusal(req: "Request", api_version: str) -> Reply | None:
    """What the real service answers a request it does not accept; None when it accepts it."""
    model = req.model
    if model in RETIRED_MODELS:
        return model_retired(model)
    if model in CLIP_MODELS:  # the words a live generateContent to Omni Flash got (TanStack/ai#871)
        return error(400, "This model only supports Interactions API.", status="INVALID_ARGUMENT")
    if model not in SERVED_MODELS:
        return model_not_found(model, api_version)
    body = req.json if isinstance(req.json, dict) else {}
    for key in body:
        if not _known(key, REQUEST_FIELDS):
            return unknown_field(key)
    config = body.get("generationConfig") or body.get("generation_config") or {}
    for key in config:
        if not _known(key, GENERATION_CONFIG_FIELDS):
            return unknown_field(key, "generation_config")
    resolution = config.get("mediaResolution", config.get("media_resolution"))
    if resolution is not None and resolution not in MEDIA_RESOLUTIONS:  # the proto enum's names only
        return error(400, "Invalid value at 'generation_config.media_resolution' (type.googleapis.com/google.ai."
                          f"generativelanguage.{api_version}.GenerationConfig.MediaResolution), \"{resolution}\"",
                     status="INVALID_ARGUMENT")
    return _schema_refusal(config.get("responseSchema") or config.get("response_schema"),
                           "generation_config.response_schema")


# --- the server ---------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: Headers and body go out in two writes; with Nagle on, the body waits for the client's
    #: delayed ACK (≈ 40 ms per reply), which no real endpoint adds.
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_DELETE(self):
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        req = Request(method, self.path, list(self.headers.items()), raw, arrived, decoded)
        fake = self.server.fake
        route = method == "POST" and re.match(
            rf"^/{re.escape(fake.api_version)}/models/[^/:?]+:generateContent(\?.*)?$", self.path)
        refused = (refusal(req, fake.api_version) or fake.files.refusal(req)) if route else None
        if route and refused is None:
            reply = fake._next_reply(req)
        else:  # a batch or models path (tests/fakes/gemini_batch.py, gemini_models.py), or what the real
            fake._record(req)  # endpoint says to a path it does not serve or a request it does not take
            reply = (refused or fake.batch.handle(method, self.path, req) or fake.models.handle(method, self.path)
                     or fake.files.handle(method, self.path, req) or fake.interactions.handle(method, self.path, req)
                     or error(404, f"The requested URL {self.path.split('?', 1)[0]} was not found on this server."))
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
            for name, value in (reply.headers or {}).items():
                self.send_header(name, value)
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

    def __init__(self, api_version: str = "v1beta") -> None:
        #: The one API version served (the project's default, ``gemini.api_version``).
        self.api_version = api_version
        self.requests: list[Request] = []
        self.default: Callable[[Request], Reply] = lambda req: answer_json()
        self._queue: deque[Reply | Callable[[Request], Reply]] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-gemini", daemon=True)
        #: The Batch API: its jobs, records and controls (tests/fakes/gemini_batch.py).
        self.batch = FakeBatches(api_version, request_of=self._inline_request, reply=self._reply_for,
                                 refuse=lambda req: refusal(req, api_version), reply_type=Reply, error=error)
        #: The Models API: what it lists, scripted failures, records (tests/fakes/gemini_models.py).
        self.models = FakeModels(api_version, SERVED_MODELS | CLIP_MODELS, image_models=IMAGE_SIZES,
                                 reply_type=Reply, error=error)
        #: The Files API: uploads, PROCESSING → ACTIVE, deletion (tests/fakes/gemini_files.py).
        self.files = FakeFiles(api_version, base=lambda: self.url, reply_type=Reply, error=error)
        #: The Interactions API: clip generation, in_progress → completed (tests/fakes/gemini_interactions.py).
        self.interactions = FakeInteractions(api_version, reply_type=Reply, error=error)

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
        self._record(req)
        return self._reply_for(req)

    def _reply_for(self, req: Request) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        return item(req) if callable(item) else item

    def _inline_request(self, model: str, body: dict) -> Request:
        """An inline request of a batch as the ``generateContent`` request it stands for."""
        return Request("POST", f"/{self.api_version}/models/{model}:generateContent", [],
                       json.dumps(body).encode(), time.monotonic(), body)


@contextmanager
def gemini_for_module() -> Iterator[tuple["FakeGemini", pytest.MonkeyPatch]]:
    """A running :class:`FakeGemini` with the SDK pointed at it and the test key set, for a module-scoped fixture
    (which cannot use ``monkeypatch``); its MonkeyPatch is given for more, and everything is undone after."""
    mp = pytest.MonkeyPatch()
    fake = FakeGemini().start()
    mp.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    mp.setenv("GEMINI_API_KEY", FAKE_KEY)
    mp.delenv("GOOGLE_API_KEY", raising=False)
    try:
        yield fake, mp
    finally:
        fake.stop()
        mp.undo()


@pytest.fixture
def fake_gemini(monkeypatch):
    """A running :class:`FakeGemini`; the SDK is pointed at it through ``GOOGLE_GEMINI_BASE_URL``. The process's
    rate limiters start afresh with it (a pause earned against another test's server does not carry over)."""
    from tasks.gemini import ratelimit

    monkeypatch.setattr(ratelimit, "_shared", {})
    fake = FakeGemini().start()
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)
    yield fake
    fake.stop()
