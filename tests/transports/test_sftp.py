"""SFTP transport against a real in-process paramiko SFTP server on 127.0.0.1."""

from __future__ import annotations

import os

import paramiko
import pytest

from tasks.core.errors import (
    AuthenticationFailed,
    PermanentError,
    StageStopped,
    TransientError,
)
from tasks.transports.sftp import SftpTarget
from tests.fakes.servers import PASSWORD, USER, SftpServer, known_hosts, sftp_server, write_client_key  # noqa: F401


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "mountains_001.jpg"
    path.write_bytes(os.urandom(200_000))
    return path


def sftp(server, known, **kw) -> SftpTarget:
    kw.setdefault("timeout", 5)
    return SftpTarget("127.0.0.1", server.port, USER, kw.pop("password", PASSWORD), kw.pop("folder", ""),
                      known_hosts=known, **kw)


def test_put_stores_the_whole_file_and_confirms_it(sftp_server, known_hosts, tmp_path, photo):
    second = tmp_path / "b.jpg"
    second.write_bytes(os.urandom(70_000))
    with sftp(sftp_server, known_hosts) as t:
        assert t.remote_size(photo.name) is None
        remote = t.put(photo, photo.name)
        t.put(second, second.name)  # same connection
        assert t.remote_size(photo.name) == photo.stat().st_size
    assert remote == f"sftp://{USER}@127.0.0.1:{sftp_server.port}/{photo.name}"
    assert sftp_server.file(photo.name).read_bytes() == photo.read_bytes()
    assert sftp_server.file(second.name).read_bytes() == second.read_bytes()
    assert [e.name for e in sftp_server.log.received()] == [photo.name, second.name]


def test_put_replaces_a_partial_file(sftp_server, known_hosts, photo):
    sftp_server.file(photo.name).write_bytes(b"x" * 500_000)  # longer, to prove truncation
    with sftp(sftp_server, known_hosts) as t:
        t.put(photo, photo.name)
    assert sftp_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_uploads_into_the_folder_of_the_url(sftp_server, known_hosts, photo):
    (sftp_server.root / "upload").mkdir()
    with sftp(sftp_server, known_hosts, folder="upload") as t:
        assert t.put(photo, photo.name).endswith(f"/upload/{photo.name}")
    assert (sftp_server.root / "upload" / photo.name).exists()
    with pytest.raises(PermanentError):
        sftp(sftp_server, known_hosts, folder="missing").connect()


def test_unknown_host_is_refused_before_any_password_is_sent(sftp_server, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    with pytest.raises(StageStopped) as info:
        sftp(sftp_server, empty).connect()
    assert info.value.error_class == "host_key"
    assert sftp_server.host_key.fingerprint in info.value.message  # what to check, said plainly
    assert "trust_unknown_host" in info.value.message
    assert f"`ssh-keyscan -p {sftp_server.port} 127.0.0.1 >> {empty}`" in info.value.message  # the exact command
    assert not empty.exists() and sftp_server.log.passwords == 0


def test_trust_on_first_use_remembers_the_key(sftp_server, tmp_path, photo):
    known = tmp_path / "ssh" / "known_hosts"
    with sftp(sftp_server, known, trust_unknown_host=True) as t:
        t.put(photo, photo.name)
    assert known.read_text() == sftp_server.known_hosts_line()
    with sftp(sftp_server, known) as t:  # later runs check the remembered key
        t.put(photo, photo.name)


def test_a_changed_host_key_is_refused_even_with_trust_on_first_use(sftp_server, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(sftp_server.known_hosts_line(paramiko.ECDSAKey.generate()))  # someone else's key
    with pytest.raises(StageStopped, match="CHANGED") as info:
        sftp(sftp_server, known, trust_unknown_host=True).connect()
    assert info.value.error_class == "host_key"
    assert f'`ssh-keygen -R "[127.0.0.1]:{sftp_server.port}" -f {known}`' in info.value.message
    assert sftp_server.log.passwords == 0


def test_wrong_password_is_an_authentication_failure_without_the_password(sftp_server, known_hosts):
    with pytest.raises(AuthenticationFailed) as info:
        sftp(sftp_server, known_hosts, password="Hunter2-wrong").connect()
    assert "Hunter2-wrong" not in info.value.message


def test_key_authentication(tmp_path, photo):
    key_file = tmp_path / "id_ecdsa"
    client_key = write_client_key(key_file, passphrase="unlock-me")
    server = SftpServer(tmp_path / "keyed-root", password="not-this-one", client_key=client_key).start()
    try:
        known = tmp_path / "kh"
        known.write_text(server.known_hosts_line())
        with sftp(server, known, password="unlock-me", key_file=str(key_file)) as t:  # password = passphrase
            t.put(photo, photo.name)
        assert server.file(photo.name).read_bytes() == photo.read_bytes()
        other = tmp_path / "other_key"
        write_client_key(other)
        with pytest.raises(AuthenticationFailed):  # a key the server does not know
            sftp(server, known, password=None, key_file=str(other)).connect()
        with pytest.raises(AuthenticationFailed, match="cannot be used"):  # wrong passphrase
            sftp(server, known, password="wrong", key_file=str(key_file)).connect()
        with pytest.raises(StageStopped, match="cannot be read"):
            sftp(server, known, key_file=str(tmp_path / "missing")).connect()
    finally:
        server.stop()


def test_full_disk_is_caught_by_the_size_check(sftp_server, known_hosts, photo):
    """paramiko drops the statuses of pipelined writes: only the size check after close sees the loss."""
    sftp_server.faults.disk_free = 50_000
    with pytest.raises(TransientError) as info:
        with sftp(sftp_server, known_hosts) as t:
            t.put(photo, photo.name)
    assert info.value.error_class == "size_mismatch" and "disk full" in info.value.message
    assert not sftp_server.file(photo.name).exists()  # no partial file left for the agency to ingest
    assert "was deleted" in info.value.message


def test_connection_dropped_mid_transfer_is_a_network_error(sftp_server, known_hosts, photo):
    sftp_server.faults.drop_after = [60_000]
    with pytest.raises(TransientError) as info:
        with sftp(sftp_server, known_hosts) as t:
            t.put(photo, photo.name)
    assert info.value.error_class == "network"
    assert sftp_server.log.received(photo.name) == []
    with sftp(sftp_server, known_hosts) as t:
        t.put(photo, photo.name)
    assert sftp_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_a_stalled_server_times_out(sftp_server, known_hosts, photo):
    sftp_server.faults.stall_s = 2.0  # after the stall the server would answer: only the timeout raises
    with pytest.raises(TransientError) as info:
        with sftp(sftp_server, known_hosts, timeout=0.5) as t:
            t.put(photo, photo.name)
    assert info.value.kind == "timeout"


def test_a_slow_server_is_waited_for(sftp_server, known_hosts, photo):
    sftp_server.faults.rate = 800_000
    with sftp(sftp_server, known_hosts) as t:
        t.put(photo, photo.name)
    assert sftp_server.file(photo.name).read_bytes() == photo.read_bytes()
