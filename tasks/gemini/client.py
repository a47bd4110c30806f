"""The Gemini boundary: the SDK client, and the one place where Gemini's failures become ours.

The SDK's own retries are off (``HttpRetryOptions(attempts=1)``), a timeout is
always set and the API version is the configured one (``gemini.api_version``),
so the caller owns every retry and sees every attempt.

Failures reach the caller only as :mod:`tasks.core.errors` classes, built in two
places of this module and nowhere else:

* :func:`map_gemini_errors` — exceptions out of the SDK (HTTP errors, transport
  errors, a 200 whose body is not JSON), from its ``generateContent`` client
  and its Interactions client (clips) alike;
* :func:`check_answer` — a 200 that carries no usable answer (blocks, finish
  reasons, empty output), which the SDK does not raise for; every finish and
  block reason is classed in :data:`FINISH_REASONS` / :data:`BLOCK_REASONS`.

The contract for the caller (retry policy):

=========================================  ======================  ==========================
what happened                              raised                  ``error_class``
=========================================  ======================  ==========================
403 "…the File <id> or it may not exist"   TransientError          ``retryable:file_gone``
(Files API: an uploaded clip expired or
was deleted; not the key)
400 FAILED_PRECONDITION "…is not in an     TransientError          ``retryable:file_not_active``
ACTIVE state" (a clip used too early)
401, 403, 400 ``API_KEY_INVALID``          AuthenticationFailed    ``auth``
429 whose QuotaFailure quota is per day    StageStopped            ``quota:daily``
429 otherwise                              RateLimited             ``retryable:429``
                                           (``retry_after`` = RetryInfo ``retryDelay``, else the
                                           message's "retry in Ns", else None)
404 (model unknown or shut down)           StageStopped            ``model``
404 of the URL (no such API version)       StageStopped            ``request_shape``
400 FAILED_PRECONDITION "User location"    StageStopped            ``location``
400 "Invalid JSON payload" / "Cannot find  StageStopped            ``request_shape``
field" / "Invalid value at
'generation_config…" / thinking refused
other 400, 422, INVALID_ARGUMENT,          PermanentError          ``permanent:<code>``
FAILED_PRECONDITION, "SAFETY"/"BLOCKED"
any other HTTP error (5xx, 408 ...)        TransientError          ``retryable:<code>``
timeout (connect, read, write, pool)       TransientError          ``timeout``
refused / dropped / reset connection       TransientError          ``network``
200 not JSON, no candidates, empty         InvalidOutput           ``invalid_output``
200 with a finish / block reason           as :data:`FINISH_REASONS` / :data:`BLOCK_REASONS`
=========================================  ======================  ==========================

So: retry :class:`~tasks.core.errors.TransientError` (waiting at least
``retry_after`` when it is set), park :class:`~tasks.core.errors.PermanentError`
at once, stop calling Gemini on :class:`~tasks.core.errors.StageStopped` (its
one-line message names the setting to change). The HTTP code is the part of
``error_class`` after the colon, so when retries run out the seed's parked
class is ``exhausted:`` + that part (``exhausted:503``; ``exhausted:timeout``,
``exhausted:network`` for transport failures) and ``invalid_output`` keeps its
name (:func:`tasks.core.errors.error_class_of_parked` does this).

Messages are built here from the HTTP code, status, reason and the service's
own message with anything key-shaped removed; the SDK's exception (whose text
holds the whole response body) is not chained, so the API key cannot reach a
log, the dead-letter store or the user.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from pydantic import ValidationError

from tasks.core.errors import (
    FILE_GONE,
    MODEL,
    NETWORK,
    REQUEST_SHAPE,
    TIMEOUT,
    AuthenticationFailed,
    ContentBlocked,
    InvalidOutput,
    MicrostockError,
    OutputTruncated,
    PermanentError,
    RateLimited,
    StageStopped,
    TransientError,
)
from tasks.core.records import Usage
from tasks.core.secrets import redact
from tasks.core.settings import GeminiSettings
from tasks.gemini.models import suggestion

if TYPE_CHECKING:  # the SDK (and its HTTP client) is imported where a call is made, not by an offline run
    from google import genai
    from google.genai import errors, types

# --- the client -----------------------------------------------------------------------


def gemini_client(settings: GeminiSettings, api_key: str) -> genai.Client:
    """A client on ``settings.api_version``, with a timeout and without the SDK's own retries.

    The endpoint is the SDK's choice: ``GOOGLE_GEMINI_BASE_URL`` when set.
    Keep a reference to the returned client for as long as it is used (a
    garbage-collected client closes its connections under a running call).
    """
    from google import genai
    from google.genai import types

    return genai.Client(
        api_key=api_key,
        vertexai=False,
        http_options=types.HttpOptions(
            api_version=settings.api_version,
            timeout=int(settings.timeout_s * 1000),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )


@dataclass(frozen=True)
class Target:
    """What a call asked for, so a whole-run failure can name the setting to change."""

    #: ``gemini.model`` or ``gemini.image_model``.
    setting: str
    model: str
    #: ``describe``, ``image`` or ``clip`` (which models to suggest).
    use: str
    api_version: str


# --- the mapping boundary ---------------------------------------------------------------

_PERMANENT_CODES = frozenset({400, 422})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")
_RETRY_IN = re.compile(r"retry in (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)
_SHAPE = ("INVALID JSON PAYLOAD", "CANNOT FIND FIELD", "INVALID VALUE AT 'GENERATION_CONFIG", "THINKING")


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


def retry_delay_seconds(details: list[dict], message: str = "") -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"13s"``), else from the message's
    "Please retry in 11.66s."; None when neither says."""
    for info in _of_type(details, "RetryInfo"):
        m = _DURATION.match(str(info.get("retryDelay", "")))
        if m:
            return float(m.group(1))
    m = _RETRY_IN.search(message or "")
    return float(m.group(1)) if m else None


def _per_day_quota(details: list[dict]) -> bool:
    return any("PerDay" in str(v.get("quotaId", ""))
               for q in _of_type(details, "QuotaFailure") for v in q.get("violations") or [] if isinstance(v, dict))


def _pick(target: Target) -> str:
    return suggestion(target.model, target.use)


def _from_api_error(exc: errors.APIError, api_key: str | None, target: Target) -> MicrostockError:
    code = int(exc.code or 0)
    status = str(exc.status or "")
    message = _clean(exc.message, api_key)
    details = _error_details(exc.details)
    said = f"Gemini answered {code} {status}".rstrip() + (f": {message}" if message else "")
    reasons = {str(d.get("reason", "")) for d in _of_type(details, "ErrorInfo")}
    text = f"{status} {exc.message or ''}".upper()
    set_model = f"`{target.setting} = {target.model}`"

    if code == 403 and "ACCESS THE FILE" in text and "OR IT MAY NOT EXIST" in text:
        return TransientError(f"{said} (the uploaded clip is gone: the next attempt uploads it again)",
                              kind="retryable", code=FILE_GONE)
    if code == 400 and "NOT IN AN ACTIVE STATE" in text:
        return TransientError(f"{said} (the uploaded clip is not ready yet: the next attempt waits for it)",
                              kind="retryable", code="file_not_active")
    if code in (401, 403) or "API_KEY_INVALID" in reasons:
        return AuthenticationFailed(f"{said} (check GEMINI_API_KEY / GOOGLE_API_KEY)")
    if code == 429:
        if _per_day_quota(details):
            return StageStopped(f"{said} (daily quota used up: the rest waits for the next run)", kind="quota",
                                code="daily")
        delay = retry_delay_seconds(details, str(exc.message or ""))
        return RateLimited(said + (f" (retry in {delay:g} s)" if delay is not None else ""), retry_after=delay)
    if code == 404:
        if "WAS NOT FOUND ON THIS SERVER" in text:
            return StageStopped(f"Gemini serves no such address ({message}): check "
                                f"`gemini.api_version = {target.api_version}` (v1beta or v1) and "
                                "GOOGLE_GEMINI_BASE_URL if it is set", kind=REQUEST_SHAPE)
        if "NO LONGER AVAILABLE" in text:
            return StageStopped(f"{set_model} is not served any more ({message}): {_pick(target)}", kind=MODEL)
        return StageStopped(f"{set_model} is not found for API version {target.api_version} ({message}): "
                            f"{_pick(target)}", kind=MODEL)
    if code == 400 and "USER LOCATION IS NOT SUPPORTED" in text:
        return StageStopped(f"{said}. Gemini refuses requests from this network location; no setting changes "
                            "that: run from a supported country (docs/GEMINI.md)", kind="location")
    if code == 400 and any(marker in text for marker in _SHAPE):
        return StageStopped(f"{said}. Every call would be refused: check `gemini.api_version = "
                            f"{target.api_version}` and `gemini.thinking` for {target.model} (docs/GEMINI.md)",
                            kind=REQUEST_SHAPE)
    if (code in _PERMANENT_CODES or "INVALID_ARGUMENT" in text or "FAILED_PRECONDITION" in text
            or "SAFETY" in text or "BLOCKED" in text):
        return PermanentError(said, code=code)
    return TransientError(said, kind="retryable", code=code)


@contextmanager
def map_gemini_errors(target: Target, api_key: str | None = None) -> Iterator[None]:
    """Turn exceptions of the google-genai SDK raised inside the block into :mod:`tasks.core.errors` classes.

    The table in this module's docstring is the contract. ``api_key`` is
    removed from any text taken from the service. The original exception is
    not chained (its text holds the whole response body and request details).
    """
    import httpx2
    from google.genai import _interactions, errors  # the Interactions API's errors are exported there only (3.6.1)

    try:
        yield
    except errors.APIError as exc:
        raise _from_api_error(exc, api_key, target) from None
    except _interactions.APIStatusError as exc:  # the same error body, through the Interactions client
        body = exc.body if isinstance(exc.body, dict) else {"error": {"code": exc.status_code, "message": ""}}
        raise _from_api_error(errors.APIError(exc.status_code, body), api_key, target) from None
    except _interactions.APITimeoutError:
        raise TransientError("Gemini did not answer in time (APITimeoutError)", kind=TIMEOUT) from None
    except _interactions.APIConnectionError as exc:
        raise TransientError(f"connection to Gemini failed ({type(exc).__name__}: {_clean(exc, api_key)})",
                             kind=NETWORK) from None
    except _interactions.APIResponseValidationError:
        raise InvalidOutput("Gemini answered with JSON of an unexpected shape") from None
    except httpx2.TimeoutException as exc:
        raise TransientError(f"Gemini did not answer in time ({type(exc).__name__})", kind=TIMEOUT) from None
    except httpx2.TransportError as exc:
        raise TransientError(f"connection to Gemini failed ({type(exc).__name__}: {_clean(exc, api_key)})",
                             kind=NETWORK) from None
    except json.JSONDecodeError:
        raise InvalidOutput("Gemini answered with a body that is not JSON") from None
    except ValidationError:  # a JSON answer the SDK's response types cannot hold
        raise InvalidOutput("Gemini answered with JSON of an unexpected shape") from None


#: google.rpc.Code number → (HTTP status, name), as google/rpc/code.proto maps them.
_RPC_CODES = {1: (499, "CANCELLED"), 2: (500, "UNKNOWN"), 3: (400, "INVALID_ARGUMENT"), 4: (504, "DEADLINE_EXCEEDED"),
              5: (404, "NOT_FOUND"), 6: (409, "ALREADY_EXISTS"), 7: (403, "PERMISSION_DENIED"),
              8: (429, "RESOURCE_EXHAUSTED"), 9: (400, "FAILED_PRECONDITION"), 10: (409, "ABORTED"),
              11: (400, "OUT_OF_RANGE"), 12: (501, "UNIMPLEMENTED"), 13: (500, "INTERNAL"), 14: (503, "UNAVAILABLE"),
              15: (500, "DATA_LOSS"), 16: (401, "UNAUTHENTICATED")}


def error_of_status(code: int | None, message: str | None, details: Any, target: Target,
                    api_key: str | None = None) -> MicrostockError:
    """The error a ``google.rpc.Status`` stands for (a batch job's per-request error): the class a sync call
    answered with that status gets, by the same table. ``code`` is a google.rpc.Code number (1–16, as the
    REST reference types the field) or, should the service send one, an HTTP status."""
    http, status = (code, "") if code is not None and code >= 100 else _RPC_CODES.get(code or 2, (500, "UNKNOWN"))
    from google.genai import errors

    body = {"error": {"code": http, "message": message or "", "status": status, "details": details or []}}
    return _from_api_error(errors.APIError(http, body), api_key, target)


# --- 200 answers ---------------------------------------------------------------------------

#: What each ``FinishReason`` of the SDK means for the job (docs/FAILURES.md has the table):
#: ``ok`` — use the answer; ``blocked`` — ContentBlocked, parked at once; ``refused`` — PermanentError
#: ``refused:<REASON>``, parked at once; ``truncated`` — OutputTruncated (retried once with a larger budget);
#: ``account`` — StageStopped ``account``, the stage stops; ``retry`` — InvalidOutput, normal retries.
FINISH_REASONS: dict[str, str] = {
    "FINISH_REASON_UNSPECIFIED": "retry", "STOP": "ok", "MAX_TOKENS": "truncated", "SAFETY": "blocked",
    "RECITATION": "refused", "LANGUAGE": "refused", "OTHER": "retry", "BLOCKLIST": "blocked",
    "PROHIBITED_CONTENT": "blocked", "SPII": "blocked", "MALFORMED_FUNCTION_CALL": "retry",
    "IMAGE_SAFETY": "blocked", "IMAGE_PROHIBITED_CONTENT": "blocked", "IMAGE_OTHER": "retry",
    "NO_IMAGE": "retry", "IMAGE_RECITATION": "refused", "UNEXPECTED_TOOL_CALL": "retry",
    "TOO_MANY_TOOL_CALLS": "retry", "MISSING_THOUGHT_SIGNATURE": "retry", "MALFORMED_RESPONSE": "retry",
    "ESCALATION": "blocked", "PUP_LIMITED_DISABLED": "account", "CONTINUATION": "truncated",
    "MODEL_ARMOR": "blocked",
}
#: Every ``BlockedReason`` (``prompt_feedback.block_reason``) is a block of the prompt: parked at once.
BLOCK_REASONS: frozenset[str] = frozenset({"BLOCKED_REASON_UNSPECIFIED", "SAFETY", "OTHER", "BLOCKLIST",
                                           "PROHIBITED_CONTENT", "IMAGE_SAFETY", "MODEL_ARMOR", "JAILBREAK"})


def _name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def check_answer(response: types.GenerateContentResponse) -> types.Candidate:
    """The first candidate of a 200 answer, or the failure hidden in it (:data:`FINISH_REASONS`).

    A blocked prompt is ContentBlocked whatever its reason; a finish reason
    the table does not know (newer than the SDK) is InvalidOutput, retried
    as usual; a candidate without content is InvalidOutput.
    """
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        raise ContentBlocked(_name(feedback.block_reason))
    if not response.candidates:
        raise InvalidOutput("Gemini answered without a candidate")
    candidate = response.candidates[0]
    reason = _name(candidate.finish_reason)
    decision = FINISH_REASONS.get(reason, "retry") if reason else "ok"
    if decision == "blocked":
        raise ContentBlocked(reason)
    if decision == "refused":
        raise PermanentError(f"Gemini declined to answer (finish reason {reason}); the same request would too",
                             kind="refused", code=reason)
    if decision == "account":
        raise StageStopped(f"Gemini says the account is limited or disabled (finish reason {reason}): "
                           "see the project in AI Studio; no setting of this project changes it", kind="account")
    if decision == "truncated":
        raise OutputTruncated(f"Gemini's answer stopped at {reason} (truncated)", reason=reason)
    if decision == "retry":
        raise InvalidOutput(f"Gemini's answer stopped with finish reason {reason}")
    if candidate.content is None or not candidate.content.parts:
        raise InvalidOutput(f"Gemini's answer is empty (finish reason {reason or 'none'})")
    return candidate


def usage_of(response: types.GenerateContentResponse) -> Usage:
    """The answer's ``usage_metadata`` as :class:`~tasks.core.records.Usage` (zeros when absent)."""
    meta = response.usage_metadata
    if meta is None:
        return Usage()
    return Usage(prompt_tokens=meta.prompt_token_count or 0, output_tokens=meta.candidates_token_count or 0,
                 thought_tokens=meta.thoughts_token_count or 0)
