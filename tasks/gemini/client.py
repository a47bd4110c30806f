"""The Gemini boundary: the SDK client, and the one place where Gemini's failures become ours.

The SDK's own retries are off (``HttpRetryOptions(attempts=1)``) and a
timeout is always set, so the caller owns every retry and sees every attempt.

Failures reach the caller only as :mod:`tasks.core.errors` classes, built in two
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

So: retry :class:`~tasks.core.errors.TransientError` (waiting at least
``retry_after`` when it is set), park :class:`~tasks.core.errors.PermanentError`
at once, stop calling Gemini on :class:`~tasks.core.errors.StageStopped`. The
HTTP code is the part of ``error_class`` after the colon, so when retries run
out the seed's parked class is ``exhausted:`` + that part (``exhausted:503``,
``exhausted:429``; ``exhausted:timeout``, ``exhausted:network`` for transport
failures) and ``invalid_output`` keeps its name
(:func:`tasks.stores.dead_letter.parked_error_class` does this).

Messages are built here from the HTTP code, status, reason and the service's
own message with anything key-shaped removed; the SDK's exception (whose text
holds the whole response body) is not chained, so the API key cannot reach a
log, the dead-letter store or the user.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Any, Iterator

import httpx2
from google import genai
from google.genai import errors, types
from pydantic import ValidationError

from tasks.core.errors import (
    AuthenticationFailed,
    ContentBlocked,
    InvalidOutput,
    MicrostockError,
    NetworkError,
    QuotaExhausted,
    RateLimited,
    RequestRejected,
    ServiceTimeout,
    ServiceUnavailable,
)
from tasks.core.secrets import redact
from tasks.core.settings import GeminiSettings


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
        return RequestRejected(said, code=code)
    return ServiceUnavailable(said, code=code)


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
