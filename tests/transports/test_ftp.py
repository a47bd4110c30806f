"""FTP and FTPS transports against real pyftpdlib servers on 127.0.0.1, with server faults."""

from __future__ import annotations

import os
import socket
import ssl
import time

import pytest

from tasks.core.errors import (
    AuthenticationFailed,
    PermanentError,
    StageStopped,
    TransientError,
)
from tasks.transports.ftp import FtpTarget
from tasks.transports.pins import CertificatePins
from tests.fakes.servers import PASSWORD, USER, ftp_server, ftps_cert, ftps_server  # noqa: F401  (fixtures)


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "sunset_000.jpg"
    path.write_bytes(os.urandom(300_000))
    return path


def ftp(server, **kw) -> FtpTarget:
    kw.setdefault("timeout", 5)
    return FtpTarget("127.0.0.1", server.port, USER, kw.pop("password", PASSWORD), kw.pop("folder", ""), **kw)


def test_put_stores_the_whole_file_and_confirms_it(ftp_server, photo):
    with ftp(ftp_server) as t:
        assert t.remote_size(photo.name) is None
        remote = t.put(photo, photo.name)
        assert t.remote_size(photo.name) == photo.stat().st_size
    assert remote == f"ftp://{USER}@127.0.0.1:{ftp_server.port}/{photo.name}"
    assert ftp_server.file(photo.name).read_bytes() == photo.read_bytes()
    [event] = ftp_server.log.received(photo.name)
    assert event.size == photo.stat().st_size


def test_one_connection_carries_many_files_and_replaces_a_partial_one(ftp_server, tmp_path, photo):
    ftp_server.file(photo.name).write_bytes(photo.read_bytes()[:1000])  # left by a cut-short upload
    others = []
    for i in range(3):
        p = tmp_path / f"more_{i}.jpg"
        p.write_bytes(os.urandom(50_000 + i))
        others.append(p)
    with ftp(ftp_server) as t:
        assert t.remote_size(photo.name) == 1000
        for p in [photo, *others]:
            t.put(p, p.name)
    for p in [photo, *others]:
        assert ftp_server.file(p.name).read_bytes() == p.read_bytes()
    assert ftp_server.log.stor_commands == 4


def test_uploads_into_the_folder_of_the_url(ftp_server, photo):
    (ftp_server.root / "incoming").mkdir()
    with ftp(ftp_server, folder="incoming") as t:
        remote = t.put(photo, photo.name)
    assert remote.endswith(f"/incoming/{photo.name}")
    assert (ftp_server.root / "incoming" / photo.name).read_bytes() == photo.read_bytes()


def test_a_missing_folder_is_a_permanent_refusal(ftp_server):
    with pytest.raises(PermanentError, match="550"):
        ftp(ftp_server, folder="nope").connect()


def test_wrong_password_is_an_authentication_failure_without_the_password(ftp_server):
    with pytest.raises(AuthenticationFailed) as info:
        ftp(ftp_server, password="Secret-Wrong-9").connect()
    assert "530" in info.value.message and info.value.error_class == "auth:ftp:530"
    assert "Secret-Wrong-9" not in info.value.message and "Secret-Wrong-9" not in repr(info.value)


def test_421_and_452_replies_are_transient_and_the_next_try_succeeds(ftp_server, photo):
    ftp_server.faults.refuse_next = ["421 Too many connections, closing.", "452 Insufficient storage space."]
    t = ftp(ftp_server)
    with pytest.raises(TransientError) as first:
        with t:
            t.put(photo, photo.name)
    assert first.value.error_class == "ftp:421"
    with pytest.raises(TransientError) as second:
        with t:
            t.put(photo, photo.name)
    assert second.value.error_class == "ftp:452"
    with t:
        t.put(photo, photo.name)
    assert ftp_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_full_disk_is_reported_with_the_servers_reply(ftp_server, photo):
    ftp_server.faults.disk_free = 100_000
    with pytest.raises(TransientError) as info:
        with ftp(ftp_server) as t:
            t.put(photo, photo.name)
    # pyftpdlib answers a failed write with "426 <reason>; transfer aborted." (its reason text is lost)
    assert info.value.error_class == "ftp:426" and "transfer aborted" in info.value.message
    assert ftp_server.log.received() == []  # the server never took it for a whole file
    assert not ftp_server.file(photo.name).exists()  # no partial file left for the agency to ingest
    assert "the partial file it left" in info.value.message and "was deleted" in info.value.message


def test_connection_dropped_mid_transfer_is_a_network_error(ftp_server, photo):
    ftp_server.faults.drop_after = [100_000]
    with pytest.raises(TransientError) as info:
        with ftp(ftp_server) as t:
            t.put(photo, photo.name)
    assert info.value.error_class == "network"
    assert ftp_server.log.received() == []
    with ftp(ftp_server) as t:  # a fresh connection finishes the job
        t.put(photo, photo.name)
    assert ftp_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_a_slow_server_is_waited_for(ftp_server, photo):
    ftp_server.faults.rate = 1_000_000  # 300 KB at 1 MB/s
    started = time.monotonic()
    with ftp(ftp_server, timeout=5) as t:
        t.put(photo, photo.name)
    assert time.monotonic() - started >= 0.25
    assert ftp_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_a_stalled_server_times_out_instead_of_hanging(ftp_server, photo):
    ftp_server.faults.stall_s = 2.0
    started = time.monotonic()
    with pytest.raises(TransientError) as info:
        with ftp(ftp_server, timeout=0.5) as t:
            t.put(photo, photo.name)
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 2.0


def test_refused_connection_is_a_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(TransientError, match="connection failed") as info:
        FtpTarget("127.0.0.1", port, USER, PASSWORD, timeout=2).connect()
    assert info.value.error_class == "network"


def test_without_size_or_listing_confirmation_is_impossible_and_said(ftp_server, photo, monkeypatch):
    handler = ftp_server._server.handler
    monkeypatch.setattr(handler, "ftp_SIZE", lambda self, path: self.respond("502 Command not implemented."),
                        raising=False)
    monkeypatch.setattr(handler, "ftp_MLSD", lambda self, path: self.respond("502 Command not implemented."),
                        raising=False)
    with pytest.raises(PermanentError, match="neither SIZE nor MLSD"):
        with ftp(ftp_server) as t:
            t.put(photo, photo.name)


def test_size_falls_back_to_mlsd(ftp_server, photo, monkeypatch):
    """Also: a listing (ASCII mode in ftplib) must not make the next upload ASCII — random bytes hold CR LF."""
    handler = ftp_server._server.handler
    monkeypatch.setattr(handler, "ftp_SIZE", lambda self, path: self.respond("502 Command not implemented."))
    with ftp(ftp_server) as t:
        assert t.remote_size(photo.name) is None
        t.put(photo, photo.name)
        assert t.remote_size(photo.name) == photo.stat().st_size


def test_a_file_that_vanishes_after_226_stops_the_agency_instead_of_resending(ftp_server, photo):
    handler = ftp_server._server.handler
    original = handler.on_file_received

    def agency_takes_it(self, file):
        original(self, file)
        os.remove(file)

    handler.on_file_received = agency_takes_it
    with pytest.raises(StageStopped) as info:
        with ftp(ftp_server) as t:
            t.put(photo, photo.name)
    assert info.value.error_class == "unconfirmed"
    # with remote_keeps_files = false the success reply alone confirms it
    with ftp(ftp_server, keeps_files=False) as t:
        assert t.put(photo, photo.name).endswith(photo.name)
        assert t.remote_size(photo.name) is None


# --- FTPS -------------------------------------------------------------------------


def test_ftps_uploads_over_a_protected_data_channel(ftps_server, ftps_cert, photo):
    ctx = ssl.create_default_context(cafile=str(ftps_cert))
    with ftp(ftps_server, tls=True, ssl_context=ctx) as t:
        assert isinstance(t._ftp.sock, ssl.SSLSocket)  # the control channel is TLS
        t.put(photo, photo.name)
        assert t.remote_size(photo.name) == photo.stat().st_size
    # the server demands TLS on the data channel (tls_data_required): the upload passing proves PROT P
    assert ftps_server._server.handler.tls_data_required
    assert ftps_server.file(photo.name).read_bytes() == photo.read_bytes()
    assert len(ftps_server.log.received(photo.name)) == 1


def test_ftps_refuses_an_unverifiable_certificate_unless_trusted(ftps_server, photo, tmp_path):
    with pytest.raises(StageStopped) as info:
        ftp(ftps_server, tls=True).connect()  # the system CAs do not know the test certificate
    assert info.value.error_class == "tls:certificate" and "trust_unknown_host" in info.value.message
    assert "ca_file" in info.value.message and ftps_server.log.passwords == 0
    with ftp(ftps_server, tls=True, pins=CertificatePins(tmp_path / "pins")) as t:  # trusted on first use
        t.put(photo, photo.name)
    assert ftps_server.file(photo.name).read_bytes() == photo.read_bytes()


def test_ftps_wrong_password(ftps_server, ftps_cert):
    ctx = ssl.create_default_context(cafile=str(ftps_cert))
    with pytest.raises(AuthenticationFailed):
        ftp(ftps_server, tls=True, ssl_context=ctx, password="nope").connect()


def test_plain_ftp_client_is_refused_by_a_tls_only_server(ftps_server):
    with pytest.raises(PermanentError):
        ftp(ftps_server).connect()  # 550 SSL/TLS required on the control channel
