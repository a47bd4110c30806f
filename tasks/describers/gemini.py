"""The Gemini describer, and the one place where Gemini's failures become ours.

:class:`GeminiDescriber` sends the image itself (downscaled to at most 1024 px
on the long side, JPEG) with a prompt asking for stock metadata, and a
``response_schema`` (:class:`StockAnswer`); the answer becomes a
:class:`~tasks.metadata.Metadata`. One request per asset; the SDK's own
retries are off (``HttpRetryOptions(attempts=1)``) and a timeout is always set,
so the caller (the Prefect describe task) owns every retry and sees every
attempt.

Failures reach the caller only as :mod:`tasks.failures` classes, built in two
places of this module and nowhere else:

* :func:`map_gemini_errors` — exceptions out of the SDK (HTTP errors, transport
  errors, a 200 whose body is not JSON);
* :func:`check_answer` — a 200 that carries no usable answer (safety blocks,
  truncated or empty output), which the SDK does not raise for.

The contract for the caller (retry policy):

=========================================  ======================  ==========================
what happened                              raised                  ``error_class``
=========================================  ======================  ==========================
401, 403, 400 ``API_KEY_INVALID``          AuthenticationFailed    ``auth``
429 whose QuotaFailure quota is per day    QuotaExhausted          ``quota:daily``
429 otherwise                              RateLimited             ``retryable:429``
                                           (``retry_after`` = RetryInfo ``retryDelay`` in s, or None)
400, 404, 422, INVALID_ARGUMENT,           PermanentError          ``permanent:<code>``
FAILED_PRECONDITION, "SAFETY"/"BLOCKED"
any other HTTP error (5xx, 408 ...)        ServiceUnavailable      ``retryable:<code>``
timeout (connect, read, write, pool)       ServiceTimeout          ``timeout``
refused / dropped / reset connection       NetworkError            ``network``
200 not JSON, no candidates, empty,        InvalidOutput           ``invalid_output``
MAX_TOKENS, JSON not fitting the schema
finish_reason SAFETY, IMAGE_SAFETY,        ContentBlocked          ``blocked:<REASON>``
PROHIBITED_CONTENT, BLOCKLIST, SPII ...,
or prompt_feedback.block_reason
=========================================  ======================  ==========================

So: retry :class:`~tasks.failures.TransientError` (waiting at least
``retry_after`` when it is set), park :class:`~tasks.failures.PermanentError`
at once, stop calling Gemini on :class:`~tasks.failures.StageStopped`. The
HTTP code is the part of ``error_class`` after the colon, so when retries run
out the seed's parked class is ``exhausted:`` + that part (``exhausted:503``,
``exhausted:429``; ``exhausted:timeout``, ``exhausted:network`` for transport
failures) and ``invalid_output`` keeps its name
(:func:`tasks.dead_letter.parked_error_class` does this).

Messages are built here from the HTTP code, status, reason and the service's
own message with anything key-shaped removed; the SDK's exception (whose text
holds the whole response body) is not chained, so the API key cannot reach a
log, the dead-letter store or the user.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from io import BytesIO
from typing import Any, Iterator

import httpx2
from google import genai
from google.genai import errors, types
from PIL import Image, ImageOps
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.assets import Asset
from tasks.config import GeminiSettings
from tasks.secrets import redact
from tasks.failures import (
    AuthenticationFailed,
    BadInput,
    ContentBlocked,
    InvalidOutput,
    MicrostockError,
    NetworkError,
    PermanentError,
    QuotaExhausted,
    RateLimited,
    ServiceTimeout,
    ServiceUnavailable,
)
from tasks.metadata import Metadata

#: Long side of the image sent to the model: enough to describe it, few tokens.
SEND_MAX_PX = 1024

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


def describe_prompt(language: str) -> str:
    """The instruction sent with every image."""
    lang = _LANGUAGES.get(language, f"the language with code '{language}'")
    categories = "\n".join(f"  {n} {name}" for n, name in ADOBE_CATEGORIES.items())
    return (
        "Write stock-photo metadata for the attached image, for microstock agencies "
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
    )


# --- the client -----------------------------------------------------------------------


def gemini_client(settings: GeminiSettings, api_key: str) -> genai.Client:
    """A client with a timeout and without the SDK's own retries.

    The endpoint is the SDK's choice: ``GOOGLE_GEMINI_BASE_URL`` when set.
    Keep a reference to the returned client for as long as it is used (a
    garbage-collected client closes its connections under a running call).
    """
    return genai.Client(
        api_key=api_key,
        vertexai=False,
        http_options=types.HttpOptions(
            timeout=int(settings.timeout_s * 1000),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )


# --- the mapping boundary ---------------------------------------------------------------

_BLOCK_REASONS = frozenset({"SAFETY", "IMAGE_SAFETY", "PROHIBITED_CONTENT", "IMAGE_PROHIBITED_CONTENT",
                            "BLOCKLIST", "SPII"})
_PERMANENT_CODES = frozenset({400, 404, 422})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")


def _clean(text: Any, api_key: str | None) -> str:
    """The service's text without the key or anything key-shaped, on one line, at most 200 characters."""
    text = redact(" ".join(str(text or "").split()), api_key, mark="[redacted]")
    return text[:200] + ("…" if len(text) > 200 else "")


def _error_details(body: Any) -> list[dict]:
    """The ``error.details`` list of an error body (the SDK keeps the whole body)."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("details"), list):
            return [d for d in err["details"] if isinstance(d, dict)]
    return []


def _of_type(details: list[dict], name: str) -> list[dict]:
    return [d for d in details if str(d.get("@type", "")).endswith(f"google.rpc.{name}")]


def retry_delay_seconds(details: list[dict]) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"13s"``, ``"0.5s"``), None when absent."""
    for info in _of_type(details, "RetryInfo"):
        m = _DURATION.match(str(info.get("retryDelay", "")))
        if m:
            return float(m.group(1))
    return None


def _per_day_quota(details: list[dict]) -> bool:
    return any("PerDay" in str(v.get("quotaId", ""))
               for q in _of_type(details, "QuotaFailure") for v in q.get("violations") or [] if isinstance(v, dict))


def _from_api_error(exc: errors.APIError, api_key: str | None) -> MicrostockError:
    code = int(exc.code or 0)
    status = str(exc.status or "")
    message = _clean(exc.message, api_key)
    details = _error_details(exc.details)
    said = f"Gemini answered {code} {status}".rstrip() + (f": {message}" if message else "")
    reasons = {str(d.get("reason", "")) for d in _of_type(details, "ErrorInfo")}
    text = f"{status} {exc.message or ''}".upper()

    if code in (401, 403) or "API_KEY_INVALID" in reasons:
        return AuthenticationFailed(f"{said} (check GEMINI_API_KEY / GOOGLE_API_KEY)")
    if code == 429:
        if _per_day_quota(details):
            return QuotaExhausted(f"{said} (daily quota used up: the rest waits for the next run)")
        delay = retry_delay_seconds(details)
        return RateLimited(said + (f" (retry in {delay:g} s)" if delay is not None else ""), retry_after=delay)
    if (code in _PERMANENT_CODES or "INVALID_ARGUMENT" in text or "FAILED_PRECONDITION" in text
            or "SAFETY" in text or "BLOCKED" in text):
        return PermanentError(said, error_class=f"permanent:{code}")
    return ServiceUnavailable(said, error_class=f"retryable:{code}")


@contextmanager
def map_gemini_errors(api_key: str | None = None) -> Iterator[None]:
    """Turn exceptions of the google-genai SDK raised inside the block into :mod:`tasks.failures` classes.

    The table in this module's docstring is the contract. ``api_key`` is
    removed from any text taken from the service. The original exception is
    not chained (its text holds the whole response body and request details).
    """
    try:
        yield
    except errors.APIError as exc:
        raise _from_api_error(exc, api_key) from None
    except httpx2.TimeoutException as exc:
        raise ServiceTimeout(f"Gemini did not answer in time ({type(exc).__name__})") from None
    except httpx2.TransportError as exc:
        raise NetworkError(f"connection to Gemini failed ({type(exc).__name__}: {_clean(exc, api_key)})") from None
    except json.JSONDecodeError:
        raise InvalidOutput("Gemini answered with a body that is not JSON") from None
    except ValidationError:  # a JSON answer the SDK's response types cannot hold
        raise InvalidOutput("Gemini answered with JSON of an unexpected shape") from None


def _name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def check_answer(response: types.GenerateContentResponse) -> types.Candidate:
    """The first candidate of a 200 answer, or the failure hidden in it.

    Raises ContentBlocked (``blocked:<REASON>``) when the prompt was blocked
    (``prompt_feedback.block_reason``) or the candidate stopped for a safety
    reason; InvalidOutput when there is no candidate, it stopped at
    MAX_TOKENS, or it has no content.
    """
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        raise ContentBlocked(_name(feedback.block_reason))
    if not response.candidates:
        raise InvalidOutput("Gemini answered without a candidate")
    candidate = response.candidates[0]
    reason = _name(candidate.finish_reason)
    if reason in _BLOCK_REASONS:
        raise ContentBlocked(reason)
    if reason == "MAX_TOKENS":
        raise InvalidOutput("Gemini's answer stopped at MAX_TOKENS (truncated)")
    if candidate.content is None or not candidate.content.parts:
        raise InvalidOutput(f"Gemini's answer is empty (finish reason {reason or 'none'})")
    return candidate


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
    costs little. Transparency is flattened onto white. Raises BadInput
    naming the file when it cannot be read.
    """
    try:
        with Image.open(asset.path) as src:
            w, h = src.size
            scale = max_px / max(w, h)
            if src.format == "JPEG" and scale < 1:
                src.draft("RGB", (max(1, int(w * scale)), max(1, int(h * scale))))
            im = src
            if im.mode not in ("RGB", "RGBA", "L"):
                alpha = im.mode in ("LA", "PA", "RGBa", "La") or "transparency" in im.info
                im = im.convert("RGBA" if alpha else "RGB")
            im.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
            im = ImageOps.exif_transpose(im)
            if im.mode == "RGBA":
                flat = Image.new("RGB", im.size, (255, 255, 255))
                flat.paste(im, mask=im.getchannel("A"))
                im = flat
            elif im.mode != "RGB":
                im = im.convert("RGB")
            buf = BytesIO()
            im.save(buf, "JPEG", quality=85)
            return buf.getvalue()
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise BadInput(asset.name, f"cannot read the image ({type(exc).__name__})") from None


def _unique(words: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for w in words:
        w = " ".join(w.split())
        if w:
            seen.setdefault(w.lower(), w)
    return list(seen.values())


class GeminiDescriber:
    """Metadata from Gemini: one ``generate_content`` call per asset.

    Thread-safe (one shared client). Raises only :mod:`tasks.failures`
    classes, as tabled in this module's docstring; BadInput when the image
    cannot be read (no request is made then).
    """

    def __init__(self, settings: GeminiSettings, api_key: str) -> None:
        self.settings = settings
        self.name = f"gemini:{settings.model}"
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._config = types.GenerateContentConfig(
            response_mime_type="application/json",
            response_schema=StockAnswer,
        )
        self._prompt = describe_prompt(settings.language)

    def __repr__(self) -> str:  # never show the key
        return f"GeminiDescriber(model={self.settings.model!r})"

    def describe(self, asset: Asset) -> Metadata:
        image = types.Part.from_bytes(data=image_for_model(asset), mime_type="image/jpeg")
        with map_gemini_errors(self._api_key):
            response = self._client.models.generate_content(
                model=self.settings.model, contents=[image, self._prompt], config=self._config,
            )
        answer = parse_answer(response)
        usage = response.usage_metadata
        return Metadata(
            title=" ".join(answer.title.split()),
            description=" ".join(answer.description.split()),
            keywords=_unique(answer.keywords),
            adobe_category=answer.adobe_category,
            category_hints=_unique(answer.category_hints + answer.dreamstime_hints),
            language=self.settings.language,
            describer=self.name,
            tokens=(usage.total_token_count or 0) if usage else 0,
        )
