"""Long transfers: the timeout is the server's silence, not the transfer's length; progress while a clip goes.

Real loopback sockets and servers. The slow reader reads at 100 KB/s with
small socket buffers (set by the test on its own sockets), so a 64 KiB
block takes 0.65 s while the timeout is 0.25 s: bytes keep moving, and the
transfer must go on; a reader that stops must end it with one clear line.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import threading
import time

import pytest

from tasks.core.errors import ReplyOverdue, TransientError
from tasks.observe import progress
from tasks.transports.ftp import FtpTarget, hand_over
from tasks.transports.progress import LONG_TRANSFER_BYTES, TRANSFER_LOG_EVERY_S, TransferProgress
from tasks.transports.sftp import SftpTarget
from tests.fakes.servers import PASSWORD, USER, ftp_server, known_hosts, sftp_server  # noqa: F401  (fixtures)

TIMEOUT = 0.25
RATE = 100_000  # bytes per second the slow reader takes
BLOCK = 64 * 1024


class SlowReader:
    """A loopback TCP peer that reads ``RATE`` bytes/s, 4 KiB at a time, and stops after ``stop_after`` bytes."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # before listen: the window it offers
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.stop_after, self.got, self.release = stop_after, 0, threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            while chunk := conn.recv(4096):
                self.got += len(chunk)
                if self.stop_after is not None and self.got >= self.stop_after:
                    self.release.wait(10)  # stalled, connection left open
                    return
                time.sleep(len(chunk) / RATE)

    def connect(self) -> socket.socket:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4608)  # so the kernel cannot take the file at once
        sock.connect(self.listener.getsockname())
        return sock

    def close(self) -> None:
        self.release.set()
        self.thread.join(5)
        self.listener.close()


@pytest.fixture
def slow_reader():
    readers: list[SlowReader] = []

    def make(stop_after: int | None = None) -> SlowReader:
        readers.append(SlowReader(stop_after))
        return readers[-1]

    yield make
    for reader in readers:
        reader.close()


def test_a_slow_link_goes_on_while_the_server_keeps_taking_bytes(slow_reader):
    reader, size = slow_reader(), 150_000
    moved: list[int] = []
    sock = reader.connect()
    started = time.monotonic()
    with sock:
        hand_over(sock, io.BytesIO(os.urandom(size)), "harbour_dawn.mp4", size, TIMEOUT, moved.append)
    took = time.monotonic() - started
    reader.thread.join(5)
    assert reader.got == size
    assert moved == sorted(moved) and moved[-1] == size and len(moved) > 3
    # every 64 KiB block took longer than the timeout: a timeout per block (sendall) would have failed
    assert took / (size / BLOCK) > TIMEOUT


def test_a_stalled_link_ends_with_one_line_naming_the_file(slow_reader):
    reader, size = slow_reader(stop_after=20_000), 400_000
    sock = reader.connect()
    started = time.monotonic()
    with sock, pytest.raises(TimeoutError) as info:
        hand_over(sock, io.BytesIO(os.urandom(size)), "harbour_dawn.mp4", size, TIMEOUT, lambda n: None)
    waited = time.monotonic() - started
    message = str(info.value)
    assert "harbour_dawn.mp4" in message and f"{TIMEOUT:g} s" in message and "\n" not in message
    assert f"of {size:,} bytes handed over" in message
    assert TIMEOUT <= waited < TIMEOUT + 1.5


def sparse(path, size: int):
    with open(path, "wb") as fh:
        fh.write(os.urandom(1 << 16))
        fh.seek(size - 1)
        fh.write(b"\1")
    return path


def test_an_ftp_server_that_stops_reading_mid_clip_is_a_timeout_naming_the_clip(ftp_server, tmp_path):
    clip = sparse(tmp_path / "harbour_dawn.mp4", 48 * 1024 * 1024)
    ftp_server.faults.hang_after = [1 << 20]
    started = time.monotonic()
    with pytest.raises(TransientError) as info:
        with FtpTarget("127.0.0.1", ftp_server.port, USER, PASSWORD, timeout=0.3) as t:
            t.put(clip, clip.name)
    assert not isinstance(info.value, ReplyOverdue)  # stopped mid-file: not "every byte handed over"
    assert info.value.kind == "timeout" and "\n" not in info.value.message
    assert "took nothing of harbour_dawn.mp4 for 0.3 s" in info.value.message
    assert time.monotonic() - started < 3
    assert ftp_server.log.received() == []


def test_an_ftp_upload_of_a_clip_reports_growing_bytes_to_the_bars_and_the_log(ftp_server, tmp_path, caplog):
    size = LONG_TRANSFER_BYTES + 5_000_000
    clip = sparse(tmp_path / "harbour_dawn.mp4", size)
    seen: list[tuple[str, int, int]] = []
    listener = lambda *call: seen.append(call)  # noqa: E731
    progress.add_listener(listener)
    try:
        with caplog.at_level(logging.INFO, "tasks.transports.progress"):
            with FtpTarget("127.0.0.1", ftp_server.port, USER, PASSWORD, timeout=5) as t:
                t.put(clip, clip.name)
    finally:
        progress.remove_listener(listener)
    mbs = [done for label, done, total in seen if label == "↑ harbour_dawn.mp4 MB"]
    assert {total for _, _, total in seen} == {-(-size // 1_000_000)}
    assert mbs[0] == 0 and mbs[-1] == -(-size // 1_000_000) and mbs == sorted(mbs) and len(set(mbs)) > 10
    assert any(f"harbour_dawn.mp4: sending {size / 1e6:,.0f} MB" in r.getMessage() for r in caplog.records)
    assert ftp_server.file(clip.name).stat().st_size == size


def test_a_short_file_shows_no_transfer_progress(ftp_server, tmp_path):
    photo = tmp_path / "sunset_000.jpg"
    photo.write_bytes(os.urandom(300_000))
    seen: list[tuple] = []
    listener = lambda *call: seen.append(call)  # noqa: E731
    progress.add_listener(listener)
    try:
        with FtpTarget("127.0.0.1", ftp_server.port, USER, PASSWORD, timeout=5) as t:
            t.put(photo, photo.name)
    finally:
        progress.remove_listener(listener)
    assert seen == []


def test_a_long_transfer_logs_at_most_every_n_seconds(caplog):
    now = [100.0]
    total = 100_000_000
    with caplog.at_level(logging.INFO, "tasks.transports.progress"):
        tell = TransferProgress("ftp://me@host:21/", "harbour_dawn.mp4", total, clock=lambda: now[0])
        for step in range(1, 71):  # 35 s, a call every 0.5 s
            now[0] += 0.5
            tell(step * total // 80)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "ftp://me@host:21/harbour_dawn.mp4: sending 100 MB"
    progress_lines = lines[1:]
    assert len(progress_lines) == int(35 // TRANSFER_LOG_EVERY_S)
    # 10 s in: 20 calls of 1.25 MB each
    assert progress_lines[0] == "ftp://me@host:21/harbour_dawn.mp4: 25 of 100 MB sent (25 %, 2.5 MB/s)"


def sftp(server, known_hosts, timeout: float) -> SftpTarget:  # noqa: F811
    return SftpTarget("127.0.0.1", server.port, USER, PASSWORD, known_hosts=known_hosts, timeout=timeout)


def test_sftp_goes_on_while_the_server_keeps_acknowledging(sftp_server, known_hosts, tmp_path):
    clip = tmp_path / "harbour_dawn.mp4"
    clip.write_bytes(os.urandom(16 * 32 * 1024))
    sftp_server.faults.rate = 400_000  # each 32 KiB write takes 0.08 s: the file 1.3 s, the timeout 0.3 s
    started = time.monotonic()
    with sftp(sftp_server, known_hosts, 0.3) as t:
        t.put(clip, clip.name)
    assert time.monotonic() - started > 4 * 0.3
    assert sftp_server.file(clip.name).read_bytes() == clip.read_bytes()


def test_an_sftp_server_that_stops_acknowledging_is_a_timeout_naming_the_clip(sftp_server, known_hosts, tmp_path):
    clip = tmp_path / "harbour_dawn.mp4"
    clip.write_bytes(os.urandom(2 * 32 * 1024))
    sftp_server.faults.rate = 20_000  # one 32 KiB write takes 1.6 s: longer than the timeout
    with pytest.raises(TransientError) as info:
        with sftp(sftp_server, known_hosts, 0.3) as t:
            t.put(clip, clip.name)
    assert info.value.kind == "timeout" and "\n" not in info.value.message
    assert "took nothing of harbour_dawn.mp4 for 0.3 s" in info.value.message


def test_an_upload_only_sftp_server_that_refuses_fstat_still_takes_the_clip(sftp_server, known_hosts, tmp_path,
                                                                              monkeypatch):
    import paramiko

    from tests.fakes import servers

    monkeypatch.setattr(servers._SftpHandle, "stat", lambda self: paramiko.sftp.SFTP_PERMISSION_DENIED)
    clip = tmp_path / "harbour_dawn.mp4"
    clip.write_bytes(os.urandom(3 * 32 * 1024))
    with SftpTarget("127.0.0.1", sftp_server.port, USER, PASSWORD, known_hosts=known_hosts, timeout=5,
                    keeps_files=False) as t:
        t.put(clip, clip.name)
    assert sftp_server.file(clip.name).read_bytes() == clip.read_bytes()


def test_an_sftp_upload_of_a_clip_reports_growing_bytes(sftp_server, known_hosts, tmp_path):
    size = LONG_TRANSFER_BYTES + 1_000_000
    clip = sparse(tmp_path / "harbour_dawn.mp4", size)
    seen: list[int] = []
    listener = lambda label, done, total: seen.append(done)  # noqa: E731
    progress.add_listener(listener)
    try:
        with sftp(sftp_server, known_hosts, 5) as t:
            t.put(clip, clip.name)
    finally:
        progress.remove_listener(listener)
    assert seen[0] == 0 and seen[-1] == -(-size // 1_000_000) and seen == sorted(seen) and len(set(seen)) > 10
    assert sftp_server.file(clip.name).stat().st_size == size
