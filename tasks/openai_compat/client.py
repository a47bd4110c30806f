"""The OpenAI-compatible boundary: the ``openai`` SDK's client on any Chat Completions endpoint (Ollama, LM Studio,
vLLM, llama.cpp's server, OpenRouter, Gemini's own ``…/v1beta/openai``), and the one place where its failures
become ours — as :mod:`tasks.gemini.client` is for google-genai, with the same classes for the same causes:

=========================================  ======================  ==========================
what happened                              raised                  ``error_class``
=========================================  ======================  ==========================
401, 403                                   AuthenticationFailed    ``auth``
429 ``insufficient_quota``                 StageStopped            ``quota:account``
429 otherwise                              RateLimited             ``retryable:429``
                                           (``retry_after`` = the ``Retry-After`` header, else None)
404 naming the model                       StageStopped            ``model``
404 otherwise (no such address)            StageStopped            ``request_shape``
400 naming ``response_format``             StageStopped            ``request_shape``
other 400, 413, 422 (an image the model    PermanentError          ``permanent:<code>``
cannot read, a request it refuses)
any other HTTP error (5xx, 408, 409 …)     TransientError          ``retryable:<code>``
timeout                                    TransientError          ``timeout``
refused / dropped / reset connection       TransientError          ``network``
200 of an unexpected shape                 InvalidOutput           ``invalid_output``
=========================================  ======================  ==========================

The SDK's own retries are off (``max_retries=0``) and a timeout is always set, so the describe stage's one retry
policy sees every attempt. Messages carry the HTTP code and the server's own message with the key removed; the
SDK's exception is not chained.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from tasks.core.errors import (
    MODEL,
    NETWORK,
    REQUEST_SHAPE,
    TIMEOUT,
    AuthenticationFailed,
    ConfigError,
    InvalidOutput,
    MicrostockError,
    PermanentError,
    RateLimited,
    StageStopped,
    TransientError,
)
from tasks.core.secrets import redact
from tasks.core.settings import DescriberSettings

if TYPE_CHECKING:  # the SDK loads only when this describer is used
    import openai

#: Sent as the key when none is set: the SDK refuses to start without one, and a local server ignores it.
NO_KEY = "no-key"
_PERMANENT_CODES = frozenset({400, 413, 422})


def chat_client(settings: DescriberSettings, api_key: str | None) -> "openai.OpenAI":
    """The SDK's client on ``settings.base_url``, with ``settings.timeout_s`` and without its own retries."""
    import openai

    return openai.OpenAI(api_key=api_key or NO_KEY, base_url=settings.base_url, timeout=settings.timeout_s,
                         max_retries=0)


def _clean(text: Any, api_key: str | None) -> str:
    """The server's text without the key or anything key-shaped, on one line, at most 200 characters."""
    text = redact(" ".join(str(text or "").split()), api_key, mark="[redacted]")
    return text[:200] + ("…" if len(text) > 200 else "")


def _server_message(exc: "openai.APIStatusError") -> tuple[str, str]:
    """(the error's message, its code) from the body every compatible server sends (``{"error": {...}}``)."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        return str(err.get("message") or ""), str(err.get("code") or err.get("type") or "")
    return str(err or exc.message or ""), ""


def retry_after_seconds(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds (its number-of-seconds form); None when absent or a date."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def error_of_status(exc: "openai.APIStatusError", settings: DescriberSettings,
                    api_key: str | None) -> MicrostockError:
    """The class of an HTTP error of the endpoint, by the table of this module."""
    code = exc.status_code
    message, kind = _server_message(exc)
    message = _clean(message, api_key)
    said = f"{settings.base_url} answered {code}" + (f": {message}" if message else "")
    if code in (401, 403):
        return AuthenticationFailed(f"{said} (check OPENAI_API_KEY for {settings.base_url})")
    if code == 429:
        if kind == "insufficient_quota":
            return StageStopped(f"{said} (the account's quota is used up: the rest waits for the next run)",
                                kind="quota", code="account")
        delay = retry_after_seconds(exc.response.headers)
        return RateLimited(said + (f" (retry in {delay:g} s)" if delay is not None else ""), retry_after=delay)
    if code == 404:
        if "model" in message.lower() or kind == "model_not_found":
            return StageStopped(f"`describer.model = {settings.model}` is not served at {settings.base_url} "
                                f"({message}): set one its GET /models lists", kind=MODEL)
        return StageStopped(f"{settings.base_url} serves no Chat Completions ({said}): check `describer.base_url` "
                            "(it ends in /v1 for most servers)", kind=REQUEST_SHAPE)
    if code == 400 and "response_format" in message.lower():
        return StageStopped(f"{said}. Every call would be refused: the server takes no JSON schema "
                            "(response_format)", kind=REQUEST_SHAPE)
    if code in _PERMANENT_CODES:
        return PermanentError(said, code=code)
    return TransientError(said, kind="retryable", code=code)


@contextmanager
def map_openai_errors(settings: DescriberSettings, api_key: str | None) -> Iterator[None]:
    """Turn the ``openai`` SDK's exceptions raised inside the block into :mod:`tasks.core.errors` classes (the
    table of this module); ``api_key`` is removed from any text taken from the server."""
    import openai

    try:
        yield
    except openai.APIStatusError as exc:
        raise error_of_status(exc, settings, api_key) from None
    except openai.APITimeoutError:
        raise TransientError(f"{settings.base_url} did not answer in time", kind=TIMEOUT) from None
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise TransientError(f"connection to {settings.base_url} failed ({type(cause).__name__}: "
                             f"{_clean(cause, api_key)})", kind=NETWORK) from None
    except (openai.APIResponseValidationError, json.JSONDecodeError):
        raise InvalidOutput(f"{settings.base_url} answered with a body of an unexpected shape") from None


def served_models(settings: DescriberSettings, api_key: str | None) -> list[str]:
    """The model ids the endpoint's ``GET /models`` lists, sorted; ConfigError (one line) when it cannot be read
    (refused key, no server, no such address)."""
    client = chat_client(settings, api_key)
    try:
        with map_openai_errors(settings, api_key):
            return sorted(m.id for m in client.models.list())
    except MicrostockError as exc:
        raise ConfigError(f"[describer] {settings.base_url}: cannot list its models ({exc.message})") from None
    finally:
        client.close()


def check_listed(settings: DescriberSettings, api_key: str | None) -> None:
    """ConfigError (the run cannot start) when the endpoint's ``GET /models`` does not list ``describer.model``,
    or cannot be read at all (refused key, no server, no such address): asked before any chat call. A listed
    ``models/<name>`` is the model ``<name>`` (Gemini's own names its models so; whether its OpenAI-compatible list
    does was not confirmed: docs/INTERFACE.md, "Describers")."""
    served = served_models(settings, api_key)
    if settings.model not in served and settings.model not in {m.removeprefix("models/") for m in served}:
        listed = ", ".join(served[:12]) + (" …" if len(served) > 12 else "")
        raise ConfigError(f"[describer] model = {settings.model!r} is not served at {settings.base_url} "
                          f"(it lists: {listed or 'nothing'}); set one it lists")
