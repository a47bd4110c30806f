"""A clip as a describe request sends it: inline when it is small, else through the Files API.

:func:`clip_part` gives the request's video part for one attempt:

* a clip of at most ``gemini.video_inline_max_mb`` goes inline (``Part.from_bytes``; Google: inline data
  "less than 100 MB", ai.google.dev/gemini-api/docs/video-understanding, read 2026-12-03). Nothing is
  uploaded, nothing is left behind;
* a larger one is uploaded (``client.files.upload(file=path)``: google-genai reads and sends it in 8 MB chunks,
  ``_api_client.CHUNK_SIZE``, never the whole file in memory), its state looked at every
  ``gemini.video_poll_s`` until it is ``ACTIVE`` (a file is ``PROCESSING`` first and cannot be used before:
  the service answers 400 FAILED_PRECONDITION), at most ``gemini.video_processing_wait_s``; then the request
  names it by its URI, and the file is **deleted** when the attempt ends, described or not.

A file that ends ``FAILED`` is the clip's failure: PermanentError ``permanent:clip_failed`` with the service's
reason (parked, not tried again). A file still PROCESSING after the wait is TransientError
``retryable:processing`` (the job's next attempt uploads it again). Every call's failure is mapped by
:func:`~tasks.gemini.client.map_gemini_errors`; a delete that fails is logged, not raised (Google deletes
uploaded files after 48 hours anyway).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.core.errors import BadInput, MicrostockError, PermanentError, TransientError
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.client import Target, map_gemini_errors

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

log = logging.getLogger(__name__)

#: The MIME type sent for each clip container taken (Gemini's list of video types names MP4 ``video/mp4`` and
#: MOV ``video/mov``: ai.google.dev/gemini-api/docs/video-understanding, read 2026-12-03; AVI ``video/avi``, MPEG
#: ``video/mpeg`` and MPG ``video/mpg``: Google's "Understand videos" page for Gemini, cloud.google.com/
#: distributed-cloud/hosted/docs/latest/gdch/gemini/capabilities/video, read 2026-12-04).
CLIP_MIME = {".mp4": "video/mp4", ".mov": "video/mov", ".avi": "video/avi", ".mpg": "video/mpg",
             ".mpeg": "video/mpeg"}

#: ``gemini.video_media_resolution`` → the SDK's ``MediaResolution`` (``GenerateContentConfig.media_resolution``).
MEDIA_RESOLUTION = {"low": "MEDIA_RESOLUTION_LOW", "medium": "MEDIA_RESOLUTION_MEDIUM",
                    "high": "MEDIA_RESOLUTION_HIGH"}


def _state(file: types.File) -> str:
    return str(getattr(file.state, "value", file.state) or "")


@contextmanager
def clip_part(client: genai.Client, settings: GeminiSettings, asset: Asset, target: Target,
              api_key: str | None = None) -> Iterator[types.Part]:
    """The video part of one describe attempt for ``asset`` (inline, or an uploaded file deleted when the block
    ends). BadInput when the clip cannot be read."""
    from google.genai import types

    mime = CLIP_MIME.get(asset.path.suffix.lower(), "video/mp4")
    try:
        size = asset.path.stat().st_size
        inline = asset.path.read_bytes() if size <= settings.video_inline_max_mb * 1_000_000 else None
    except OSError as exc:
        raise BadInput(asset.name, f"cannot read the clip ({exc.strerror or type(exc).__name__})") from None
    if inline is not None:
        yield types.Part.from_bytes(data=inline, mime_type=mime)
        return
    with map_gemini_errors(target, api_key):
        uploaded = client.files.upload(file=asset.path, config=types.UploadFileConfig(mime_type=mime))
    log.info("%s: uploaded to the Files API (%.1f MB) as %s", asset.name, size / 1e6, uploaded.name)
    try:
        active = _wait_until_active(client, settings, asset, uploaded, target, api_key)
        yield types.Part.from_uri(file_uri=active.uri or "", mime_type=active.mime_type or mime)
    finally:
        _delete(client, asset, uploaded.name or "", target, api_key)


def _wait_until_active(client: genai.Client, settings: GeminiSettings, asset: Asset, file: types.File,
                       target: Target, api_key: str | None) -> types.File:
    """``file`` once it is ACTIVE; PermanentError when it ends FAILED, TransientError when the wait runs out."""
    deadline = time.monotonic() + settings.video_processing_wait_s
    while True:
        state = _state(file)
        if state == "ACTIVE":
            return file
        if state == "FAILED":
            said = " ".join(str(file.error.message if file.error else "").split())[:200] or "no reason given"
            raise PermanentError(f"Gemini could not process the clip ({said})", code="clip_failed")
        if time.monotonic() >= deadline:
            raise TransientError(f"the uploaded clip was still {state or 'not ready'} after "
                                 f"{settings.video_processing_wait_s:g} s (gemini.video_processing_wait_s)",
                                 kind="retryable", code="processing")
        time.sleep(settings.video_poll_s)
        with map_gemini_errors(target, api_key):
            file = client.files.get(name=file.name or "")


def _delete(client: genai.Client, asset: Asset, name: str, target: Target, api_key: str | None) -> None:
    try:
        with map_gemini_errors(target, api_key):
            client.files.delete(name=name)
    except MicrostockError as exc:
        log.warning("%s: could not delete the uploaded clip %s (%s); Google deletes it after 48 hours",
                    asset.name, name, exc.message)
