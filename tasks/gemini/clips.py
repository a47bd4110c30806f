"""A clip as a describe request sends it: inline when it is small, else through the Files API.

:class:`ClipUploads` gives the request's video part for each attempt:

* a clip of at most ``gemini.video_inline_max_mb`` goes inline (``Part.from_bytes``; Google: inline data
  "less than 100 MB", ai.google.dev/gemini-api/docs/video-understanding, read 2026-12-03). Nothing is
  uploaded, nothing is left behind;
* a larger one is uploaded (``client.files.upload(file=path)``: google-genai reads and sends it in 8 MB chunks,
  ``_api_client.CHUNK_SIZE``, never the whole file in memory), its state looked at every
  ``gemini.video_poll_s`` until it is ``ACTIVE`` (a file is ``PROCESSING`` first and cannot be used before:
  the service answers 400 FAILED_PRECONDITION), at most ``gemini.video_processing_wait_s``; then the request
  names it by its URI. The file is **deleted** when the clip is described or fails for good; after a failure
  the job's next attempt retries, it is kept for that attempt (not uploaded again), and deleted when the job
  is over whatever its end (:meth:`ClipUploads.release`).

A file that ends ``FAILED`` is the clip's failure: PermanentError ``permanent:clip_failed`` with the service's
reason (parked, not tried again). A file still PROCESSING after the wait is TransientError
``retryable:processing`` (the job's next attempt waits for the same file). Every call's failure is mapped by
:func:`~tasks.gemini.client.map_gemini_errors`; a delete that fails is logged, not raised (Google deletes
uploaded files after 48 hours anyway).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.core.errors import FILE_GONE, BadInput, MicrostockError, PermanentError, TransientError
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


class ClipUploads:
    """The video part of each describe attempt, and the clips uploaded for them (one per describer).

    An uploaded clip is kept from one attempt of its job to the next when the attempt fails in a way the next
    one retries (a 429, a 503, a cut answer, a file still PROCESSING): the next attempt uses the same file, once
    the service still has it, instead of uploading the clip again (a 500 MB clip was sent again on every
    retry). It is deleted when an attempt describes the clip or fails for good, and when :meth:`release` says
    its job is over. A file the service says is gone (``file_gone``) is not kept."""

    def __init__(self, client: genai.Client, settings: GeminiSettings, target: Target, api_key: str | None):
        self._client, self._settings, self._target, self._api_key = client, settings, target, api_key
        self._lock = threading.Lock()
        #: asset id → the file uploaded for its job, kept between attempts
        self._kept: dict[str, types.File] = {}

    @contextmanager
    def part(self, asset: Asset) -> Iterator[types.Part]:
        """The video part of one attempt for ``asset`` (inline, or an uploaded file). BadInput when the clip
        cannot be read."""
        from google.genai import types

        mime = CLIP_MIME.get(asset.path.suffix.lower(), "video/mp4")
        try:
            size = asset.path.stat().st_size
            inline = asset.path.read_bytes() if size <= self._settings.video_inline_max_mb * 1_000_000 else None
        except OSError as exc:
            raise BadInput(asset.name, f"cannot read the clip ({exc.strerror or type(exc).__name__})") from None
        if inline is not None:
            yield types.Part.from_bytes(data=inline, mime_type=mime)
            return
        if size > self._settings.video_upload_max_mb * 1_000_000:
            raise PermanentError(f"the clip ({size / 1e6:,.0f} MB) is larger than the Files API takes here "
                                 f"(gemini.video_upload_max_mb = {self._settings.video_upload_max_mb:g}: Google "
                                 "takes 2 GB a file on the free tier, 20 GB with billing); not uploaded — with a "
                                 "paid key raise it, then: microstock replay --include-doomed --apply",
                                 code="clip_too_large")
        file = self._kept_for(asset)
        if file is None:
            with map_gemini_errors(self._target, self._api_key):
                file = self._client.files.upload(file=asset.path, config=types.UploadFileConfig(mime_type=mime))
            log.info("%s: uploaded to the Files API (%.1f MB) as %s", asset.name, size / 1e6, file.name)
        else:
            log.info("%s: the clip uploaded by an earlier attempt (%s) is used again", asset.name, file.name)
        try:
            file = _wait_until_active(self._client, self._settings, asset, file, self._target, self._api_key)
            yield types.Part.from_uri(file_uri=file.uri or "", mime_type=file.mime_type or mime)
        except TransientError as exc:
            if exc.code == FILE_GONE:
                raise
            with self._lock:
                self._kept[asset.asset_id] = file  # the job's next attempt uses it (or release deletes it)
            raise
        except BaseException:
            self._delete(asset, file)
            raise
        self._delete(asset, file)

    def _kept_for(self, asset: Asset) -> types.File | None:
        """The file kept for ``asset``'s job as the service has it now (its state read again), or None when none
        is kept or the service no longer has it (expired, deleted)."""
        with self._lock:
            kept = self._kept.pop(asset.asset_id, None)
        if kept is None:
            return None
        try:
            with map_gemini_errors(self._target, self._api_key):
                return self._client.files.get(name=kept.name or "")
        except TransientError as exc:
            if exc.code == FILE_GONE:
                return None
            with self._lock:
                self._kept[asset.asset_id] = kept
            raise

    def release(self, asset: Asset) -> None:
        """``asset``'s job is over (described, parked or left pending): delete the file kept for it, if any."""
        with self._lock:
            file = self._kept.pop(asset.asset_id, None)
        if file is not None:
            self._delete(asset, file)

    def _delete(self, asset: Asset, file: types.File) -> None:
        try:
            with map_gemini_errors(self._target, self._api_key):
                self._client.files.delete(name=file.name or "")
        except MicrostockError as exc:
            log.warning("%s: could not delete the uploaded clip %s (%s); Google deletes it after 48 hours",
                        asset.name, file.name, exc.message)


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
