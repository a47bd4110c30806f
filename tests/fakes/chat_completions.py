"""A fake OpenAI-compatible server on 127.0.0.1 for the real ``openai`` SDK to talk to: ``GET /v1/models`` and
``POST /v1/chat/completions``, and only what such servers accept, before any script is consulted:

* with a ``key`` set, only ``Authorization: Bearer <key>``; else 401 with OpenAI's ``invalid_api_key`` body;
* only models it lists (``models``); another gets OpenAI's 404 ``model_not_found`` body;
* only image parts whose ``data:`` URL decodes to a picture; else 400 ``invalid_image`` (the body OpenAI sends
  for an image it cannot read);
* any other path: 404.

Error bodies are ``{"error": {"message", "type", "param", "code"}}`` as OpenAI, Ollama, vLLM and LM Studio send
them. What it answers otherwise is scripted: replies queued with :meth:`FakeChat.push` first, in order, then
``default`` (a valid metadata answer as JSON content). ``ignores_response_format``: the answer comes as text in
a fenced block, as a model without structured output writes it. Every request is recorded.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from PIL import Image

from tests.fakes.gemini import GOOD_METADATA

FAKE_OPENAI_KEY = "sk-proj-FAKEtestkey0123456789abcdefghijklmnop"
MODEL = "qwen2.5vl:7b"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Close the connection without a reply.
    drop: bool = False


def error(status: int, message: str, code: str | None = None, kind: str = "invalid_request_error",
          headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers or {})


def answer(content: str | None = None, *, finish_reason: str = "stop", prompt_tokens: int = 900,
           completion_tokens: int = 120) -> Reply:
    """200 with one choice whose message content is ``content`` (default: valid metadata as JSON)."""
    return Reply(body={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1765000000, "model": MODEL,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": json.dumps(GOOD_METADATA) if content is None
                                 else content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}})


def fenced(obj: Any = None) -> Reply:
    """The metadata as a model without structured output writes it: prose and a fenced JSON block."""
    return answer("Here is the metadata:\n```json\n" + json.dumps(GOOD_METADATA if obj is None else obj, indent=2)
                  + "\n```\nI hope this helps.")


def rate_limited(retry_after: float | None = 2) -> Reply:
    return error(429, "Rate limit reached for requests", "rate_limit_exceeded", "requests",
                 {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {})


def server_error(status: int = 503) -> Reply:
    return error(status, "The server is overloaded or not ready yet.", None, "server_error")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    json: Any = None

    def images(self) -> list[bytes]:
        """The picture bytes of every image part sent."""
        return [base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                for message in (self.json or {}).get("messages", []) if isinstance(message.get("content"), list)
                for part in message["content"] if part.get("type") == "image_url"]


class FakeChat:
    """The server; ``url`` is its base URL (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self, *, key: str | None = None, models: tuple[str, ...] = (MODEL, "llama3.2:3b"),
                 ignores_response_format: bool = False, latency: float = 0.0) -> None:
        self.key, self.models, self.ignores_response_format = key, models, ignores_response_format
        #: Seconds a chat answer takes (the benchmark's model time: bench/describers.py); the tests leave it 0.
        self.latency = latency
        self.requests: list[Request] = []
        self.replies: deque[Reply] = deque()
        self.default: Callable[[Request], Reply] = lambda req: fenced() if self.ignores_response_format else answer()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._serve(self, "GET")

            def do_POST(self) -> None:
                fake._serve(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def chats(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _refusal(self, req: Request) -> Reply | None:
        """What a real server answers before any script: a wrong key, an unlisted model, an unreadable image."""
        if self.key and req.headers.get("authorization") != f"Bearer {self.key}":
            return error(401, "Incorrect API key provided: sk-proj-****. You can find your API key at "
                              "https://platform.openai.com/account/api-keys.", "invalid_api_key")
        if req.path == "/v1/models" and req.method == "GET":
            return Reply(body={"object": "list", "data": [{"id": m, "object": "model", "created": 1765000000,
                                                           "owned_by": "library"} for m in self.models]})
        if req.path != "/v1/chat/completions" or req.method != "POST":
            return error(404, "404 page not found", None, "not_found")
        model = (req.json or {}).get("model")
        if model not in self.models:
            return error(404, f"The model `{model}` does not exist or you do not have access to it.",
                         "model_not_found")
        for picture in req.images():
            try:
                with Image.open(io.BytesIO(picture)) as im:
                    im.load()
            except OSError:
                return error(400, "You uploaded an unsupported image. Please make sure your image is valid.",
                             "invalid_image")
        return None

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        req = Request(method, handler.path, {k.lower(): v for k, v in handler.headers.items()},
                      json.loads(raw) if raw else None)
        with self._lock:
            self.requests.append(req)
            reply = self._refusal(req)
            if reply is None:
                reply = self.replies.popleft() if self.replies else self.default(req)
        if self.latency and req.path.endswith("/chat/completions"):
            time.sleep(self.latency)
        if reply.drop:
            handler.close_connection = True
            return
        body = json.dumps(reply.body).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)
