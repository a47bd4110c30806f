"""The Models API of the fake Gemini server (:mod:`tests.fakes.gemini` routes these paths here).

Paths, as google-genai 3.6.1 calls them (``google/genai/models.py``: ``list`` with
``query_base`` True, its default, is ``GET {api_version}/models``) and as Google's
REST reference describes them (``ai.google.dev/api/rest/v1beta/models/list``, read
2026-12-01):

* ``GET models?pageSize=&pageToken=`` — ``{"models": [...], "nextPageToken"}``;
  "If unspecified, at most 50 models will be returned per page. This method
  returns at most 1000 models per page, even if you pass a larger pageSize";
  ``nextPageToken`` is left out on the last page ("If this field is omitted,
  there are no more pages"). A token this server did not hand out is a 400
  INVALID_ARGUMENT (the real wording for a bad token was not observed).
* ``GET models/{model}`` — one model, or the 404 NOT_FOUND the real service
  answers an unknown model with.

A model resource has the fields the SDK reads (``_Model_from_mldev``):
``name`` (``models/<id>``), ``baseModelId``, ``version``, ``displayName``,
``description``, ``inputTokenLimit``, ``outputTokenLimit``,
``supportedGenerationMethods``, ``temperature``, ``maxTemperature``, ``topP``,
``topK``, ``thinking``. Google publishes no status field: a model is served or
it is not listed.

Controls for tests (on ``fake.models``): :attr:`FakeModels.listed` (model id →
resource; add, change or delete entries), :meth:`FakeModels.push` (replies for
the next list or get requests, e.g. a 500 or a slow reply), :attr:`FakeModels.calls`
(every list and get request as it arrived), :attr:`FakeModels.max_page_size`.
"""

from __future__ import annotations

import base64
import threading
from collections import deque
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote, urlsplit

#: Page size when the request names none, and the most one page holds (Google's REST reference).
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000

#: Token limits per kind of model (Google's model pages: 1,048,576 / 65,536 for the Flash text models;
#: Google Cloud's Gemini 3.1 Flash Image page: 131,072 / 32,768).
_LIMITS = {"describe": (1_048_576, 65_536), "image": (131_072, 32_768)}
_GENERATE = ("generateContent", "countTokens", "createCachedContent", "batchGenerateContent")


def model_resource(model: str, *, use: str = "describe", methods: Iterable[str] = _GENERATE) -> dict:
    """The REST resource of ``model`` as ``models.list`` and ``models.get`` return it."""
    inputs, outputs = _LIMITS.get(use, _LIMITS["describe"])
    version = model.removeprefix("gemini-").split("-", 1)[0]
    return {
        "name": f"models/{model}", "baseModelId": model, "version": version,
        "displayName": " ".join(w.capitalize() for w in model.split("-")),
        "description": f"Fake {model}", "inputTokenLimit": inputs, "outputTokenLimit": outputs,
        "supportedGenerationMethods": list(methods), "temperature": 1.0, "maxTemperature": 2.0, "topP": 0.95,
        "topK": 64, "thinking": use == "describe",
    }


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"models:{offset}".encode()).decode()


def _offset(token: str) -> int | None:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    head, _, number = text.partition(":")
    return int(number) if head == "models" and number.isdigit() else None


class FakeModels:
    """``models.list`` / ``models.get`` of the fake server, over :attr:`listed`."""

    def __init__(self, api_version: str, served: Iterable[str], *, image_models: Iterable[str],
                 reply_type: type, error: Callable[..., Any]) -> None:
        self.api_version = api_version
        images = set(image_models)
        #: What the service lists, in its order: model id → resource. The served models, and an embedding
        #: model (no ``generateContent``) as the real list has.
        self.listed: dict[str, dict] = {m: model_resource(m, use="image" if m in images else "describe")
                                        for m in sorted(served)}
        self.listed["gemini-embedding-001"] = model_resource("gemini-embedding-001",
                                                             methods=("embedContent", "countTextTokens"))
        #: The most one page holds (Google's 1000; a test lowers it to see paging).
        self.max_page_size = MAX_PAGE_SIZE
        #: Every models request as it arrived: ``(method, path)``.
        self.calls: list[tuple[str, str]] = []
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._reply = reply_type
        self._error = error

    def push(self, *replies: Any) -> None:
        """Replies (``tests.fakes.gemini.Reply``) for the next models requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    def handle(self, method: str, path: str) -> Any:
        """The reply to a models path, or None when ``path`` is not one."""
        route = urlsplit(path).path
        prefix = f"/{self.api_version}/models"
        if method != "GET" or not (route == prefix or (route.startswith(prefix + "/") and ":" not in route)):
            return None
        with self._lock:
            self.calls.append((method, path))
            scripted = self._queue.popleft() if self._queue else None
        if scripted is not None:
            return scripted
        if route == prefix:
            return self._list(parse_qs(urlsplit(path).query))
        return self._get(unquote(route.removeprefix(prefix + "/")))

    def _list(self, query: dict[str, list[str]]) -> Any:
        size_text = (query.get("pageSize") or [""])[0]
        size = int(size_text) if size_text.lstrip("-").isdigit() else DEFAULT_PAGE_SIZE
        if size < 0:
            return self._error(400, "Page size must be non-negative.", status="INVALID_ARGUMENT")
        size = min(size or DEFAULT_PAGE_SIZE, self.max_page_size)
        token = (query.get("pageToken") or [""])[0]
        start = _offset(token) if token else 0
        if start is None:
            return self._error(400, "Invalid page token.", status="INVALID_ARGUMENT")
        with self._lock:
            models = list(self.listed.values())
        body: dict[str, Any] = {"models": models[start:start + size]}
        if start + size < len(models):
            body["nextPageToken"] = _token(start + size)
        return self._reply(body=body)

    def _get(self, model: str) -> Any:
        with self._lock:
            found = self.listed.get(model)
        if found is None:
            return self._error(404, f"models/{model} is not found for API version {self.api_version}, or is not "
                                    "supported for GET. Call ListModels to see the list of available models and "
                                    "their supported methods.")
        return self._reply(body=found)
