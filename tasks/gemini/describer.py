"""The Gemini describer: an image or a clip in, stock metadata out, one ``generate_content`` call per asset.

:class:`GeminiDescriber` sends the image itself (downscaled to at most 1024 px
on the long side, JPEG) — or the clip itself, inline or through the Files API
(:mod:`tasks.gemini.clips`), at ``gemini.video_media_resolution`` — with a
prompt asking for stock metadata, and a
``response_schema`` (:class:`StockAnswer`); the answer becomes a
:class:`~tasks.core.records.Metadata`. Its failures are mapped by
:mod:`tasks.gemini.client` (the table there is the contract).

Every call sets thinking on purpose (the lowest the model allows, or
``gemini.thinking``; :func:`~tasks.gemini.models.thinking_config`) and an
output budget (``gemini.max_output_tokens``); no sampling parameter
(temperature, top-p, top-k, penalties) is sent: Gemini 3 models ignore or
refuse them. An answer cut at the budget is retried once with four times the
budget, then parked as ``truncated:<REASON>``. The tokens of every call made
for an asset (failed ones too) and their price go into its metadata.

The request's pieces (:func:`describe_config`, :func:`describe_contents`) and
the way back (:func:`parse_answer`, :func:`to_metadata`) are functions, so
batch mode (:mod:`tasks.gemini.batch`) sends and reads exactly what this does.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from typing import TYPE_CHECKING

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.core.errors import MODEL, BadInput, InvalidOutput, OutputTruncated, PermanentError, StageStopped
from tasks.core.records import Asset, Metadata, Usage
from tasks.core.settings import GeminiSettings
from tasks.gemini.client import Target, check_answer, gemini_client, map_gemini_errors, usage_of
from tasks.gemini.clips import MEDIA_RESOLUTION, ClipUploads
from tasks.gemini.models import cost_usd, lacks_structured_output, retired_refusal, suggestion, thinking_config
from tasks.gemini.ratelimit import shared_limiter
from tasks.images.inspect import JPEG_FORMATS
from tasks.images.pixels import has_alpha, rgb_on_white
from tasks.images.ready import to_srgb
from tasks.images.upright import make_upright, recorded_orientation

if TYPE_CHECKING:  # the SDK is imported where a request is built, not by an offline run
    from google.genai import types

#: Long side of the image sent to the model: enough to describe it, few tokens.
SEND_MAX_PX = 1024
#: The output budget of the one retry after a truncated answer, as a multiple of ``max_output_tokens``.
TRUNCATED_RETRY_FACTOR = 4

ADOBE_CATEGORIES: dict[int, str] = {
    1: "Animals", 2: "Buildings and Architecture", 3: "Business", 4: "Drinks", 5: "The Environment",
    6: "States of Mind", 7: "Food", 8: "Graphic Resources", 9: "Hobbies and Leisure", 10: "Industry",
    11: "Landscapes", 12: "Lifestyle", 13: "People", 14: "Plants and Flowers", 15: "Culture and Religion",
    16: "Science", 17: "Social Issues", 18: "Sports", 19: "Technology", 20: "Transport", 21: "Travel",
}

_LANGUAGES = {"en": "English", "ja": "Japanese", "de": "German", "fr": "French", "es": "Spanish",
              "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "ko": "Korean", "zh": "Chinese"}


class StockAnswer(BaseModel):
    """The answer Gemini must give (sent as ``response_schema``)."""

    model_config = ConfigDict(str_strip_whitespace=True)

    title: str = Field(min_length=1, description="Factual title, at most 70 characters")
    description: str = Field(min_length=1, description="One or two sentences, at most 200 characters")
    keywords: list[str] = Field(min_length=1, description="Most important first")
    adobe_category: int = Field(ge=1, le=21, description="Adobe Stock category number")
    category_hints: list[str] = Field(description="General subject words, e.g. landscape, food")
    dreamstime_hints: list[str] = Field(description="Words naming Dreamstime categories")


def describe_prompt(language: str, avoid: tuple[str, ...] = (), *, clip: bool = False) -> str:
    """The instruction sent with every image (with ``clip``, every video clip); ``avoid``: the protected names
    and the contributor's excluded keywords (:func:`tasks.agencies.keyword_rules.avoided_words`), never to be
    written."""
    lang = _LANGUAGES.get(language, f"the language with code '{language}'")
    categories = "\n".join(f"  {n} {name}" for n, name in ADOBE_CATEGORIES.items())
    what = ("stock-footage metadata for the attached video clip" if clip
            else "stock-photo metadata for the attached image")
    return (
        f"Write {what}, for microstock agencies "
        "(Adobe Stock, Vecteezy, Dreamstime).\n"
        f"Write every text in {lang}. Describe only what is visible; never invent places, "
        "brands, trademarks or names of people.\n"
        "- title: a factual, descriptive title, at most 70 characters.\n"
        "- description: one or two sentences, at most 200 characters.\n"
        "- keywords: 25 to 49 single words or short phrases, most important first, no duplicates.\n"
        "- adobe_category: the number of the one best-fitting Adobe Stock category:\n"
        f"{categories}\n"
        "- category_hints: 1 to 3 general subject words (e.g. landscape, food, business).\n"
        "- dreamstime_hints: 1 to 3 words naming fitting Dreamstime categories "
        "(e.g. sunsets, seascapes, abstract backgrounds)."
        + (f"\nNever write these words or names in the title, description or keywords (agencies refuse "
           f"artists', characters' and brands' names): {', '.join(avoid)}." if avoid else "")
    )


def distinct_note(others: list[Metadata]) -> str:
    """Added to the prompt for an asset that looks like ``others``: a title and keyword order unlike theirs."""
    listed = "\n".join(f"  - {o.title} | {', '.join(o.keywords[:10])}" for o in others[:8])
    return ("\nOther assets of this contributor look like this one (title | first ten keywords):\n"
            f"{listed}\nGive this one a title and a first ten keywords that differ from theirs: name what "
            "is visible here and not there, and put it first.")


def parse_answer(response: types.GenerateContentResponse) -> StockAnswer:
    """The :class:`StockAnswer` in a 200 answer; InvalidOutput naming what is wrong otherwise."""
    check_answer(response)
    answer = response.parsed
    if not isinstance(answer, StockAnswer):
        text = response.text
        if not text or not text.strip():
            raise InvalidOutput("Gemini's answer has no text")
        try:
            answer = StockAnswer.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "json_invalid":
                raise InvalidOutput("Gemini's answer is not valid JSON") from None
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            raise InvalidOutput(f"Gemini's answer does not fit the schema ({where}: {first['msg']})") from None
    if not any(k.strip() for k in answer.keywords):
        raise InvalidOutput("Gemini's answer does not fit the schema (keywords: all empty)")
    return answer


# --- the describer ----------------------------------------------------------------------


def image_for_model(asset: Asset, max_px: int = SEND_MAX_PX) -> bytes:
    """The asset as an upright RGB JPEG of at most ``max_px`` on the long side (never enlarged).

    JPEGs are decoded at reduced size (Pillow draft mode), so a 24 MP file
    costs little; a JPEG with an MPF index (Pillow's "MPO": a 3D camera's
    second view, a depth or gain map) gives its primary image only, decoded
    as that same image alone would be. Transparency is flattened onto white. Raises BadInput
    naming the file when it cannot be read.
    """
    try:
        with Image.open(asset.path) as src:
            orientation = recorded_orientation(src, asset.path)  # before draft: it reads the file's own metadata
            w, h = src.size
            scale = max_px / max(w, h)
            if src.format in JPEG_FORMATS and scale < 1:
                src.draft("RGB", (max(1, int(w * scale)), max(1, int(h * scale))))
            im = src
            if im.mode.startswith("I"):  # 16-bit grey (an editor's TIFF): Pillow's plain conversion clips it white
                im = to_srgb(im)
            if im.mode not in ("RGB", "RGBA", "L"):  # resample in a mode that keeps the alpha
                im = im.convert("RGBA" if has_alpha(im) else "RGB")
            im.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
            make_upright(im, orientation)
            im = rgb_on_white(im)
            buf = BytesIO()
            im.save(buf, "JPEG", quality=85)
            return buf.getvalue()
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise BadInput(asset.name, f"cannot read the image ({type(exc).__name__})") from None


def unique_words(words: list[str]) -> list[str]:
    """``words`` with inner spaces made single, empty ones dropped, and each kept once (case-blind), in order."""
    seen: dict[str, str] = {}
    for w in words:
        w = " ".join(w.split())
        if w:
            seen.setdefault(w.lower(), w)
    return list(seen.values())


# --- the request and the answer, as sync and batch mode (tasks.gemini.batch) both send and read them ------


def check_describe_model(model: str) -> None:
    """StageStopped ``model`` when the table marks ``model`` retired or knows it refuses the response schema:
    do not pay to hear it."""
    if refusal := retired_refusal("gemini.model", model):
        raise StageStopped(refusal, kind=MODEL)
    if lacks_structured_output(model):
        raise StageStopped(f"`gemini.model = {model}` has no structured output and cannot describe: "
                           f"{suggestion(model, 'describe')}", kind=MODEL)


def describe_config(settings: GeminiSettings, max_output_tokens: int, *,
                    clip: bool = False) -> types.GenerateContentConfig:
    """The config of every describe request: JSON by :class:`StockAnswer`, the output budget, thinking set on
    purpose, no sampling parameter; for a clip, ``media_resolution`` (``gemini.video_media_resolution``)."""
    from google.genai import types

    return types.GenerateContentConfig(
        response_mime_type="application/json",
        response_schema=StockAnswer,
        max_output_tokens=max_output_tokens,
        thinking_config=thinking_config(settings.model, settings.thinking),
        media_resolution=MEDIA_RESOLUTION[settings.video_media_resolution] if clip else None,
    )


def describe_contents(asset: Asset, prompt: str) -> list:
    """What a describe request sends: the image (:func:`image_for_model`) and the prompt. BadInput when the
    image cannot be read."""
    from google.genai import types

    return [types.Part.from_bytes(data=image_for_model(asset), mime_type="image/jpeg"), prompt]


def to_metadata(answer: StockAnswer, response: types.GenerateContentResponse, *, describer: str,
                settings: GeminiSettings, usage: Usage, batch: bool = False, audio_tokens: int = 0) -> Metadata:
    """The sidecar metadata of a parsed answer; ``usage`` (every call made for the asset) priced at the sync or
    the batch price, ``audio_tokens`` (a clip's sound) at the audio price (``cost_usd`` None when a price needed
    is not confirmed)."""
    meta = response.usage_metadata
    return Metadata(
        title=" ".join(answer.title.split()),
        description=" ".join(answer.description.split()),
        keywords=unique_words(answer.keywords),
        adobe_category=answer.adobe_category,
        category_hints=unique_words(answer.category_hints + answer.dreamstime_hints),
        language=settings.language,
        describer=describer,
        tokens=(meta.total_token_count or 0) if meta else 0,
        usage=usage,
        cost_usd=cost_usd(settings.model, usage, dt.date.today(), batch=batch, audio_tokens=audio_tokens),
    )


class GeminiDescriber:
    """Metadata from Gemini: one ``generate_content`` call per asset.

    Thread-safe (one shared client). Raises only :mod:`tasks.core.errors`
    classes, as tabled in :mod:`tasks.gemini.client`; BadInput when the image
    cannot be read (no request is made then). Every call waits for the
    process's shared :attr:`limiter` of this model (Gemini's quota).
    """

    gemini_quota = True

    def __init__(self, settings: GeminiSettings, api_key: str, avoid: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.name = f"gemini:{settings.model}"
        self.model = settings.model
        self.limiter = shared_limiter(settings.model, settings.requests_per_minute, settings.concurrency)
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._target = Target("gemini.model", settings.model, "describe", settings.api_version)
        self._clips = ClipUploads(self._client, settings, self._target, api_key)
        #: (config, config of the retry after a truncated answer, prompt): for images, and for clips.
        self._image = (describe_config(settings, settings.max_output_tokens),
                       describe_config(settings, settings.max_output_tokens * TRUNCATED_RETRY_FACTOR),
                       describe_prompt(settings.language, avoid))
        self._clip = (describe_config(settings, settings.max_output_tokens, clip=True),
                      describe_config(settings, settings.max_output_tokens * TRUNCATED_RETRY_FACTOR, clip=True),
                      describe_prompt(settings.language, avoid, clip=True))
        self._prompt = self._image[2]
        self._lock = threading.Lock()
        #: asset id → tokens of this run's calls for it that gave no metadata yet.
        self._spent: dict[str, Usage] = {}
        #: asset ids whose last answer was truncated: their next call has the larger budget.
        self._truncated: set[str] = set()

    def __repr__(self) -> str:  # never show the key
        return f"GeminiDescriber(model={self.settings.model!r})"

    def replay_payload(self) -> dict:
        return {"prompt": self._prompt, "image_max_px": SEND_MAX_PX,
                "video_media_resolution": self.settings.video_media_resolution}

    def set_apart(self, asset: Asset, metadata: Metadata, others: list[Metadata]) -> Metadata:
        """The image described again, with the others' titles and first keywords to differ from in the prompt."""
        return self.describe(asset, avoid=others)

    @contextmanager
    def _contents(self, asset: Asset, prompt: str) -> Iterator[list]:
        """What this attempt sends: the image and the prompt, or the clip (inline, or uploaded for as long as its
        job needs it: :class:`~tasks.gemini.clips.ClipUploads`) and then the prompt, as Google says to order them."""
        if not asset.is_clip:
            yield describe_contents(asset, prompt)
            return
        with self._clips.part(asset) as part:
            yield [part, prompt]

    def job_over(self, asset: Asset) -> None:
        """``asset``'s job is over: the clip uploaded for its attempts, if one is still kept, is deleted."""
        self._clips.release(asset)

    def describe(self, asset: Asset, avoid: list[Metadata] | None = None) -> Metadata:
        check_describe_model(self.model)
        config, larger, prompt = self._clip if asset.is_clip else self._image
        with self._lock:
            retrying_cut = asset.asset_id in self._truncated
        with self._contents(asset, prompt + distinct_note(avoid) if avoid else prompt) as contents:
            with map_gemini_errors(self._target, self._api_key):
                response = self._client.models.generate_content(
                    model=self.settings.model, contents=contents, config=larger if retrying_cut else config,
                )
        with self._lock:
            usage = self._spent.pop(asset.asset_id, Usage()) + usage_of(response)
            self._spent[asset.asset_id] = usage
        try:
            answer = parse_answer(response)
        except OutputTruncated as exc:
            if retrying_cut:
                raise PermanentError(f"{exc.message}, also with {larger.max_output_tokens} output tokens",
                                     kind="truncated", code=exc.reason) from None
            with self._lock:
                self._truncated.add(asset.asset_id)
            raise
        with self._lock:
            self._spent.pop(asset.asset_id, None)
            self._truncated.discard(asset.asset_id)
        return to_metadata(answer, response, describer=self.name, settings=self.settings, usage=usage,
                           audio_tokens=_audio_tokens(response) if asset.is_clip else 0)


def _audio_tokens(response: types.GenerateContentResponse) -> int:
    """The prompt tokens Gemini counted for the clip's sound (``prompt_tokens_details``, modality AUDIO)."""
    meta = response.usage_metadata
    details = (meta.prompt_tokens_details if meta is not None else None) or []
    return sum(d.token_count or 0 for d in details if str(getattr(d.modality, "value", d.modality)) == "AUDIO")
