"""What can go wrong, grouped by what the caller does about it.

The tree (httpx draws its own the same way); a caller decides by the group,
and by a leaf only where the leaf carries what it needs::

    MicrostockError
    ├── TransientError          retry with backoff; park / leave pending when attempts run out
    │   ├── RateLimited         retryable:429      retry_after: what the service asked (not an attempt)
    │   ├── ReplyOverdue        timeout:reply      started: all bytes handed over, the file may still be arriving
    │   └── InvalidOutput       invalid_output     the model answered, no usable metadata (parked by that name)
    │       └── OutputTruncated invalid_output     reason: cut at the output limit, retried with a larger one
    ├── PermanentError          do not retry: park the job, or leave the file pending
    │   └── ContentBlocked      blocked:<REASON>   reason: the model's safety filter
    ├── StageStopped            every further call would fail alike: stop the stage, the rest stays pending
    │   └── AuthenticationFailed auth, auth:ftp:<code>, auth:ssh, auth:key (a refused key or password)
    ├── StoreUnavailable        store_unavailable  a local store is locked or unreadable: that job stays pending
    ├── BatchJobEnded           batch:<state>      state: a Gemini batch job ended without answers
    ├── BadInput                bad_input          path, reason: this file cannot be used, reject it and go on
    └── ConfigError             config, config:password   the configuration, workdir or a command's option is
                                                          unusable: no start

Everything else is data on those classes, set where the error is built:
``kind`` (the class gives the default) and ``code`` make ``error_class``;
``scope`` says whether every further file to the agency's target meets the
same failure. The kinds each group carries, by the boundary that builds them
(the few a caller branches on are named constants, used where they are raised
and where they are compared: :data:`NETWORK`, :data:`TIMEOUT`, :data:`MODEL`,
:data:`REQUEST_SHAPE`, and the code :data:`FILE_GONE`; the others stay strings,
shown and stored but compared by nobody):

=================  ==========================================================================
TransientError     ``timeout``, ``network`` (``:tls``, ``:dns``), ``retryable:<http code>``,
                   ``ftp:<4xx code>``, ``ftp:reply``, ``ftp:data`` (the passive data connection
                   cannot be opened), ``size_mismatch`` (the server kept other bytes than sent)
PermanentError     ``permanent:<http code>``, ``refused:<REASON>`` (RECITATION, TEXT_ONLY …),
                   ``truncated:<REASON>`` (cut again with the larger budget), ``ftp:<5xx code>``,
                   ``ftp:no_size``, ``sftp``, ``remote_differs``, ``permanent`` (a local folder)
StageStopped       ``quota:daily``, ``quota:wait`` (the run's 429 waits used up), ``model``,
                   ``location``, ``request_shape``, ``account``, ``host_key`` (unknown or changed),
                   ``tls:certificate``, ``tls:changed`` (not the pinned certificate), ``tls:pins``
                   (``ftps_known_certs`` damaged or unusable: nothing checked or pinned), ``key_file``,
                   ``unconfirmed`` (stored, then gone), ``target:<error_class of the cause>``,
                   ``disk_full`` (the workdir's disk has no room: the stage stops with one line naming
                   the disk and what it kept), ``unreachable`` (the describe service never answered one
                   call of the run: :func:`unreachable`)
=================  ==========================================================================

``error_class`` (stored in the dead-letter store, shown in messages) is
derived, never set by hand and never parsed back: ``kind`` or
``kind:code``. :func:`error_class_of_parked` is the one place that names a
parked job.

``scope`` is ``"file"`` (this file's own problem, the default) or
``"target"``: every further file to that agency's target would meet it (the
passive data connection cannot be opened; the disk is full or over quota —
FTP 451/452/552, or fewer bytes kept than sent; FTP 550, writing not
permitted). It is derived: an error that names a ``target_cause`` (the
words the upload stage stops the agency with) is target-scoped. ``refused`` marks a write the
server refused with a reply (an FTP 4xx/5xx, an SFTP status, fewer bytes
kept): the connection still stands, and the partial file it may have left is
cleared (:meth:`tasks.transports.base.Transport.put`).

The lower libraries' exceptions become these at one boundary each, next to
the code that calls them: :func:`tasks.gemini.client.map_gemini_errors` and
:func:`tasks.gemini.client.check_answer`, :func:`tasks.transports.ftp.ftp_errors`
and :func:`tasks.transports.sftp.sftp_errors` (on top of
:func:`tasks.transports.base.network_errors`), :func:`tasks.images.inspect.pillow_errors`.

Every message is safe to show a user: boundaries build messages from codes
and reasons, never from request headers, URLs with credentials or keys. A
mapped error keeps its cause (``raise Mapped(...) from exc``) except where the
cause's text could carry a secret: the Gemini SDK's errors (they hold the
whole request and response), FTP replies (a server may echo the password),
SSH authentication and key files, target URLs.
"""

from __future__ import annotations

from typing import ClassVar, Literal

#: Whose problem a failure is: this file's own, or every further file's to the same agency target.
Scope = Literal["file", "target"]

# The kinds (and the one code) a caller branches on, named once: where they are raised and where they are compared
# use these names. Their strings are part of ``error_class``, stored in the dead-letter store: never changed.

#: TransientError: the connection failed (refused, dropped, host name not found, TLS) — :func:`unreachable`.
NETWORK = "network"
#: TransientError: no answer in time (:class:`ReplyOverdue`'s too) — :func:`unreachable`.
TIMEOUT = "timeout"
#: StageStopped: the configured model is retired, not served any more or unknown; a clip interaction started
#: earlier with it is forgotten (:mod:`tasks.gemini.clip_generation`).
MODEL = "model"
#: StageStopped: every call would be refused for its shape (API version, thinking, address); as :data:`MODEL`.
REQUEST_SHAPE = "request_shape"
#: The code of TransientError ``retryable:file_gone``: the Files API no longer has an uploaded clip, which is then
#: uploaded again rather than kept (:mod:`tasks.gemini.clips`).
FILE_GONE = "file_gone"


class MicrostockError(Exception):
    """Base of every error this project raises on purpose.

    ``kind`` defaults to the class's :attr:`default_kind`; ``code`` (an HTTP or
    FTP code, a reason) is the instance's part of ``error_class``. An error
    that names a ``target_cause`` is target-scoped (:attr:`scope`).
    """

    #: The ``kind`` of an instance built without one.
    default_kind: ClassVar[str] = "unknown"

    def __init__(self, message: str, *, kind: str | None = None, code: str | int | None = None,
                 target_cause: str | None = None, refused: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or self.default_kind
        self.code = None if code is None else str(code)
        #: The cause every further file to the target meets, in the words the upload stage stops with.
        self.target_cause = target_cause
        #: The server refused this write with a reply: the connection stands, a partial file may be left.
        self.refused = refused

    @property
    def scope(self) -> Scope:
        """``"target"`` when every further file to the agency's target meets it (it names a ``target_cause``),
        else ``"file"``."""
        return "file" if self.target_cause is None else "target"

    @property
    def error_class(self) -> str:
        """Short machine-readable class: ``kind`` or ``kind:code`` (``retryable:503``, ``blocked:SAFETY``)."""
        return self.kind if self.code is None else f"{self.kind}:{self.code}"

    def __reduce__(self):  # keep the class and every field across pickling (Prefect stores results)
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# --- retry: the same call may succeed after a wait ---------------------------------


class TransientError(MicrostockError):
    """A failure that may pass: retry with backoff, park (or leave pending) when attempts run out."""

    default_kind = "transient"
    #: Seconds the service asked us to wait before the next attempt, if it said (:class:`RateLimited`).
    retry_after: float | None = None


class RateLimited(TransientError):
    """The service asked us to slow down (HTTP 429); ``retry_after`` says how long, when it said. The
    rate limiter catches it: the process waits and calls again, and the wait is not an attempt."""

    default_kind = "retryable"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, code=429)
        self.retry_after = retry_after


class ReplyOverdue(TransientError):
    """Every byte of a file was handed over, but the server's reply did not come in time: the file may be
    in transit, not to be sent again until the server's copy is seen whole (confirmed) or incomplete and no
    longer growing. ``started``: ``time.monotonic()`` when the send began (the upload stage watches from it)."""

    default_kind = TIMEOUT

    def __init__(self, message: str, *, started: float) -> None:
        super().__init__(message, code="reply")
        self.started = started


class InvalidOutput(TransientError):
    """The model answered, but not with usable metadata: retry a few times, then park as ``invalid_output``
    (not ``exhausted:…``: the service worked, the answer did not; :func:`error_class_of_parked`)."""

    default_kind = "invalid_output"


class OutputTruncated(InvalidOutput):
    """The answer was cut at the output token limit (``reason``: MAX_TOKENS, CONTINUATION); the describer
    catches it to ask once more with a larger output budget."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# --- park: the same input will fail the same way ------------------------------------


class PermanentError(MicrostockError):
    """The request itself is at fault: park the job, or leave the file pending, without retrying."""

    default_kind = "permanent"


class ContentBlocked(PermanentError):
    """The model refused the content (safety); ``error_class`` is ``blocked:<REASON>``."""

    default_kind = "blocked"

    def __init__(self, reason: str) -> None:
        super().__init__(f"blocked by the model's safety filter ({reason})", code=reason)
        self.reason = reason


# --- stop the stage: every further call would fail the same way ----------------------


class StageStopped(MicrostockError):
    """Calling again is pointless this run: stop the stage, leave the rest pending."""

    default_kind = "stopped"


class AuthenticationFailed(StageStopped):
    """The key or password was refused (``code``: how, e.g. ``ftp:530``, ``ssh``, ``key``); the upload stage
    catches it to name the password's environment variable and Secret block."""

    default_kind = "auth"


# --- neither retry nor park ------------------------------------------------------------


class StoreUnavailable(MicrostockError):
    """A local store (e.g. ``dead_letter.db``) is locked past its busy timeout or unreadable: the message
    names the file; the job that needed the store stays pending and the other jobs go on."""

    default_kind = "store_unavailable"


class BatchJobEnded(MicrostockError):
    """A Gemini batch job ended without answers (``state``: ``expired``, ``cancelled``, ``failed``, or
    ``missing`` when Gemini no longer knows it); its assets are resubmitted a set number of times, then parked."""

    default_kind = "batch"

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message, code=state)
        self.state = state


class BadInput(MicrostockError):
    """A file cannot be used (corrupt, empty, too large, too small, wrong format): reject it with ``reason``."""

    default_kind = "bad_input"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ConfigError(MicrostockError):
    """The configuration or workdir, or what a command was told (an unknown agency, secret, timezone or batch job,
    an environment it needs), is unusable: the run or command cannot proceed (``config:password``: an agency that
    needs a password has none, found before connecting)."""

    default_kind = "config"


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


#: The kinds of a failure to reach a service at all (connection refused or dropped, host name not found, TLS,
#: no answer in time): the network's or the service's, never the file's.
UNREACHABLE_KINDS = (NETWORK, TIMEOUT)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the service could not be reached (:data:`UNREACHABLE_KINDS`), not that it answered."""
    return isinstance(exc, TransientError) and not isinstance(exc, ReplyOverdue) and exc.kind in UNREACHABLE_KINDS


#: Parked classes a replay cannot fix unless something changes first (the image, the prompt, the model).
UNCHANGED_FAILS = ("permanent:", "blocked:")


def fails_again_unchanged(error_class: str) -> bool:
    """Will a replay of a job parked under ``error_class`` fail again if nothing is changed first? (A replay
    skips those unless asked; the tables mark them.)"""
    return error_class.startswith(UNCHANGED_FAILS)
