"""The error boundaries of the transports: each protocol's mapper over the shared network one."""

from __future__ import annotations

import ftplib
import socket

import paramiko
import pytest

from tasks.core.errors import AuthenticationFailed, PermanentError, TransientError
from tasks.transports.base import network_errors
from tasks.transports.ftp import ftp_errors
from tasks.transports.sftp import sftp_errors


def _mapped(exc: BaseException, mapper=ftp_errors, secret: str | None = None, **kwargs):
    with pytest.raises(Exception) as info:
        with mapper("ftp://u@h:21/", secret, **kwargs):
            raise exc
    return info.value


@pytest.mark.parametrize("exc, mapper, cls, error_class", [
    (ftplib.error_temp("421 Service not available"), ftp_errors, TransientError, "ftp:421"),
    (ftplib.error_temp("452 Insufficient storage"), ftp_errors, TransientError, "ftp:452"),
    (ftplib.error_perm("530 Login incorrect."), ftp_errors, AuthenticationFailed, "auth:ftp:530"),
    (ftplib.error_perm("553 File name not allowed"), ftp_errors, PermanentError, "ftp:553"),
    (ftplib.error_reply("120 later"), ftp_errors, TransientError, "ftp:reply"),
    (socket.timeout("timed out"), network_errors, TransientError, "timeout"),
    (ConnectionRefusedError(111, "Connection refused"), network_errors, TransientError, "network"),
    (ConnectionResetError(104, "Connection reset by peer"), ftp_errors, TransientError, "network"),
    (EOFError(), sftp_errors, TransientError, "network"),
    (socket.gaierror(-2, "Name or service not known"), network_errors, TransientError, "network:dns"),
    (paramiko.AuthenticationException("Authentication failed."), sftp_errors, AuthenticationFailed, "auth:ssh"),
    (paramiko.SSHException("Error reading SSH protocol banner"), sftp_errors, TransientError, "network"),
    (FileNotFoundError(2, "No such file"), sftp_errors, PermanentError, "sftp"),
    (PermissionError(13, "Permission denied"), sftp_errors, PermanentError, "sftp"),
])
def test_each_mapper_turns_its_library_errors_into_its_group_and_error_class(exc, mapper, cls, error_class):
    mapped = _mapped(exc, mapper)
    assert type(mapped) is cls and mapped.error_class == error_class
    assert mapped.message.startswith("ftp://u@h:21/: ")


def test_bare_oserror_is_an_sftp_refusal_only_while_the_connection_stands():
    refused = _mapped(OSError("Failure"), sftp_errors, alive=lambda: True)
    closed = _mapped(OSError("Socket is closed"), sftp_errors, alive=lambda: False)
    assert isinstance(refused, PermanentError) and refused.error_class == "sftp"
    assert isinstance(closed, TransientError) and closed.error_class == "network"


def test_a_password_echoed_by_a_server_is_cut_out():
    mapped = _mapped(ftplib.error_perm("530 bad password s3cr3t!"), secret="s3cr3t!")
    assert "s3cr3t!" not in mapped.message and "***" in mapped.message
