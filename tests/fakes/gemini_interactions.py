"""The Interactions API of the fake Gemini server, for clip generation (:mod:`tests.fakes.gemini` routes here).

What it accepts is what google-genai 3.6.1's Interactions client sends and its generated types (from Google's API
description, ``_gaos/types/interactions/``) allow; the answers have the shapes a live call returned
(TanStack/ai#871, 2026-07-01: ``{"id", "status": "in_progress", "object": "interaction", …}`` at once for a
background call, then ``completed`` with a ``model_output`` step holding ``{"type": "video", "mime_type":
"video/mp4", "data": <base64>}`` and ``usage.output_tokens_by_modality`` ``[{"modality": "video", "tokens"}]``):

* ``POST /{api_version}/interactions``: a top-level field the ``CreateModelInteraction`` type does not have, a
  ``response_format`` of type ``video`` with a field, aspect ratio or resolution its ``VideoResponseFormat`` does
  not have, or a non-string ``input`` gets 400 INVALID_ARGUMENT naming it; a model that is not a clip model of
  :data:`CLIP_MODELS` gets the 404 "is not found" body; a video asked without ``background: true`` gets 400 (a
  clip takes minutes: unconfirmed how the service answers a foreground call, so the fake refuses it).
* ``GET /{api_version}/interactions/{id}``: ``in_progress`` for :attr:`FakeInteractions.running_gets` GETs, then
  what :attr:`FakeInteractions.end` builds (a completed clip by default: an MP4 at the asked resolution made by
  :func:`tests.fakes.clips.make_clip`, ``video_tokens`` tokens). An unknown id is 404 NOT_FOUND.

Tests steer it with :attr:`FakeInteractions.running_gets`, :attr:`FakeInteractions.end` and
:attr:`FakeInteractions.refuse_creates`. Records: :attr:`FakeInteractions.created` (each accepted create's body)
and :attr:`FakeInteractions.calls`.
"""

from __future__ import annotations

import base64
import itertools
import tempfile
import threading
from functools import cache
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from tests.fakes.clips import make_clip

#: Clip models the fake serves (the Interactions API's model enum in google-genai 3.6.1 names them).
CLIP_MODELS = frozenset({"gemini-omni-1.2-flash", "gemini-omni-1.1-flash"})
#: ``CreateModelInteraction`` fields (google-genai 3.6.1, _gaos/types/interactions/createmodelinteraction.py).
CREATE_FIELDS = frozenset({"model", "background", "cached_content", "continuation_token", "environment",
                           "generation_config", "input", "labels", "previous_interaction_id", "response_format",
                           "response_mime_type", "response_modalities", "safety_settings", "service_tier", "store",
                           "stream", "system_instruction", "tools", "webhook_config"})
#: ``VideoResponseFormat`` fields and values (_gaos/types/interactions/videoresponseformat.py).
VIDEO_FORMAT_FIELDS = frozenset({"type", "aspect_ratio", "delivery", "duration", "gcs_uri", "resolution"})
ASPECT_RATIOS = frozenset({"16:9", "9:16"})
RESOLUTIONS = {"360p": (640, 360), "720p": (1280, 720), "1080p": (1920, 1080), "4k": (3840, 2160)}
#: Video output tokens a second of 720p (57,920 for the 10 s of the live answer above).
TOKENS_PER_SECOND = 5792


@cache
def mp4_of(resolution: str, seconds: int = 6) -> bytes:
    """A real MP4 clip (H.264, 24 fps) of the size ``resolution`` names (made once per process)."""
    width, height = RESOLUTIONS[resolution]
    with tempfile.TemporaryDirectory() as folder:
        return make_clip(Path(folder) / "clip.mp4", width, height, seconds=seconds, fps=24).read_bytes()


class FakeInteractions:
    """Create and get of the fake server's interactions."""

    def __init__(self, api_version: str, *, reply_type: type, error: Callable[..., Any]) -> None:
        self.api_version = api_version
        #: GETs an interaction answers ``in_progress`` before it ends.
        self.running_gets = 1
        #: How an interaction ends: a function of its create body giving the final interaction's fields.
        self.end: Callable[[dict], dict] = completed_clip
        #: Replies given to the next creates instead of accepting them (a 429, a 503 …), in order.
        self.refuse_creates: list[Any] = []
        self.created: list[dict] = []
        #: (method, path, status answered)
        self.calls: list[tuple[str, str, str]] = []
        self._found: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._reply = reply_type
        self._error = error

    def handle(self, method: str, path: str, req: Any) -> Any:
        """The reply to an Interactions API path, or None when ``path`` is not one."""
        route = urlsplit(path).path
        with self._lock:
            if route == f"/{self.api_version}/interactions" and method == "POST":
                return self._create(path, req.json if isinstance(req.json, dict) else {})
            prefix = f"/{self.api_version}/interactions/"
            if method != "GET" or not route.startswith(prefix):
                return None
            found = self._found.get(route.removeprefix(prefix))
            if found is None:
                self.calls.append((method, path, "404"))
                return self._error(404, "Interaction not found.", status="NOT_FOUND")
            found["gets"] += 1
            if found["body"]["status"] == "in_progress" and found["gets"] > self.running_gets:
                found["body"].update(self.end(found["asked"]))
            self.calls.append((method, path, found["body"]["status"]))
            return self._reply(body=found["body"])

    def _refusal(self, body: dict) -> Any:
        for key in body:
            if key not in CREATE_FIELDS:
                return self._error(400, f"Invalid JSON payload received. Unknown name \"{key}\": Cannot find field.",
                                   status="INVALID_ARGUMENT")
        model = str(body.get("model", ""))
        if model not in CLIP_MODELS:
            return self._error(404, f"models/{model} is not found for API version {self.api_version}, or is not "
                                    "supported for interactions.", status="NOT_FOUND")
        if not isinstance(body.get("input"), str) or not body["input"].strip():
            return self._error(400, "input: a text prompt is required.", status="INVALID_ARGUMENT")
        video = body.get("response_format") or {}
        if not isinstance(video, dict) or video.get("type") != "video":
            return self._error(400, "response_format: a video format is required for this model.",
                               status="INVALID_ARGUMENT")
        for key in video:
            if key not in VIDEO_FORMAT_FIELDS:
                return self._error(400, f"Invalid JSON payload received. Unknown name \"{key}\" at "
                                        "'response_format': Cannot find field.", status="INVALID_ARGUMENT")
        if video.get("aspect_ratio", "16:9") not in ASPECT_RATIOS:
            return self._error(400, f"Invalid value at 'response_format.aspect_ratio', \"{video['aspect_ratio']}\"",
                               status="INVALID_ARGUMENT")
        if video.get("resolution", "720p") not in RESOLUTIONS:
            return self._error(400, f"Invalid value at 'response_format.resolution', \"{video['resolution']}\"",
                               status="INVALID_ARGUMENT")
        if body.get("background") is not True:
            return self._error(400, "Video generation runs in the background: set background to true.",
                               status="INVALID_ARGUMENT")
        return None

    def _create(self, path: str, body: dict) -> Any:
        refused = self.refuse_creates.pop(0) if self.refuse_creates else self._refusal(body)
        if refused is not None:
            self.calls.append(("POST", path, str(refused.status)))
            return refused
        interaction_id = f"v1_fake{next(self._ids):06d}"
        answer = {"id": interaction_id, "status": "in_progress", "object": "interaction", "model": body["model"],
                  "created": "2026-12-05T02:00:00Z", "updated": "2026-12-05T02:00:00Z"}
        self._found[interaction_id] = {"asked": body, "body": dict(answer), "gets": 0}
        self.created.append(body)
        self.calls.append(("POST", path, "in_progress"))
        return self._reply(body=answer)


def completed_clip(asked: dict, seconds: int = 6) -> dict:
    """A finished clip at the resolution asked (720p when none was), with its steps and usage."""
    resolution = (asked.get("response_format") or {}).get("resolution", "720p")
    data = base64.b64encode(mp4_of(resolution, seconds)).decode()
    return {"status": "completed", "updated": "2026-12-05T02:01:00Z",
            "steps": [{"type": "user_input", "content": [{"type": "text", "text": asked["input"]}]},
                      {"type": "model_output", "content": [{"type": "video", "mime_type": "video/mp4", "data": data}]}],
            "usage": {"total_input_tokens": 24, "total_output_tokens": TOKENS_PER_SECOND * seconds,
                      "output_tokens_by_modality": [{"modality": "video", "tokens": TOKENS_PER_SECOND * seconds}]}}


def failed_clip(message: str) -> Callable[[dict], dict]:
    """An end: the interaction failed with the service's ``message``."""
    return lambda asked: {"status": "failed", "errors": [{"code": "content_policy", "message": message}]}
