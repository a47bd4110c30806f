"""Generated clips from Gemini's clip model (``run --clips N`` with a key), as a :data:`~tasks.stages.assets.ClipMaker`.

google-genai 3.6.1 makes video for a Gemini Developer API (API-key) client only through the Interactions API
(``models.generate_videos`` refuses such a client before sending anything; docs/GEMINI.md "Generated clips"):

1. ``client.interactions.create(model=gemini.clip_model, input=<prompt>, response_format={"type": "video",
   "aspect_ratio", "resolution", "delivery": "inline"}, background=True)`` — ``POST /{version}/interactions``,
   answered at once with the interaction's ``id`` and ``status`` ``in_progress``;
2. ``client.interactions.get(id)`` every ``gemini.clip_poll_s`` until the status is final; ``completed`` carries
   the clip as base64 ``data`` in a ``model_output`` step's video content (the SDK's ``output_video``) and the
   tokens in ``usage`` (video output tokens by modality).

The interaction's id is kept in ``assets/.<stem>.pending.json`` (:func:`~tasks.images.provenance.pending_generation`)
the moment it is known: an attempt after a wait that ran out, or a run after a crash, looks at that interaction
again rather than paying for another; the stage removes the file once the clip is written. A clip still being
made after ``gemini.clip_wait_s`` is a TransientError (the next attempt waits again, on the same interaction).

Failures go through the same boundary as every call (:func:`~tasks.gemini.client.map_gemini_errors`); a final
status other than ``completed`` is a PermanentError naming it (``failed`` with the service's own message), and
so is a completed one whose clip cannot be read (asking the same interaction again gives the same bytes); the
pending file is removed then: nothing is left to take up. A model the table marks retired, or that is not a clip
model of the table, is refused before the first call (StageStopped ``model``). The clip is written as Gemini
sent it, remuxed (stream copy, no re-encoding) only to carry the prompt as its ``title`` and
``prefect-microstock via Gemini <model> (AI-generated)`` as its encoding tool — the record
:mod:`tasks.images.provenance` reads, so agencies' AI rules apply to it.

Each clip made logs one line with its tokens and cost; no price of a clip model is confirmed
(tasks/gemini/prices.toml), so the cost is "unknown", never guessed.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import logging
import time
from io import BytesIO
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from tasks.core.errors import (
    MODEL,
    REQUEST_SHAPE,
    ConfigError,
    InvalidOutput,
    PermanentError,
    StageStopped,
    TransientError,
)
from tasks.core.files import atomic_write_bytes
from tasks.core.records import Made, Usage
from tasks.core.secrets import redact
from tasks.core.settings import GeminiSettings, GenerateSettings
from tasks.core.state_files import read_file
from tasks.gemini.client import Target, gemini_client, map_gemini_errors
from tasks.gemini.daybudget import DailyBudget
from tasks.gemini.models import check_clip_settings, cost_usd, retired_refusal
from tasks.gemini.ratelimit import WaitAllowance, shared_limiter
from tasks.images.demo import DemoPrompt
from tasks.images.provenance import gemini_software, pending_generation

log = logging.getLogger(__name__)

#: Statuses that are not final: the clip is still being made.
_RUNNING = frozenset({"in_progress", "queued"})


def clip_prompt(prompt: DemoPrompt) -> str:
    """What the clip model is asked for."""
    return (f"{prompt.prompt}. A calm, high-quality stock footage shot, steady camera. No text, no watermark, "
            "no logos, no brand names, no recognizable people.")


def usage_of_interaction(interaction: Any) -> Usage:
    """The interaction's ``usage`` as :class:`~tasks.core.records.Usage` (zeros when absent)."""
    usage = interaction.usage
    if usage is None:
        return Usage()
    return Usage(prompt_tokens=usage.total_input_tokens or 0, output_tokens=usage.total_output_tokens or 0,
                 thought_tokens=usage.total_thought_tokens or 0)


def tagged_clip(data: bytes, prompt: str, software: str) -> bytes:
    """``data`` (an MP4 as Gemini sent it) with ``prompt`` as its title and ``software`` as its encoding tool: the
    same packets, remuxed. InvalidOutput when FFmpeg cannot read it as a video."""
    import av  # FFmpeg's libraries load when a clip is made, not with every run

    out_buf = BytesIO()
    try:
        with av.open(BytesIO(data), mode="r") as src, av.open(out_buf, "w", format="mp4") as out:
            if not src.streams.video:
                raise InvalidOutput("the clip in Gemini's answer holds no video stream")
            out.metadata.update({"title": prompt, "encoding_tool": software})
            streams = {s.index: out.add_stream_from_template(s) for s in (*src.streams.video, *src.streams.audio)}
            for packet in src.demux(*(s for s in src.streams if s.index in streams)):
                if packet.dts is not None:
                    packet.stream = streams[packet.stream.index]
                    out.mux(packet)
    except (OSError, av.FFmpegError, ValueError):
        raise InvalidOutput("the clip in Gemini's answer cannot be read as a video") from None
    return out_buf.getvalue()


class GeminiClipMaker:
    """``make(prompt, index, path) -> Made`` (the MP4 for ``path``) with Gemini's clip model; one interaction per
    clip. ``index`` does not steer the model; ``path`` names the clip's pending record.

    Raises only :mod:`tasks.core.errors` classes. ``sleep`` and ``clock`` are the waits' (tests pass their own).
    """

    def __init__(self, settings: GeminiSettings, api_key: str, generate: GenerateSettings = GenerateSettings(),
                 budget: DailyBudget | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = settings.clip_model
        self.budget = budget
        self._settings = settings
        self._generate = generate
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._target = Target("gemini.clip_model", settings.clip_model, "clip", settings.api_version)
        self.limiter = shared_limiter(settings.clip_model, settings.requests_per_minute, 1)
        self._waits = WaitAllowance(settings.rate_limit_wait_s)
        self._sleep, self._clock = sleep, clock

    def __repr__(self) -> str:  # never show the key
        return f"GeminiClipMaker(model={self.model!r})"

    def _start(self, prompt: DemoPrompt, path: Path) -> str:
        """A new interaction for ``prompt``; its id is on disk (next to ``path``) before this returns."""
        if self.budget is not None:
            self.budget.take()  # the day's requests to the clip model (quota:daily stops generation)

        def create() -> Any:
            with map_gemini_errors(self._target, self._api_key):
                return self._client.interactions.create(
                    model=self.model, input=clip_prompt(prompt), background=True,
                    response_format={"type": "video", "aspect_ratio": self._generate.clip_aspect_ratio,
                                     "resolution": self._generate.clip_resolution, "delivery": "inline"})

        started = self.limiter.call(create, self._waits)
        if not started.id:
            raise InvalidOutput("Gemini started a clip without an interaction id")
        atomic_write_bytes(pending_generation(path),
                           PendingClip(interaction=started.id, model=self.model).model_dump_json().encode())
        log.info("clip %s: Gemini is making it (interaction %s)", path.name, started.id)
        return started.id

    def _wait(self, interaction_id: str) -> Any:
        """The interaction once its status is final; TransientError after ``gemini.clip_wait_s``."""
        deadline = self._clock() + self._settings.clip_wait_s
        while True:
            with map_gemini_errors(self._target, self._api_key):
                found = self._client.interactions.get(interaction_id)
            if str(found.status) not in _RUNNING:
                return found
            if self._clock() >= deadline:
                raise TransientError(f"Gemini is still making the clip after {self._settings.clip_wait_s:g} s "
                                     f"(interaction {interaction_id}): the next attempt waits for the same one",
                                     kind="retryable", code="clip_not_ready")
            self._sleep(self._settings.clip_poll_s)

    def _take_up(self, interaction_id: str, path: Path) -> Any:
        """The interaction an earlier attempt or run started. One Gemini will not show any more (expired,
        unknown) is forgotten: PermanentError naming it, and the next run asks for the clip anew."""
        log.info("clip %s: looking again at interaction %s, started earlier", path.name, interaction_id)
        try:
            return self._wait(interaction_id)
        except (PermanentError, StageStopped) as exc:
            if isinstance(exc, StageStopped) and exc.kind not in (MODEL, REQUEST_SHAPE):
                raise  # quota, the key, the location: as for any call
            pending_generation(path).unlink(missing_ok=True)
            raise PermanentError(f"the clip started earlier (interaction {interaction_id}) cannot be looked at "
                                 f"any more ({exc.message}): the next run asks for it again",
                                 kind="refused", code="interaction_gone") from None

    def __call__(self, prompt: DemoPrompt, index: int, path: Path) -> Made:
        if refusal := retired_refusal("gemini.clip_model", self.model):  # the table's word: no paid call
            raise StageStopped(refusal, kind=MODEL)
        try:
            check_clip_settings(self.model, self._generate.clip_resolution)
        except ConfigError as exc:  # the run's check says it first; a direct caller is stopped here
            raise StageStopped(exc.message, kind=MODEL) from None
        pending = pending_generation(path)
        interaction_id = _pending_id(pending)
        if interaction_id is None:
            interaction_id = self._start(prompt, path)
            found = self._wait(interaction_id)
        else:
            found = self._take_up(interaction_id, path)
        status = str(found.status)
        if status != "completed":
            pending.unlink(missing_ok=True)  # a final status: nothing left to take up
            said = " ".join("; ".join(e.message for e in (found.errors or []) if e.message).split())
            said = redact(said, self._api_key, mark="[redacted]")[:200] or "no reason given"
            raise PermanentError(f"Gemini's clip ended {status} (interaction {interaction_id}): {said}",
                                 kind="refused", code=status)
        usage = usage_of_interaction(found)
        cost = cost_usd(self.model, usage, dt.date.today())
        log.info("clip %s by %s: prompt %d · output %d · thinking %d tokens · %s", path.name, self.model,
                 usage.prompt_tokens, usage.output_tokens, usage.thought_tokens,
                 "cost unknown (no confirmed price)" if cost is None else f"${cost:.4f}")
        try:
            data = _video_of(found, interaction_id, pending)
            del found  # the answer (base64, a third larger than the clip) is not held while the clip is remuxed
            return Made(tagged_clip(data, prompt.prompt, gemini_software(self.model)), usage, cost)
        except InvalidOutput as exc:  # a finished interaction answers the same bytes again: nothing to take up
            pending.unlink(missing_ok=True)
            raise PermanentError(f"{exc.message} (interaction {interaction_id}): the next run asks for the clip anew",
                                 code="unreadable_clip") from None


def _video_of(found: Any, interaction_id: str, pending: Path) -> bytes:
    """The clip's bytes from a completed interaction's inline video."""
    video = found.output_video
    if video is None or not (video.data or video.uri):
        raise InvalidOutput(f"Gemini's finished clip holds no video (interaction {interaction_id})")
    if not video.data:  # asked inline; a URI instead is a delivery this project does not fetch
        pending.unlink(missing_ok=True)
        raise PermanentError(f"Gemini delivered the clip by URI, not inline as asked (interaction "
                             f"{interaction_id}); this project does not fetch clip URIs", kind="refused",
                             code="uri_delivery")
    try:
        return base64.b64decode(video.data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidOutput("the clip in Gemini's answer is not base64") from None


class PendingClip(BaseModel):
    """``assets/.<stem>.pending.json``: the interaction a clip is being made by, and the model asked."""

    interaction: str = Field(min_length=1)
    model: str = ""


def _pending_id(pending: Path) -> str | None:
    """The interaction a previous attempt or run started for this clip; None when there is none. A damaged
    record is set aside (its bytes kept, one warning): the clip is asked for anew."""
    kept = read_file(pending, PendingClip.model_validate_json,
                     "the clip is asked for anew (the interaction it named, if any, is in the bytes set aside)")
    return kept.interaction if kept is not None else None
