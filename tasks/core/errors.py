"""What can go wrong, grouped by what the caller does about it.

The tree (httpx draws its own the same way)::

    MicrostockError
    ├── TransientError              retry with backoff; park / leave pending when attempts run out
    │   ├── ServiceTimeout          timeout
    │   │   └── ReplyOverdue        timeout:reply      (every byte handed over, no reply: the file may still be arriving)
    │   ├── NetworkError            network, network:tls, network:dns
    │   │   ├── UnexpectedFtpReply  ftp:reply
    │   │   └── DataConnectionFailed ftp:data     (login worked, the passive data connection cannot be opened)
    │   ├── ServiceUnavailable      retryable:<http code>
    │   │   └── FtpTemporary        ftp:<code>         (421 busy, 425/426 data connection, 450/451/452)
    │   ├── RateLimited             retryable:429      (``retry_after``: what the service asked)
    │   ├── InvalidOutput           invalid_output     (the model answered, but not usable metadata)
    │   │   └── OutputTruncated     invalid_output     (cut at the output limit: retried with a larger one)
    │   └── SizeMismatch            size_mismatch      (the server kept other bytes than were sent)
    │       └── ShortWrite          size_mismatch      (fewer: a refused write, disk full or quota)
    ├── PermanentError              do not retry: park the job, or leave the file pending
    │   ├── RequestRejected         permanent:<http code>
    │   ├── ContentBlocked          blocked:<REASON>
    │   ├── AnswerRefused           refused:<REASON>   (RECITATION, LANGUAGE, a text-only image answer …)
    │   ├── AnswerTruncated         truncated:<REASON> (cut again with the larger output budget)
    │   ├── FtpRefused              ftp:<code>         (5xx other than a refused login)
    │   ├── SftpRefused             sftp               (no such file, permission denied, failure)
    │   ├── NoSizeCommand           ftp:no_size
    │   └── RemoteFileDiffers       remote_differs     (a larger file of that name is there)
    ├── StageStopped                every further call would fail alike: stop the stage, the rest stays pending
    │   ├── AuthenticationFailed    auth, auth:ftp:<code>, auth:ssh, auth:key
    │   ├── QuotaExhausted          quota:daily
    │   ├── RateWaitSpent           quota:wait         (the run's time for 429 waits is used up)
    │   ├── ModelUnavailable        model              (unknown or retired model: 404)
    │   ├── LocationRefused         location           (400 FAILED_PRECONDITION "User location is not supported")
    │   ├── RequestShapeRefused     request_shape      (400: a field or schema keyword the API does not take)
    │   ├── AccountRestricted       account            (finish reason PUP_LIMITED_DISABLED)
    │   ├── HostKeyUnknown          host_key
    │   ├── HostKeyChanged          host_key
    │   ├── CertificateUntrusted    tls:certificate
    │   ├── CertificateChanged      tls:changed        (not the certificate pinned on first use)
    │   ├── KeyFileUnreadable       key_file
    │   ├── Unconfirmed             unconfirmed        (stored, then gone: the agency took it)
    │   ├── AgencyBusy              busy               (another run holds the agency)
    │   └── TargetUnusable          target, target:<class of the cause>
    ├── StoreUnavailable            a local store is locked or unreadable: the job stays pending, others go on
    ├── BatchJobEnded               batch:<state>      (a Gemini batch job ended without answers: resubmit, then park)
    ├── BadInput                    this file cannot be used: reject it with its reason, go on
    └── ConfigError                 the configuration or workdir is unusable: the run cannot start
        └── MissingPassword         config:password    (no env var, no Secret block: found before connecting)

``error_class`` (stored in the dead-letter store, shown in messages) is
derived from the class and its ``code``, never set by hand and never parsed
back: ``kind`` is the class's, ``code`` the instance's (an HTTP or FTP code,
a reason), and ``error_class`` is ``kind`` or ``kind:code``.
:func:`error_class_of_parked` is the one place that names a parked job.

The lower libraries' exceptions become these at one boundary each, next to
the code that calls them: :func:`tasks.gemini.client.map_gemini_errors`,
``tasks.transports.ftp``'s and ``tasks.transports.sftp``'s mappers (on top of
:func:`tasks.transports.base.network_errors`), :func:`tasks.images.inspect.pillow_errors`.

Every message is safe to show a user: boundaries build messages from codes
and reasons, never from request headers, URLs with credentials or keys. A
mapped error keeps its cause (``raise Mapped(...) from exc``) except where the
cause's text could carry a secret: the Gemini SDK's errors (they hold the
whole request and response), FTP replies (a server may echo the password),
SSH authentication and key files, target URLs.
"""

from __future__ import annotations

from typing import ClassVar


class MicrostockError(Exception):
    """Base of every error this project raises on purpose."""

    #: The class's part of ``error_class``.
    kind: ClassVar[str] = "unknown"

    def __init__(self, message: str, *, code: str | int | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The instance's part of ``error_class`` (an HTTP or FTP code, a reason), if any.
        self.code = None if code is None else str(code)

    @property
    def error_class(self) -> str:
        """Short machine-readable class: ``kind`` or ``kind:code`` (``retryable:503``, ``blocked:SAFETY``)."""
        return self.kind if self.code is None else f"{self.kind}:{self.code}"

    def __reduce__(self):  # keep subclasses, code and extra fields across pickling (Prefect stores results)
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# --- retry: the same call may succeed after a wait ---------------------------------


class TransientError(MicrostockError):
    """A failure that may pass: retry with backoff, park (or leave pending) when attempts run out."""

    kind = "transient"
    #: Seconds the service asked us to wait before the next attempt, if it said.
    retry_after: float | None = None


class ServiceTimeout(TransientError):
    """The service did not answer in time."""

    kind = "timeout"


class ReplyOverdue(ServiceTimeout):
    """Every byte of a file was handed over, but the server's reply did not come in time: the file may be
    in transit, not to be sent again until the server's copy is seen whole (confirmed) or incomplete and no
    longer growing. ``started``: ``time.monotonic()`` when the send began."""

    def __init__(self, message: str, *, started: float) -> None:
        super().__init__(message, code="reply")
        self.started = started


class NetworkError(TransientError):
    """The connection was refused, dropped or reset (``code``: ``tls``, ``dns`` when that is the cause)."""

    kind = "network"


class UnexpectedFtpReply(NetworkError):
    """The FTP server answered something the protocol does not allow there."""

    kind = "ftp"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="reply")


class DataConnectionFailed(NetworkError):
    """The FTP login worked, but the passive data connection cannot be opened (firewall, NAT, or a
    wrong passive address advertised by the server)."""

    kind = "ftp"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="data")


class ServiceUnavailable(TransientError):
    """The service answered with a temporary error (``code``: the HTTP status)."""

    kind = "retryable"


class FtpTemporary(ServiceUnavailable):
    """An FTP 4xx reply: busy, data connection failed, out of room for now."""

    kind = "ftp"


class RateLimited(ServiceUnavailable):
    """The service asked us to slow down (HTTP 429); ``retry_after`` says how long, when it said."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, code=429)
        self.retry_after = retry_after


class InvalidOutput(TransientError):
    """The model answered, but not with usable metadata: retry a few times, then park."""

    kind = "invalid_output"


class OutputTruncated(InvalidOutput):
    """The answer was cut at the output token limit (``reason``: MAX_TOKENS, CONTINUATION)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SizeMismatch(TransientError):
    """The server kept fewer (or other) bytes than were sent."""

    kind = "size_mismatch"


class ShortWrite(SizeMismatch):
    """The server kept fewer bytes than were sent: a write it refused (disk full, quota)."""


# --- park: the same input will fail the same way ------------------------------------


class PermanentError(MicrostockError):
    """The request itself is at fault: park the job, or leave the file pending, without retrying."""

    kind = "permanent"


class RequestRejected(PermanentError):
    """The service refused this request (``code``: the HTTP status)."""


class ContentBlocked(PermanentError):
    """The model refused the content (safety); ``error_class`` is ``blocked:<REASON>``."""

    kind = "blocked"

    def __init__(self, reason: str) -> None:
        super().__init__(f"blocked by the model's safety filter ({reason})", code=reason)
        self.reason = reason


class AnswerRefused(PermanentError):
    """The model answered, but declined in a way the same request will repeat (``code``: the finish reason)."""

    kind = "refused"


class AnswerTruncated(PermanentError):
    """The answer was cut off again after a retry with a larger output budget (``code``: the finish reason)."""

    kind = "truncated"


class FtpRefused(PermanentError):
    """A permanent FTP reply (5xx) for this file."""

    kind = "ftp"


class SftpRefused(PermanentError):
    """The SFTP server refused this file (no such file, permission denied, failure)."""

    kind = "sftp"


class NoSizeCommand(PermanentError):
    """The FTP server answers neither SIZE nor MLSD, so no upload can be confirmed."""

    kind = "ftp"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="no_size")


class RemoteFileDiffers(PermanentError):
    """A different, larger file of the same name is already on the server: it is not overwritten."""

    kind = "remote_differs"


# --- stop the stage: every further call would fail the same way ----------------------


class StageStopped(MicrostockError):
    """Calling again is pointless this run: stop the stage, leave the rest pending."""

    kind = "stopped"


class AuthenticationFailed(StageStopped):
    """The key or password was refused (``code``: how, e.g. ``ftp:530``, ``ssh``, ``key``)."""

    kind = "auth"


class QuotaExhausted(StageStopped):
    """The daily quota is used up; the rest waits for the next run."""

    kind = "quota"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="daily")


class RateWaitSpent(StageStopped):
    """The run has waited on 429 answers as long as ``gemini.rate_limit_wait_s`` allows."""

    kind = "quota"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="wait")


class ModelUnavailable(StageStopped):
    """The configured model does not exist or is not served any more (404 NOT_FOUND)."""

    kind = "model"


class LocationRefused(StageStopped):
    """Gemini refuses requests from this network location (400 FAILED_PRECONDITION)."""

    kind = "location"


class RequestShapeRefused(StageStopped):
    """The API version refuses the request's shape (an unknown field or schema keyword): every call would."""

    kind = "request_shape"


class AccountRestricted(StageStopped):
    """The account is limited or disabled (finish reason PUP_LIMITED_DISABLED)."""

    kind = "account"


class HostKeyUnknown(StageStopped):
    """The SFTP server is not in known_hosts and trust on first use is off."""

    kind = "host_key"


class HostKeyChanged(StageStopped):
    """The SFTP server's host key is not the one known_hosts holds."""

    kind = "host_key"


class CertificateUntrusted(StageStopped):
    """The FTPS server's certificate cannot be verified."""

    kind = "tls"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="certificate")


class CertificateChanged(StageStopped):
    """The FTPS server's certificate is not the one pinned when it was first trusted."""

    kind = "tls"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="changed")


class KeyFileUnreadable(StageStopped):
    """The SFTP key file set for the agency cannot be read."""

    kind = "key_file"


class Unconfirmed(StageStopped):
    """The server said a file was stored, but it is not there: not recorded, not sent again."""

    kind = "unconfirmed"


class AgencyBusy(StageStopped):
    """Another run is uploading to this agency right now."""

    kind = "busy"


class TargetUnusable(StageStopped):
    """The agency's target cannot be reached or used this run (``code``: the cause's class)."""

    kind = "target"


# --- a local store cannot be used right now -----------------------------------------


class StoreUnavailable(MicrostockError):
    """A local store (e.g. ``dead_letter.db``) is locked past its busy timeout or unreadable: the message
    names the file; the job that needed the store stays pending and the other jobs go on."""

    kind = "store_unavailable"


class BatchJobEnded(MicrostockError):
    """A Gemini batch job ended without answers (``code``: ``expired``, ``cancelled``, ``failed``, or ``missing``
    when Gemini no longer knows it); its assets are resubmitted a set number of times, then parked."""

    kind = "batch"

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message, code=state)


# --- reject the input: this file cannot be used -------------------------------------


class BadInput(MicrostockError):
    """A file cannot be used (corrupt, empty, too large, too small, wrong format)."""

    kind = "bad_input"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ConfigError(MicrostockError):
    """The configuration or workdir is unusable: the run cannot proceed."""

    kind = "config"


class MissingPassword(ConfigError):
    """An agency that needs a password has none: neither the environment variable nor the Secret block."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="password")


def error_class_of_parked(exc: BaseException) -> str:
    """The ``error_class`` a failed describe job is parked under: ``blocked:<REASON>``, ``permanent:<code>``
    … as the describer said; ``invalid_output`` when the model never gave usable metadata; other transient
    failures whose attempts ran out ``exhausted:<code>`` (``exhausted:503``, ``exhausted:timeout``); anything
    unexpected ``unknown:<ExceptionType>``."""
    if isinstance(exc, InvalidOutput):
        return exc.error_class
    if isinstance(exc, TransientError):
        return f"exhausted:{exc.code or exc.kind}"
    if isinstance(exc, MicrostockError):
        return exc.error_class
    return f"unknown:{type(exc).__name__}"
