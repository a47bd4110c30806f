"""The error boundaries of the transports: each protocol's mapper over the shared network one."""

from __future__ import annotations

import ftplib
import socket

import paramiko
import pytest

from tasks.core.errors import (
    AuthenticationFailed,
    FtpRefused,
    FtpTemporary,
    NetworkError,
    ServiceTimeout,
    SftpRefused,
    UnexpectedFtpReply,
)
from tasks.transports.base import network_errors
from tasks.transports.ftp import ftp_errors
from tasks.transports.sftp import sftp_errors


def _mapped(exc: BaseException, mapper=ftp_errors, secret: str | None = None, **kwargs):
    with pytest.raises(Exception) as info:
        with mapper("ftp://u@h:21/", secret, **kwargs):
            raise exc
    return info.value


@pytest.mark.parametrize("exc, mapper, cls, error_class", [
    (ftplib.error_temp("421 Service not available"), ftp_errors, FtpTemporary, "ftp:421"),
    (ftplib.error_temp("452 Insufficient storage"), ftp_errors, FtpTemporary, "ftp:452"),
    (ftplib.error_perm("530 Login incorrect."), ftp_errors, AuthenticationFailed, "auth:ftp:530"),
    (ftplib.error_perm("553 File name not allowed"), ftp_errors, FtpRefused, "ftp:553"),
    (ftplib.error_reply("120 later"), ftp_errors, UnexpectedFtpReply, "ftp:reply"),
    (socket.timeout("timed out"), network_errors, ServiceTimeout, "timeout"),
    (ConnectionRefusedError(111, "Connection refused"), network_errors, NetworkError, "network"),
    (ConnectionResetError(104, "Connection reset by peer"), ftp_errors, NetworkError, "network"),
    (EOFError(), sftp_errors, NetworkError, "network"),
    (socket.gaierror(-2, "Name or service not known"), network_errors, NetworkError, "network:dns"),
    (paramiko.AuthenticationException("Authentication failed."), sftp_errors, AuthenticationFailed, "auth:ssh"),
    (paramiko.SSHException("Error reading SSH protocol banner"), sftp_errors, NetworkError, "network"),
    (FileNotFoundError(2, "No such file"), sftp_errors, SftpRefused, "sftp"),
    (PermissionError(13, "Permission denied"), sftp_errors, SftpRefused, "sftp"),
])
def test_each_mapper_turns_its_library_errors_into_named_leaves(exc, mapper, cls, error_class):
    mapped = _mapped(exc, mapper)
    assert type(mapped) is cls and mapped.error_class == error_class
    assert mapped.message.startswith("ftp://u@h:21/: ")


def test_bare_oserror_is_an_sftp_refusal_only_while_the_connection_stands():
    assert isinstance(_mapped(OSError("Failure"), sftp_errors, alive=lambda: True), SftpRefused)
    assert isinstance(_mapped(OSError("Socket is closed"), sftp_errors, alive=lambda: False), NetworkError)


def test_a_password_echoed_by_a_server_is_cut_out():
    mapped = _mapped(ftplib.error_perm("530 bad password s3cr3t!"), secret="s3cr3t!")
    assert "s3cr3t!" not in mapped.message and "***" in mapped.message
