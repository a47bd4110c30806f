"""The error tree: every error a boundary builds, with its ``error_class`` and its group; pickling.

The table calls each boundary (``map_gemini_errors``, ``check_answer``,
``network_errors``, ``ftp_errors``, ``sftp_errors``, ``pillow_errors``) and each
place that raises on its own, the way it does in a run, and pins the
``error_class`` the dead-letter store, the ledger tools and the messages show:
those strings are part of what a contributor sees and never change.
"""

from __future__ import annotations

import errno
import ftplib
import json
import pickle
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import httpx2
import paramiko
import pytest
from google.genai import errors as genai_errors
from google.genai import types
from paramiko.ssh_exception import NoValidConnectionsError
from PIL import Image, UnidentifiedImageError

from tasks.core.errors import (
    AuthenticationFailed,
    BadInput,
    BatchJobEnded,
    ConfigError,
    ContentBlocked,
    InvalidOutput,
    MicrostockError,
    OutputTruncated,
    PermanentError,
    RateLimited,
    ReplyOverdue,
    StageStopped,
    StoreUnavailable,
    TransientError,
    error_class_of_parked,
)
from tasks.gemini.client import Target, check_answer, map_gemini_errors
from tasks.gemini.daybudget import DailyBudget
from tasks.gemini.describer import check_describe_model
from tasks.gemini.ratelimit import WaitAllowance
from tasks.images.inspect import pillow_errors
from tasks.transports.base import Transport, network_errors
from tasks.transports.ftp import FtpTarget, _NoDataConnection, ftp_errors
from tasks.transports.pins import CertificatePins
from tasks.transports.sftp import SftpTarget, _UnknownHost, sftp_errors

WHERE = "ftp://u@h:21/"
GEMINI = Target(setting="gemini.model", model="gemini-3.5-flash-lite", use="describe", api_version="v1beta")


def raised(fn: Callable[[], object]) -> MicrostockError:
    """What ``fn`` raises (it must raise one of ours)."""
    with pytest.raises(MicrostockError) as info:
        fn()
    return info.value


def mapped(mapper, exc: BaseException, **kwargs) -> MicrostockError:
    def call():
        with mapper(**kwargs):
            raise exc
    return raised(call)


def gemini(code: int, message: str = "x", status: str = "", details: list | None = None) -> MicrostockError:
    body = {"error": {"code": code, "message": message, "status": status, "details": details or []}}
    return mapped(map_gemini_errors, genai_errors.APIError(code, body), target=GEMINI, api_key="k")


def gemini_raises(exc: BaseException) -> MicrostockError:
    return mapped(map_gemini_errors, exc, target=GEMINI, api_key="k")


def answer(**fields) -> MicrostockError:
    return raised(lambda: check_answer(types.GenerateContentResponse(**fields)))


def finish(reason: str, parts: bool = True) -> MicrostockError:
    content = types.Content(role="model", parts=[types.Part(text="{}")] if parts else [])
    return answer(candidates=[types.Candidate(finish_reason=reason, content=content)])


def net(exc: BaseException) -> MicrostockError:
    return mapped(network_errors, exc, where=WHERE)


def ftp(exc: BaseException) -> MicrostockError:
    return mapped(ftp_errors, exc, where=WHERE)


def sftp(exc: BaseException, alive: bool = True) -> MicrostockError:
    return mapped(sftp_errors, exc, where=WHERE, alive=lambda: alive)


def _tls(cls: type[ssl.SSLError], text: str) -> ssl.SSLError:
    """An SSLError as the ssl module raises it (with its ``reason``, and ``verify_message`` for a certificate)."""
    exc = cls(1, text)
    exc.reason, exc.verify_message = text.upper().replace(" ", "_"), text
    return exc


class _Key:
    """Enough of a paramiko key for BadHostKeyException's message."""

    fingerprint = "SHA256:abc"

    def get_name(self) -> str:
        return "ssh-ed25519"

    def get_base64(self) -> str:
        return "AAAA"


class _Remote(Transport):
    """A transport whose remote file has ``size`` bytes (None: absent), for :meth:`Transport.confirm`."""

    display = "ftp://u@h:21/in"

    def __init__(self, size: int | None) -> None:
        self.size = size

    def connect(self) -> None: ...
    connected = True
    def close(self) -> None: ...
    def remove(self, name: str) -> None: ...
    def send(self, local: Path, name: str) -> None: ...

    def remote_size(self, name: str) -> int | None:
        return self.size


class _NoListing:
    """An FTP server that answers neither SIZE nor MLSD."""

    def mlsd(self, *args, **kwargs):
        raise ftplib.error_perm("502 Command not implemented")


def _day_budget_spent(tmp: Path) -> None:
    budget = DailyBudget(tmp / "budget.json", "gemini-3.5-flash-lite", 1)
    budget.take()
    budget.take()


def _pin_changed(tmp: Path) -> None:
    pins = CertificatePins(tmp / "pins")
    pins.check(WHERE, "h", 21, b"first")
    pins.check(WHERE, "h", 21, b"second")


def _pins_damaged(tmp: Path) -> None:
    (tmp / "pins").write_text("h:21 not-a-fingerprint extra\n")
    CertificatePins(tmp / "pins").check(WHERE, "h", 21, b"first")


def _missing_password(tmp: Path, monkeypatch) -> None:
    from tasks.transports import targets

    monkeypatch.setattr(targets, "agency_password", lambda agency: None)
    targets._required_password("adobe")


# (how the error comes about, its error_class, the group the caller decides by)
BOUNDARIES: dict[str, tuple[Callable[..., MicrostockError], str, type]] = {
    # Gemini: exceptions out of the SDK
    "gemini 401": (lambda: gemini(401, status="UNAUTHENTICATED"), "auth", StageStopped),
    "gemini 403": (lambda: gemini(403, status="PERMISSION_DENIED"), "auth", StageStopped),
    "gemini 400 key": (lambda: gemini(400, "API key not valid", "INVALID_ARGUMENT", [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]), "auth", StageStopped),
    "gemini 429 per day": (lambda: gemini(429, "quota", "RESOURCE_EXHAUSTED", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]),
        "quota:daily", StageStopped),
    "gemini 429": (lambda: gemini(429, "slow down", "RESOURCE_EXHAUSTED", [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}]), "retryable:429", TransientError),
    "gemini 404 model": (lambda: gemini(404, "models/nope is not found for API version v1beta", "NOT_FOUND"),
                         "model", StageStopped),
    "gemini 404 retired": (lambda: gemini(404, "This model is no longer available", "NOT_FOUND"), "model",
                           StageStopped),
    "gemini 404 address": (lambda: gemini(404, "The requested URL was not found on this server."),
                           "request_shape", StageStopped),
    "gemini 400 location": (lambda: gemini(400, "User location is not supported for the API use.",
                                           "FAILED_PRECONDITION"), "location", StageStopped),
    "gemini 400 shape": (lambda: gemini(400, "Invalid JSON payload received. Unknown name", "INVALID_ARGUMENT"),
                         "request_shape", StageStopped),
    "gemini 400": (lambda: gemini(400, "Request contains an invalid argument.", "INVALID_ARGUMENT"),
                   "permanent:400", PermanentError),
    "gemini 422": (lambda: gemini(422, "Unprocessable"), "permanent:422", PermanentError),
    "gemini 500": (lambda: gemini(500, "Internal", "INTERNAL"), "retryable:500", TransientError),
    "gemini 503": (lambda: gemini(503, "Overloaded", "UNAVAILABLE"), "retryable:503", TransientError),
    "gemini timeout": (lambda: gemini_raises(httpx2.ReadTimeout("read timed out")), "timeout", TransientError),
    "gemini refused": (lambda: gemini_raises(httpx2.ConnectError("refused")), "network", TransientError),
    "gemini not json": (lambda: gemini_raises(json.JSONDecodeError("x", "<html>", 0)), "invalid_output",
                        TransientError),
    # Gemini: a 200 that hides a failure
    "answer prompt blocked": (lambda: answer(prompt_feedback=types.GenerateContentResponsePromptFeedback(
        block_reason="SAFETY")), "blocked:SAFETY", PermanentError),
    "answer no candidate": (lambda: answer(candidates=[]), "invalid_output", TransientError),
    "answer SAFETY": (lambda: finish("SAFETY"), "blocked:SAFETY", PermanentError),
    "answer RECITATION": (lambda: finish("RECITATION"), "refused:RECITATION", PermanentError),
    "answer PUP_LIMITED_DISABLED": (lambda: finish("PUP_LIMITED_DISABLED"), "account", StageStopped),
    "answer MAX_TOKENS": (lambda: finish("MAX_TOKENS"), "invalid_output", TransientError),
    "answer OTHER": (lambda: finish("OTHER"), "invalid_output", TransientError),
    "answer empty": (lambda: finish("STOP", parts=False), "invalid_output", TransientError),
    # Gemini: the project's own checks
    "describe model without schema": (lambda: raised(lambda: check_describe_model("gemini-3.1-flash-image")),
                                      "model", StageStopped),
    "day budget spent": (lambda tmp: raised(lambda: _day_budget_spent(tmp)), "quota:daily", StageStopped),
    "429 waits spent": (lambda: raised(lambda: WaitAllowance(1.0).spend(2.0, RateLimited("slow down"))),
                        "quota:wait", StageStopped),
    # sockets and TLS
    "socket timeout": (lambda: net(socket.timeout("timed out")), "timeout", TransientError),
    "tls broken": (lambda: net(_tls(ssl.SSLError, "bad record mac")), "network:tls", TransientError),
    "dns": (lambda: net(socket.gaierror(-2, "Name or service not known")), "network:dns", TransientError),
    "eof": (lambda: net(EOFError()), "network", TransientError),
    "refused": (lambda: net(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")), "network",
                TransientError),
    # FTP
    "ftp 421": (lambda: ftp(ftplib.error_temp("421 Service not available")), "ftp:421", TransientError),
    "ftp 426": (lambda: ftp(ftplib.error_temp("426 Transfer aborted")), "ftp:426", TransientError),
    "ftp 451": (lambda: ftp(ftplib.error_temp("451 Local error")), "ftp:451", TransientError),
    "ftp 452": (lambda: ftp(ftplib.error_temp("452 Insufficient storage")), "ftp:452", TransientError),
    "ftp 530": (lambda: ftp(ftplib.error_perm("530 Login incorrect.")), "auth:ftp:530", StageStopped),
    "ftp 532": (lambda: ftp(ftplib.error_perm("532 Need account")), "auth:ftp:532", StageStopped),
    "ftp 550": (lambda: ftp(ftplib.error_perm("550 Permission denied")), "ftp:550", PermanentError),
    "ftp 552": (lambda: ftp(ftplib.error_perm("552 Quota exceeded")), "ftp:552", PermanentError),
    "ftp 553": (lambda: ftp(ftplib.error_perm("553 File name not allowed")), "ftp:553", PermanentError),
    "ftp reply": (lambda: ftp(ftplib.error_reply("120 later")), "ftp:reply", TransientError),
    "ftp proto": (lambda: ftp(ftplib.error_proto("999 what")), "ftp:reply", TransientError),
    "ftp reset": (lambda: ftp(ConnectionResetError(errno.ECONNRESET, "reset")), "network", TransientError),
    "ftps certificate": (lambda: ftp(_tls(ssl.SSLCertVerificationError, "unable to get local issuer certificate")),
                         "tls:certificate", StageStopped),
    "ftp data connection": (lambda: ftp(_NoDataConnection(40000, "Connection refused")), "ftp:data",
                            TransientError),
    "ftp no SIZE nor MLSD": (lambda: raised(lambda: FtpTarget("h")._size_from_listing(_NoListing(), "a.jpg")),
                             "ftp:no_size", PermanentError),
    "ftps certificate changed": (lambda tmp: raised(lambda: _pin_changed(tmp)), "tls:changed", StageStopped),
    "ftps pins file damaged": (lambda tmp: raised(lambda: _pins_damaged(tmp)), "tls:pins", StageStopped),
    # SFTP
    "ssh auth": (lambda: sftp(paramiko.AuthenticationException("Authentication failed.")), "auth:ssh",
                 StageStopped),
    "ssh host key changed": (lambda: sftp(paramiko.BadHostKeyException("h", _Key(), _Key())), "host_key",
                             StageStopped),
    "ssh host key unknown": (lambda: sftp(_UnknownHost("host h is not in known_hosts")), "host_key", StageStopped),
    "ssh no connection": (lambda: sftp(NoValidConnectionsError({("127.0.0.1", 22): OSError("refused")})),
                          "network", TransientError),
    "ssh broken": (lambda: sftp(paramiko.SSHException("Error reading SSH protocol banner")), "network",
                   TransientError),
    "sftp no such file": (lambda: sftp(FileNotFoundError(errno.ENOENT, "No such file")), "sftp", PermanentError),
    "sftp permission": (lambda: sftp(PermissionError(errno.EACCES, "Permission denied")), "sftp", PermanentError),
    "sftp failure": (lambda: sftp(OSError("Failure")), "sftp", PermanentError),
    "sftp socket closed": (lambda: sftp(OSError("Socket is closed"), alive=False), "network", TransientError),
    "ssh key file missing": (lambda tmp: raised(lambda: SftpTarget("h", key_file=str(tmp / "none"))._load_key()),
                             "key_file", StageStopped),
    "ssh key file unusable": (lambda tmp: raised(lambda: (tmp / "k").write_text("junk") and
                                                 SftpTarget("h", key_file=str(tmp / "k"))._load_key()),
                              "auth:key", StageStopped),
    # the put → confirm sequence
    "confirm short": (lambda: raised(lambda: _Remote(5).confirm("a.jpg", 10)), "size_mismatch", TransientError),
    "confirm longer": (lambda: raised(lambda: _Remote(15).confirm("a.jpg", 10)), "size_mismatch", TransientError),
    "confirm gone": (lambda: raised(lambda: _Remote(None).confirm("a.jpg", 10)), "unconfirmed", StageStopped),
    # images
    "not an image": (lambda: mapped(pillow_errors, UnidentifiedImageError("x"), name="a.jpg"), "bad_input",
                     BadInput),
    "decompression bomb": (lambda: mapped(pillow_errors, Image.DecompressionBombError("big"), name="a.jpg"),
                           "bad_input", BadInput),
    "corrupt": (lambda: mapped(pillow_errors, OSError("truncated"), name="a.jpg"), "bad_input", BadInput),
    # the ledger and the targets
    "no password": (lambda tmp, monkeypatch: raised(lambda: _missing_password(tmp, monkeypatch)),
                    "config:password", ConfigError),
}

#: Errors raised where they are decided, built here as their one raise site builds them.
RAISED_IN_PLACE: dict[str, tuple[MicrostockError, str, type]] = {
    "reply overdue (ftp send)": (ReplyOverdue("every byte was handed over", started=1.0), "timeout:reply",
                                 TransientError),
    "truncated again (describer)": (PermanentError("cut again", kind="truncated", code="MAX_TOKENS"),
                                    "truncated:MAX_TOKENS", PermanentError),
    "text only (image maker)": (PermanentError("text instead of an image", kind="refused", code="TEXT_ONLY"),
                                "refused:TEXT_ONLY", PermanentError),
    "image unreadable (image maker)": (InvalidOutput("the image cannot be read"), "invalid_output", TransientError),
    "larger file there (upload)": (PermanentError("a larger file is there", kind="remote_differs"), "remote_differs",
                                   PermanentError),
    "cannot connect (upload)": (StageStopped("cannot connect after 3 attempts", kind="target", code="network"),
                                "target:network", StageStopped),
    "connect refused (upload)": (StageStopped("target unusable", kind="target", code="ftp:550"), "target:ftp:550",
                                 StageStopped),
    "local write (file://)": (PermanentError("write failed"), "permanent", PermanentError),
    "batch job expired": (BatchJobEnded("ended", state="expired"), "batch:expired", BatchJobEnded),
    "batch job missing": (BatchJobEnded("unknown job", state="missing"), "batch:missing", BatchJobEnded),
    "store locked": (StoreUnavailable("dead_letter.db is locked"), "store_unavailable", StoreUnavailable),
    "bad setting": (ConfigError("gemini.api_version: v3"), "config", ConfigError),
    "unreadable upload-ready file": (BadInput("a.jpg", "cannot read"), "bad_input", BadInput),
}


def _build(builder, tmp_path, monkeypatch) -> MicrostockError:
    wants = builder.__code__.co_varnames[:builder.__code__.co_argcount]
    return builder(*[{"tmp": tmp_path, "monkeypatch": monkeypatch}[name] for name in wants])


@pytest.mark.parametrize("case", BOUNDARIES)
def test_each_boundary_builds_its_error_class_in_its_group(case, tmp_path, monkeypatch):
    builder, error_class, group = BOUNDARIES[case]
    exc = _build(builder, tmp_path, monkeypatch)
    assert (exc.error_class, isinstance(exc, group)) == (error_class, True)


@pytest.mark.parametrize("case", RAISED_IN_PLACE)
def test_each_error_raised_in_place_has_its_error_class_and_group(case):
    exc, error_class, group = RAISED_IN_PLACE[case]
    assert (exc.error_class, isinstance(exc, group)) == (error_class, True)


def test_the_groups_do_not_overlap():
    groups = (TransientError, PermanentError, StageStopped, StoreUnavailable, BadInput, ConfigError, BatchJobEnded)
    for case, (builder, _, group) in BOUNDARIES.items():
        if builder.__code__.co_argcount:
            continue
        exc = builder()
        assert [g for g in groups if isinstance(exc, g)] == [group], case


def test_a_429_carries_the_delay_the_service_asked_for():
    exc = BOUNDARIES["gemini 429"][0]()
    assert isinstance(exc, RateLimited) and exc.retry_after == 13.0


@pytest.mark.parametrize("exc, parked", [
    (TransientError("x", kind="retryable", code=503), "exhausted:503"),
    (RateLimited("x"), "exhausted:429"),
    (TransientError("x", kind="timeout"), "exhausted:timeout"),
    (TransientError("x", kind="network"), "exhausted:network"),
    (InvalidOutput("x"), "invalid_output"),
    (OutputTruncated("x", reason="MAX_TOKENS"), "invalid_output"),
    (PermanentError("x", code=404), "permanent:404"),
    (ContentBlocked("PROHIBITED_CONTENT"), "blocked:PROHIBITED_CONTENT"),
    (KeyError("boom"), "unknown:KeyError"),
])
def test_a_parked_job_is_named_from_its_class(exc, parked):
    assert error_class_of_parked(exc) == parked


@pytest.mark.parametrize("case", ["answer MAX_TOKENS", "gemini 503", "gemini timeout", "answer OTHER"])
def test_a_parked_job_from_a_boundary_is_named_as_before(case):
    exc = BOUNDARIES[case][0]()
    assert error_class_of_parked(exc) == {"answer MAX_TOKENS": "invalid_output", "gemini 503": "exhausted:503",
                                          "gemini timeout": "exhausted:timeout",
                                          "answer OTHER": "invalid_output"}[case]


#: Every leaf with fields, and data on a group, as Prefect stores them (results are pickled): (error, fields, group).
PICKLED = [
    (RateLimited("slow down", retry_after=7.5), {"retry_after": 7.5}, TransientError),
    (ReplyOverdue("no reply", started=12.5), {"started": 12.5}, TransientError),
    (OutputTruncated("cut", reason="MAX_TOKENS"), {"reason": "MAX_TOKENS"}, TransientError),
    (ContentBlocked("SPII"), {"reason": "SPII"}, PermanentError),
    (AuthenticationFailed("refused", code="ftp:530"), {}, StageStopped),
    (BatchJobEnded("ended", state="expired"), {"state": "expired"}, BatchJobEnded),
    (BadInput("a.jpg", "empty file"), {"path": "a.jpg", "reason": "empty file"}, BadInput),
    (TransientError("full", kind="ftp", code="452", target_cause="the disk is full", refused=True),
     {"scope": "target", "target_cause": "the disk is full", "refused": True}, TransientError),
    (StageStopped("busy", kind="busy"), {"scope": "file", "target_cause": None}, StageStopped),
]


@pytest.mark.parametrize("exc, fields, group", PICKLED, ids=[type(exc).__name__ for exc, _, _ in PICKLED])
def test_errors_survive_pickling_with_class_error_class_fields_and_group(exc, fields, group):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and isinstance(back, group)
    assert (back.error_class, back.message, str(back)) == (exc.error_class, exc.message, str(exc))
    assert {name: getattr(back, name) for name in fields} == fields


def test_kind_and_code_are_instance_data_the_class_gives_the_default():
    assert PermanentError("x").error_class == "permanent"
    assert PermanentError("x", kind="sftp").error_class == "sftp"
    assert TransientError("x", kind="ftp", code=421).error_class == "ftp:421"
    assert ConfigError("x", code="password").error_class == "config:password"


def test_an_error_is_target_scoped_exactly_when_it_names_a_target_cause():
    assert TransientError("x").scope == "file"
    assert TransientError("x", target_cause="the disk is full").scope == "target"


#: The cause every further file to the agency's target would meet, as the upload stage names it.
TARGET_CAUSES = {
    "ftp data connection": "the passive data connection cannot be opened",
    "ftp 451": "the server's disk is full or over quota",
    "ftp 452": "the server's disk is full or over quota",
    "ftp 552": "the server's disk is full or over quota",
    "confirm short": "the server's disk is full or over quota",
    "ftp 550": "the server does not permit writing there",
}


@pytest.mark.parametrize("case", [c for c in BOUNDARIES if BOUNDARIES[c][2] in (TransientError, PermanentError)])
def test_an_error_every_file_of_the_target_meets_says_so_with_its_cause(case, tmp_path, monkeypatch):
    exc = _build(BOUNDARIES[case][0], tmp_path, monkeypatch)
    assert (exc.scope, exc.target_cause) == ("target" if case in TARGET_CAUSES else "file", TARGET_CAUSES.get(case))


#: The writes a server refused with a reply: ``Transport.put`` clears the partial file they may leave.
REFUSED = {"ftp 421", "ftp 426", "ftp 451", "ftp 452", "ftp 550", "ftp 552", "ftp 553", "sftp no such file",
           "sftp permission", "sftp failure", "confirm short"}


@pytest.mark.parametrize("case", BOUNDARIES)
def test_a_refusal_by_the_server_says_so_and_nothing_else_does(case, tmp_path, monkeypatch):
    assert _build(BOUNDARIES[case][0], tmp_path, monkeypatch).refused is (case in REFUSED)
