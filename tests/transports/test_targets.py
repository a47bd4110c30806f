"""Target URLs, the transport factory, passwords from env or Prefect Secret blocks, and error mapping."""

from __future__ import annotations

import pytest

from tasks.core import secrets
from tasks.core.errors import (
    ConfigError,
)
from tasks.core.settings import AgencySettings
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
    assert isinstance(sftp, SftpTarget)
    assert (sftp.host, sftp.port, sftp.user, sftp.folder) == ("127.0.0.1", 2222, "me", "up")
    assert sftp._password == "pw-a" and sftp.trust_unknown_host and sftp.timeout == 7
    ftps = open_transport("dreamstime", AgencySettings(target="ftps://42@127.0.0.1/", remote_keeps_files=False),
                          workdir)
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
