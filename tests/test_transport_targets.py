"""Target URLs, the transport factory, passwords from env or Prefect Secret blocks, and error mapping."""

from __future__ import annotations

import ftplib
import socket

import paramiko
import pytest

from tasks import secrets
from tasks.config import AgencySettings
from tasks.failures import (
    AuthenticationFailed,
    ConfigError,
    NetworkError,
    PermanentError,
    ServiceTimeout,
    ServiceUnavailable,
)
from tasks.transports.base import map_transport_errors
from tasks.transports.ftp import FtpTarget
from tasks.transports.local import LocalFolder
from tasks.transports.sftp import SftpTarget
from tasks.transports.targets import Target, open_transport, parse_target


@pytest.mark.parametrize("url, expected", [
    ("sftp://me@sftp.contributor.adobestock.com:22/", Target("sftp", "sftp.contributor.adobestock.com", 22, "me", "")),
    ("sftp://me@sftp.contributor.adobestock.com", Target("sftp", "sftp.contributor.adobestock.com", 22, "me", "")),
    ("ftp://1234567@upload.dreamstime.com:21/", Target("ftp", "upload.dreamstime.com", 21, "1234567", "")),
    ("ftps://me%40mail.com@ftp.example.com/in%20box/", Target("ftps", "ftp.example.com", 21, "me@mail.com", "in box")),
    ("ftp://u@h:2121/a/b", Target("ftp", "h", 2121, "u", "a/b")),
    ("ftp://u@h/%2Fsrv/in", Target("ftp", "h", 21, "u", "/srv/in")),
    ("file:///var/outbox/adobe", Target("file", path="/var/outbox/adobe")),
])
def test_parse_target(url, expected):
    assert parse_target("adobe", url) == expected


@pytest.mark.parametrize("url, message", [
    ("ftp://u:hunter2@h/", "do not put the password in the URL"),
    ("http://h/", "unsupported scheme 'http'"),
    ("sftp:///nohost", "no host"),
    ("file://server/share", "local folder"),
    ("file:relative", "absolute path"),
    ("ftp://u@h:99999/", "not a usable URL"),
    ("ftp://u@h/?x=1", "unexpected"),
])
def test_bad_targets_are_config_errors_naming_the_key(url, message):
    with pytest.raises(ConfigError) as info:
        parse_target("vecteezy", url)
    assert info.value.message.startswith("agencies.vecteezy.target: ") and message in info.value.message
    assert "hunter2" not in info.value.message


def test_factory_builds_each_transport(workdir, monkeypatch, tmp_path):
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", "pw-a")
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", "pw-d")
    default = open_transport("vecteezy", AgencySettings(), workdir)
    assert isinstance(default, LocalFolder) and default.folder == workdir.outbox("vecteezy")
    local = open_transport("vecteezy", AgencySettings(target=f"file://{tmp_path}/out"), workdir)
    assert isinstance(local, LocalFolder) and local.folder == tmp_path / "out"
    sftp = open_transport("adobe", AgencySettings(target="sftp://me@127.0.0.1:2222/up", trust_unknown_host=True,
                                                  timeout_s=7), workdir)
    assert isinstance(sftp, SftpTarget) and (sftp.host, sftp.port, sftp.user, sftp.folder) == ("127.0.0.1", 2222, "me", "up")
    assert sftp._password == "pw-a" and sftp.trust_unknown_host and sftp.timeout == 7
    ftps = open_transport("dreamstime", AgencySettings(target="ftps://42@127.0.0.1/", remote_keeps_files=False), workdir)
    assert isinstance(ftps, FtpTarget) and ftps.tls and ftps._password == "pw-d" and not ftps.can_list
    assert "pw-d" not in ftps.display and "pw-a" not in sftp.display


def test_no_password_lookup_for_targets_that_need_none(workdir, monkeypatch):
    def no_api(name):
        raise AssertionError(f"Prefect asked for {name}")

    monkeypatch.setattr(secrets, "secret_block", no_api)
    monkeypatch.setattr("tasks.transports.targets.agency_password", lambda agency: no_api(agency))
    open_transport("adobe", AgencySettings(), workdir)
    open_transport("adobe", AgencySettings(target="file:///tmp/x"), workdir)
    keyed = open_transport("adobe", AgencySettings(target="sftp://me@h/", key_file="~/.ssh/id_ed25519"), workdir)
    assert keyed._password is None  # a key without passphrase: no env var, no block lookup


def test_password_from_environment_wins_without_asking_prefect(monkeypatch):
    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", "from-env")
    monkeypatch.setattr(secrets, "secret_block", lambda name: pytest.fail("Prefect was asked"))
    assert secrets.agency_password("vecteezy") == "from-env"


def test_secret_blocks_are_used_when_the_environment_has_none(prefect_harness, monkeypatch):
    from prefect.blocks.system import Secret

    monkeypatch.delenv("MICROSTOCK_ADOBE_PASSWORD", raising=False)
    monkeypatch.delenv("MICROSTOCK_DREAMSTIME_PASSWORD", raising=False)
    Secret(value="from-block").save("microstock-adobe-password", overwrite=True)
    Secret(value="gm-key").save("gemini-api-key", overwrite=True)
    try:
        assert secrets.agency_password("adobe") == "from-block"
        assert secrets.agency_password("dreamstime") is None  # no such block: None, no exception
        assert secrets.gemini_key() == "gm-key"
        monkeypatch.setenv("GEMINI_API_KEY", "env-key")
        assert secrets.gemini_key() == "env-key"
    finally:  # the harness is shared by the session: a Gemini key left here would switch later runs to Gemini
        Secret.delete("microstock-adobe-password")
        Secret.delete("gemini-api-key")
    assert secrets.agency_password("adobe") is None


def test_an_unreachable_prefect_api_means_no_password_and_a_warning(monkeypatch, caplog):
    import prefect.blocks.system

    def unreachable(name):
        raise ConnectionError("api down")

    monkeypatch.setattr(prefect.blocks.system.Secret, "load", unreachable)
    monkeypatch.delenv("MICROSTOCK_ADOBE_PASSWORD", raising=False)
    assert secrets.agency_password("adobe") is None
    assert "microstock-adobe-password" in caplog.text and "ConnectionError" in caplog.text


# --- the error boundary -------------------------------------------------------------


def _mapped(exc: BaseException, secret: str | None = None, alive=None):
    with pytest.raises(Exception) as info:
        with map_transport_errors("ftp://u@h:21/", secret, alive):
            raise exc
    return info.value


@pytest.mark.parametrize("exc, cls, error_class", [
    (ftplib.error_temp("421 Service not available"), ServiceUnavailable, "ftp:421"),
    (ftplib.error_temp("452 Insufficient storage"), ServiceUnavailable, "ftp:452"),
    (ftplib.error_perm("530 Login incorrect."), AuthenticationFailed, "auth:ftp:530"),
    (ftplib.error_perm("553 File name not allowed"), PermanentError, "ftp:553"),
    (ftplib.error_reply("120 later"), NetworkError, "ftp:reply"),
    (socket.timeout("timed out"), ServiceTimeout, "timeout"),
    (ConnectionRefusedError(111, "Connection refused"), NetworkError, "network"),
    (ConnectionResetError(104, "Connection reset by peer"), NetworkError, "network"),
    (EOFError(), NetworkError, "network"),
    (socket.gaierror(-2, "Name or service not known"), NetworkError, "network:dns"),
    (paramiko.AuthenticationException("Authentication failed."), AuthenticationFailed, "auth:ssh"),
    (paramiko.SSHException("Error reading SSH protocol banner"), NetworkError, "network"),
    (FileNotFoundError(2, "No such file"), PermanentError, "sftp"),
    (PermissionError(13, "Permission denied"), PermanentError, "sftp"),
])
def test_map_transport_errors(exc, cls, error_class):
    mapped = _mapped(exc)
    assert type(mapped) is cls and mapped.error_class == error_class
    assert mapped.message.startswith("ftp://u@h:21/: ")


def test_bare_oserror_is_an_sftp_refusal_only_while_the_connection_stands():
    assert isinstance(_mapped(OSError("Failure"), alive=lambda: True), PermanentError)
    assert isinstance(_mapped(OSError("Socket is closed"), alive=lambda: False), NetworkError)


def test_a_password_echoed_by_a_server_is_cut_out():
    mapped = _mapped(ftplib.error_perm("530 bad password s3cr3t!"), secret="s3cr3t!")
    assert "s3cr3t!" not in mapped.message and "***" in mapped.message
