"""Every failure Gemini can produce, through the real SDK and real HTTP, mapped to one class.

The fake server sends the real body shapes; the describer must raise the
:mod:`tasks.core.errors` class the caller's retry policy depends on, with the
dead-letter ``error_class``, after exactly one request, and with the API key
nowhere in the exception, its repr or its traceback.
"""

from __future__ import annotations

import pickle
import socket
import time
import traceback

import pytest
from google.genai import types
from PIL import Image

from tasks.core.errors import (
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
from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.client import FINISH_REASONS, retry_delay_seconds
from tasks.gemini.describer import GeminiDescriber
from tests.fakes.gemini import (  # noqa: F401
    FAKE_KEY,
    GOOD_METADATA,
    Reply,
    answer_json,
    answer_text,
    daily_quota,
    drop,
    error,
    fake_gemini,
    finished,
    garbage,
    key_invalid,
    location_refused,
    model_retired,
    prompt_blocked,
    rate_limited,
    retry_info,
    slow,
    truncated,
    unknown_field,
)

TIMEOUT_S = 0.4

CASES = {
    # HTTP errors, by code and status as the seed classifies them
    "400": (error(400, "Request contains an invalid argument."), PermanentError, "permanent:400"),
    "422": (error(422, "Unprocessable"), PermanentError, "permanent:422"),
    "400 failed precondition": (error(400, "Precondition check failed.", status="FAILED_PRECONDITION"),
                                PermanentError, "permanent:400"),
    # whole-run refusals (issue 13): the stage stops
    "404 model": (error(404, "models/nope is not found for API version v1beta"), StageStopped, "model"),
    "404 retired model": (model_retired("gemini-2.5-flash"), StageStopped, "model"),
    "400 location": (location_refused(), StageStopped, "location"),
    "400 unknown field": (unknown_field("foo", "generation_config"), StageStopped, "request_shape"),
    "400 schema keyword": (unknown_field("additionalProperties", "generation_config.response_schema"),
                           StageStopped, "request_shape"),
    "500": (error(500, "An internal error has occurred."), TransientError, "retryable:500"),
    "502": (error(502, "Bad gateway", status="UNAVAILABLE"), TransientError, "retryable:502"),
    "503": (error(503, "The model is overloaded. Please try again later."), TransientError, "retryable:503"),
    "504": (error(504, "Deadline expired before operation could complete."), TransientError, "retryable:504"),
    "502 HTML from a proxy": (Reply(status=502, body=b"<html><h1>502 Bad Gateway</h1></html>",
                                    content_type="text/html"),
                              TransientError, "retryable:502"),
    "408 unknown to the seed": (error(408, "timeout"), TransientError, "retryable:408"),
    # the key
    "401": (error(401, "Request had invalid authentication credentials."), AuthenticationFailed, "auth"),
    "403": (error(403, "Your API key was reported as leaked."), AuthenticationFailed, "auth"),
    "400 API_KEY_INVALID": (key_invalid(), AuthenticationFailed, "auth"),
    # 429
    "429 RetryInfo": (rate_limited("2s"), RateLimited, "retryable:429"),
    "429 bare": (error(429, "Resource has been exhausted (e.g. check quota)."), RateLimited, "retryable:429"),
    "429 per day": (daily_quota(), StageStopped, "quota:daily"),
    # transport
    "timeout": (slow(5), TransientError, "timeout"),
    "dropped connection": (drop(), TransientError, "network"),
    # 200 without usable output
    "garbage 200": (garbage(), InvalidOutput, "invalid_output"),
    "MAX_TOKENS": (truncated(), OutputTruncated, "invalid_output"),
    "CONTINUATION": (truncated(reason="CONTINUATION"), OutputTruncated, "invalid_output"),
    "schema mismatch": (answer_json({"title": "only a title"}), InvalidOutput, "invalid_output"),
    "category out of range": (answer_json(dict(GOOD_METADATA, adobe_category=40)), InvalidOutput, "invalid_output"),
    "blank title": (answer_json(dict(GOOD_METADATA, title="   ")), InvalidOutput, "invalid_output"),
    "no keywords": (answer_json(dict(GOOD_METADATA, keywords=[" ", ""])), InvalidOutput, "invalid_output"),
    "text not JSON": (answer_text("Here is your metadata: a sunset."), InvalidOutput, "invalid_output"),
    "empty text": (answer_text(""), InvalidOutput, "invalid_output"),
    "no candidates": (Reply(body={"usageMetadata": {"totalTokenCount": 3}}), InvalidOutput, "invalid_output"),
    "unexpected JSON shape": (Reply(body={"candidates": [{"content": "oops"}]}), InvalidOutput, "invalid_output"),
    # safety blocks arrive as 200
    "finish SAFETY": (finished("SAFETY"), ContentBlocked, "blocked:SAFETY"),
    "finish PROHIBITED_CONTENT": (finished("PROHIBITED_CONTENT"), ContentBlocked, "blocked:PROHIBITED_CONTENT"),
    "finish IMAGE_SAFETY": (finished("IMAGE_SAFETY"), ContentBlocked, "blocked:IMAGE_SAFETY"),
    "finish BLOCKLIST": (finished("BLOCKLIST"), ContentBlocked, "blocked:BLOCKLIST"),
    "finish SPII": (finished("SPII"), ContentBlocked, "blocked:SPII"),
    "prompt blocked": (prompt_blocked("SAFETY"), ContentBlocked, "blocked:SAFETY"),
    "prompt blocked OTHER": (prompt_blocked("OTHER"), ContentBlocked, "blocked:OTHER"),
}

#: What the caller does, by group (a case's class is the group itself, or a leaf of it).
GROUP = {PermanentError: PermanentError, ContentBlocked: PermanentError, AuthenticationFailed: StageStopped,
         StageStopped: StageStopped}


@pytest.fixture
def asset(tmp_path) -> Asset:
    path = tmp_path / "sunset.jpg"
    Image.new("RGB", (320, 240), (250, 120, 60)).save(path, "JPEG")
    return Asset(name=path.name, asset_id=sha256_file(path), path=path)


@pytest.fixture
def describer(fake_gemini):
    return GeminiDescriber(GeminiSettings(timeout_s=TIMEOUT_S), FAKE_KEY)


@pytest.mark.parametrize("case", list(CASES))
def test_failure_is_mapped_to_its_class_after_one_request(case, fake_gemini, describer, asset):
    reply, cls, error_class = CASES[case]
    fake_gemini.push(reply)
    with pytest.raises(cls) as info:
        describer.describe(asset)
    exc = info.value
    assert type(exc) is cls
    assert exc.error_class == error_class
    assert isinstance(exc, GROUP.get(cls, TransientError))
    assert len(fake_gemini.requests) == 1
    shown = "".join(traceback.format_exception(exc)) + repr(exc) + exc.message
    assert FAKE_KEY not in shown
    # the SDK's exception (its text is the whole response body) is neither chained nor shown as context
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


def test_retry_delay_of_RetryInfo_becomes_retry_after(fake_gemini, describer, asset):
    fake_gemini.push(rate_limited("13s"), rate_limited("0.250s"), rate_limited(None))
    raised = []
    for _ in range(3):
        with pytest.raises(RateLimited) as info:
            describer.describe(asset)
        raised.append(info.value)
    assert [e.retry_after for e in raised] == [13.0, 0.25, None]
    assert "retry in 13 s" in str(raised[0])


def test_retry_delay_parser():
    assert retry_delay_seconds([retry_info("2s")]) == 2.0
    assert retry_delay_seconds([retry_info("1.5s")]) == 1.5
    assert retry_delay_seconds([retry_info("soon")]) is None
    assert retry_delay_seconds([{"@type": "type.googleapis.com/google.rpc.Help", "retryDelay": "9s"}]) is None
    assert retry_delay_seconds([]) is None
    # current 429s also say it in the message, with many decimals; RetryInfo wins when both are there
    said = "You exceeded your current quota …\nPlease retry in 11.665902715s."
    assert retry_delay_seconds([], said) == 11.665902715
    assert retry_delay_seconds([retry_info("11s")], said) == 11.0
    assert retry_delay_seconds([], "Please retry later.") is None


def test_a_429_without_retry_info_takes_the_delay_its_message_names(fake_gemini, describer, asset):
    fake_gemini.push(rate_limited(None, retry_in="49.1s"), rate_limited(None))
    raised = []
    for _ in range(2):
        with pytest.raises(RateLimited) as info:
            describer.describe(asset)
        raised.append(info.value.retry_after)
    assert raised == [49.1, None]  # None: the caller waits a full minute (tasks.core.retry.rate_limited_wait)


def test_daily_quota_wins_over_its_retry_info(fake_gemini, describer, asset):
    fake_gemini.push(daily_quota())
    with pytest.raises(StageStopped) as info:
        describer.describe(asset)
    assert "daily quota" in str(info.value) and info.value.error_class == "quota:daily"


def test_timeout_is_the_configured_one(fake_gemini, describer, asset):
    fake_gemini.push(slow(5))
    started = time.monotonic()
    with pytest.raises(TransientError) as info:
        describer.describe(asset)
    assert info.value.error_class == "timeout"
    assert TIMEOUT_S <= time.monotonic() - started < 3


def test_refused_connection_is_a_network_error(monkeypatch, asset):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(TransientError) as info:
        GeminiDescriber(GeminiSettings(timeout_s=2), FAKE_KEY).describe(asset)
    assert "ConnectError" in str(info.value) and info.value.error_class == "network"


def test_service_message_is_kept_but_an_echoed_key_is_not(fake_gemini, describer, asset):
    fake_gemini.push(error(400, f"API key {FAKE_KEY} not valid for https://x/v1/models?key={FAKE_KEY}&alt=json"),
                     error(503, "The model is overloaded. Please try again later."),
                     error(500, "internal: key=AIzaSyOTHER-key-0000000000000000000 rejected"))
    messages = []
    for _ in range(3):
        with pytest.raises(Exception) as info:
            describer.describe(asset)
        messages.append(str(info.value))
    assert all(FAKE_KEY not in m and "AIzaSyOTHER" not in m for m in messages)
    assert "[redacted]" in messages[0]
    assert messages[1] == "Gemini answered 503 UNAVAILABLE: The model is overloaded. Please try again later."


def test_blocked_reason_is_on_the_exception(fake_gemini, describer, asset):
    fake_gemini.push(finished("PROHIBITED_CONTENT"))
    with pytest.raises(ContentBlocked) as info:
        describer.describe(asset)
    assert info.value.reason == "PROHIBITED_CONTENT"


@pytest.mark.parametrize("exc", [
    RateLimited("Gemini answered 429", retry_after=2.0),
    TransientError("Gemini answered 503", kind="retryable", code=503),
    PermanentError("Gemini answered 400", code=400),
    ContentBlocked("SAFETY"),
    StageStopped("daily", kind="quota", code="daily"),
])
def test_mapped_errors_survive_pickling_with_their_class(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert (type(back), back.error_class, str(back)) == (type(exc), exc.error_class, str(exc))
    assert getattr(back, "retry_after", None) == getattr(exc, "retry_after", None)


def test_any_key_echoed_by_the_service_is_removed_not_only_google_shaped_ones(fake_gemini, asset):
    odd_key = "plain-secret-4711"
    fake_gemini.push(error(500, f"backend refused credential {odd_key}"))
    with pytest.raises(TransientError) as info:
        GeminiDescriber(GeminiSettings(timeout_s=2), odd_key).describe(asset)
    assert info.value.error_class == "retryable:500"
    assert odd_key not in "".join(traceback.format_exception(info.value))
    assert "backend refused credential [redacted]" in str(info.value)


def test_truncated_answer_says_it_stopped_at_max_tokens(fake_gemini, describer, asset):
    fake_gemini.push(truncated())
    with pytest.raises(InvalidOutput, match="MAX_TOKENS"):
        describer.describe(asset)


DECIDED = {"blocked": ContentBlocked, "refused": PermanentError, "truncated": OutputTruncated,
           "account": StageStopped, "retry": InvalidOutput}
#: The error_class each decision parks or stops under (``{}``: the finish reason).
DECIDED_CLASS = {"blocked": "blocked:{}", "refused": "refused:{}", "truncated": "invalid_output",
                 "account": "account", "retry": "invalid_output"}


@pytest.mark.parametrize("reason", [r.name for r in types.FinishReason if r.name != "STOP"])
def test_every_finish_reason_reaches_its_class_through_the_sdk(reason, fake_gemini, describer, asset):
    fake_gemini.push(finished(reason))
    with pytest.raises(MicrostockError) as info:
        describer.describe(asset)
    cls = DECIDED[FINISH_REASONS[reason]]
    assert type(info.value) is cls
    assert info.value.error_class == DECIDED_CLASS[FINISH_REASONS[reason]].format(reason)
    assert reason in info.value.message or info.value.error_class == f"blocked:{reason}"
    assert len(fake_gemini.requests) == 1


@pytest.mark.parametrize("reason", [r.name for r in types.BlockedReason])
def test_every_block_reason_is_parked_as_blocked_through_the_sdk(reason, fake_gemini, describer, asset):
    fake_gemini.push(prompt_blocked(reason))
    with pytest.raises(ContentBlocked) as info:
        describer.describe(asset)
    assert info.value.error_class == f"blocked:{reason}"


def test_an_api_version_other_than_v1_or_v1beta_is_a_config_error(tmp_path):
    from tasks.core.errors import ConfigError
    from tasks.core.settings import load_settings

    path = tmp_path / "microstock.toml"
    path.write_text('[gemini]\napi_version = "v2"\n')
    with pytest.raises(ConfigError, match="gemini.api_version"):
        load_settings(path)
