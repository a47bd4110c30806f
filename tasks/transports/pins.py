"""Trust on first use for FTPS: the certificate's SHA-256, pinned in the workdir like ssh's known_hosts.

A server whose certificate no CA vouches for (self-signed, as many FTP
servers are) is trusted only when the agency is set to
``trust_unknown_host``, and then not blindly: the first connection pins the
certificate's fingerprint (``host:port SHA256:ab:…``, one line each, in
``<workdir>/ftps_known_certs``) and logs it once; every later connection must
present the same certificate, or is refused before the password is sent.
Writers hold an exclusive lock and read the file again under it, so
``parallel_files`` connections (or two processes) pin one line, not four.

The file is a trust file, so damage never fails open: a line that is not
exactly ``host:port SHA256:<32 hex pairs>``, a byte that is not ASCII, two
different pins for one server, a folder in its place or a file that cannot
be read or written stop the connection (StageStopped ``tls:pins``) with one
line naming the file, the line and the fix — before the password is sent.
A damaged line is never skipped (its server would read as never seen, and
whatever certificate it presents next would be pinned), the file is never
set aside or rebuilt.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import threading
from pathlib import Path

from tasks.core.errors import StageStopped
from tasks.core.printable import printable
from tasks.core.state_files import what_is_wrong

logger = logging.getLogger("microstock.transports")
_lock = threading.Lock()  # threads of one process; fcntl covers other processes

#: One pin: ``host:port``, one space, the fingerprint as :func:`fingerprint` writes it (hex of either case).
_PIN_LINE = re.compile(r"(?P<key>\S+:[0-9]{1,5}) (?P<pin>SHA256(?::[0-9a-fA-F]{2}){32})")


def fingerprint(der: bytes) -> str:
    """``SHA256:ab:cd:…`` of a DER certificate, as people compare it."""
    digest = hashlib.sha256(der).hexdigest()
    return "SHA256:" + ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


class CertificatePins:
    """The pinned certificates of FTPS servers, one ``host:port fingerprint`` line each."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def check(self, where: str, host: str, port: int, der: bytes) -> None:
        """Pin ``der`` for ``host:port`` on first use; StageStopped ``tls:changed`` when another one is pinned,
        ``tls:pins`` when the file is damaged or cannot be read or written (nothing is pinned then)."""
        key, seen = f"{host}:{port}", fingerprint(der)
        with _lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise self._unusable(where, exc) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = _read_all(fd)
                pinned = self._parse(where, raw)
                if key not in pinned:
                    self._pin(fd, raw, f"{key} {seen}\n")
                    logger.warning("%s: trusted the TLS certificate of %s on first use (%s); pinned in %s",
                                   where, key, seen, self.path)
                    return
            except OSError as exc:
                raise self._unusable(where, exc) from None
            finally:
                os.close(fd)
        if pinned[key] != seen:
            raise StageStopped(
                f"{where}: the server's TLS certificate has CHANGED since it was first trusted (pinned "
                f"{pinned[key]}, now {seen}); refusing to connect, the password was not sent — if the change "
                f"is expected (a renewed certificate), delete the line for {key} in {self.path}",
                kind="tls", code="changed")

    def _parse(self, where: str, raw: bytes) -> dict[str, str]:
        """``host:port`` -> its pinned fingerprint (lower-case hex); StageStopped ``tls:pins`` at the first
        damaged line (empty lines are no pins and no damage)."""
        pinned: dict[str, str] = {}
        first: dict[str, int] = {}
        for n, line in enumerate(raw.split(b"\n"), 1):
            line = line.removesuffix(b"\r")  # a line end saved by a Windows editor is no damage
            if not line:
                continue
            try:
                text = line.decode("ascii")
            except UnicodeDecodeError as exc:
                raise self._damaged(where, n, f"byte {exc.start + 1} is not ASCII") from None
            found = _PIN_LINE.fullmatch(text)
            if found is None:
                raise self._damaged(where, n, "not `host:port SHA256:` and 32 hex pairs, one space between")
            host_port, pin = found["key"], "SHA256:" + found["pin"][len("SHA256:"):].lower()
            if pinned.setdefault(host_port, pin) != pin:
                raise self._damaged(where, n, f"a second, different pin for {printable(host_port)} "
                                              f"(the first is line {first[host_port]})")
            first.setdefault(host_port, n)
        return pinned

    def _pin(self, fd: int, raw: bytes, line: str) -> None:
        """Append ``line`` (after a newline when the last line has none) as one write, then fsync; a short or
        failed write cuts the file back, so no half pin is left."""
        payload = (b"\n" if raw and not raw.endswith(b"\n") else b"") + line.encode("ascii")
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            if os.write(fd, payload) != len(payload):
                raise OSError(errno.ENOSPC, "short write (disk full?)")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, end)
            raise

    def _damaged(self, where: str, n: int, why: str) -> StageStopped:
        return StageStopped(
            f"{where}: {printable(self.path)} is damaged at line {n} ({why}); it holds the FTPS certificates "
            f"trusted so far, so none is checked or pinned while it is damaged: refusing to connect, the password "
            f"was not sent — correct or delete line {n} of {printable(self.path)} (a deleted line's server is "
            "trusted again on first use)", kind="tls", code="pins")

    def _unusable(self, where: str, exc: OSError) -> StageStopped:
        return StageStopped(
            f"{where}: the pinned FTPS certificates in {printable(self.path)} {_cannot(exc)}; refusing to "
            "connect, the password was not sent — make it a readable, writable file again (moved away, every "
            "FTPS server is trusted again on first use)", kind="tls", code="pins")


def _cannot(exc: OSError) -> str:
    wrong = what_is_wrong(exc)
    return f"are {wrong}" if isinstance(exc, IsADirectoryError) else f"cannot be used ({exc.strerror or exc})"


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
