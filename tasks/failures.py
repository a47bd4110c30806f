"""What can go wrong, grouped by what the caller does about it.

One base error, classes grouped by the caller's response (retry, park, stop
the stage, reject the input). The lower libraries' exceptions are turned into
these at one boundary per library: ``tasks.describers.gemini.map_gemini_errors``
for the Gemini SDK and ``tasks.transports.base.map_transport_errors`` for the
upload protocols. Nothing else in the project classifies failures.

Every message is safe to show a user: boundaries build messages from status
codes and reasons, never from request headers, URLs with credentials or keys.
"""

from __future__ import annotations


class MicrostockError(Exception):
    """Base of every error this project raises on purpose."""

    #: Short machine-readable class, stored in the dead-letter store
    #: (``permanent:400``, ``blocked:SAFETY``, ``invalid_output`` ...).
    error_class: str = "unknown"

    def __init__(self, message: str, *, error_class: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_class is not None:
            self.error_class = error_class

    def __reduce__(self):  # keep subclasses and error_class across pickling
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# --- retry: the same call may succeed after a wait ---------------------------------


class TransientError(MicrostockError):
    """A failure that may pass: retry with backoff, park when attempts run out."""

    error_class = "transient"
    #: Seconds the service asked us to wait before the next attempt, if it said.
    retry_after: float | None = None


class ServiceTimeout(TransientError):
    """The service did not answer in time."""

    error_class = "timeout"


class NetworkError(TransientError):
    """The connection was refused, dropped or reset."""

    error_class = "network"


class ServiceUnavailable(TransientError):
    """The service answered with a temporary error (5xx, FTP 4xx)."""


class RateLimited(TransientError):
    """The service asked us to slow down (HTTP 429); ``retry_after`` says how long."""

    def __init__(self, message: str, *, retry_after: float | None = None, error_class: str | None = None) -> None:
        super().__init__(message, error_class=error_class or "retryable:429")
        self.retry_after = retry_after


class InvalidOutput(TransientError):
    """The model answered, but not with usable metadata: retry a few times, then park."""

    error_class = "invalid_output"


# --- park: the same input will fail the same way ------------------------------------


class PermanentError(MicrostockError):
    """The request itself is at fault: park the job without retrying."""

    error_class = "permanent"


class ContentBlocked(PermanentError):
    """The model refused the content (safety); ``error_class`` is ``blocked:<REASON>``."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"blocked by the model's safety filter ({reason})", error_class=f"blocked:{reason}")
        self.reason = reason


# --- stop the stage: every further call would fail the same way ----------------------


class StageStopped(MicrostockError):
    """Calling again is pointless this run: stop the stage, leave the rest pending."""


class AuthenticationFailed(StageStopped):
    """The key or password was refused."""

    error_class = "auth"


class QuotaExhausted(StageStopped):
    """The daily quota is used up; the rest waits for the next run."""

    error_class = "quota:daily"


# --- a local store cannot be used right now -----------------------------------------


class StoreUnavailable(MicrostockError):
    """A local store (e.g. ``dead_letter.db``) is locked past its busy timeout or unreadable.

    The message names the file; the job that needed the store stays pending
    and the other jobs go on.
    """

    error_class = "store_unavailable"


# --- reject the input: this file cannot be used -------------------------------------


class BadInput(MicrostockError):
    """A file cannot be used (corrupt, empty, too large, too small, wrong format)."""

    error_class = "bad_input"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ConfigError(MicrostockError):
    """The configuration or workdir is unusable: the run cannot proceed."""

    error_class = "config"
