"""The error tree: error_class is derived from the class and its code; classes survive pickling."""

from __future__ import annotations

import pickle

import pytest

from tasks.core.errors import (
    AuthenticationFailed,
    ContentBlocked,
    FtpTemporary,
    InvalidOutput,
    MicrostockError,
    NetworkError,
    PermanentError,
    QuotaExhausted,
    RateLimited,
    RequestRejected,
    ServiceTimeout,
    ServiceUnavailable,
    StageStopped,
    TransientError,
    error_class_of_parked,
)


@pytest.mark.parametrize("exc, error_class, group", [
    (ServiceUnavailable("x", code=503), "retryable:503", TransientError),
    (RateLimited("x", retry_after=13.0), "retryable:429", TransientError),
    (FtpTemporary("x", code="421"), "ftp:421", TransientError),
    (NetworkError("x", code="dns"), "network:dns", TransientError),
    (ServiceTimeout("x"), "timeout", TransientError),
    (RequestRejected("x", code=400), "permanent:400", PermanentError),
    (ContentBlocked("SAFETY"), "blocked:SAFETY", PermanentError),
    (AuthenticationFailed("x", code="ftp:530"), "auth:ftp:530", StageStopped),
    (QuotaExhausted("x"), "quota:daily", StageStopped),
])
def test_error_class_is_kind_and_code_and_the_group_says_what_to_do(exc, error_class, group):
    assert exc.error_class == error_class and isinstance(exc, group)


@pytest.mark.parametrize("exc, parked", [
    (ServiceUnavailable("x", code=503), "exhausted:503"),
    (RateLimited("x"), "exhausted:429"),
    (ServiceTimeout("x"), "exhausted:timeout"),
    (NetworkError("x"), "exhausted:network"),
    (InvalidOutput("x"), "invalid_output"),
    (RequestRejected("x", code=404), "permanent:404"),
    (ContentBlocked("PROHIBITED_CONTENT"), "blocked:PROHIBITED_CONTENT"),
    (KeyError("boom"), "unknown:KeyError"),
])
def test_a_parked_job_is_named_from_its_class(exc, parked):
    assert error_class_of_parked(exc) == parked


def test_leaves_survive_pickling_with_their_code_and_fields():
    exc = RateLimited("slow down", retry_after=7.5)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is RateLimited and back.error_class == "retryable:429" and back.retry_after == 7.5
    assert isinstance(pickle.loads(pickle.dumps(ContentBlocked("SPII"))), MicrostockError)
