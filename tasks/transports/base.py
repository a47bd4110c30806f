"""The transport interface, the put → confirm sequence, and the network errors every protocol shares.

Each protocol lives in its own module behind :class:`Transport` and maps its
own library's errors next to the code that calls it (``ftp.ftp_errors``,
``sftp.sftp_errors``); what a socket or TLS connection can raise is mapped
once, here, by :func:`network_errors`, which those build on. The ledger only
records what :meth:`Transport.put` confirmed, and ``put`` is written once,
here: a protocol implements :meth:`Transport.send`, and no protocol can
forget the confirmation that follows it.
"""

from __future__ import annotations

import errno
import fcntl
import select
import socket
import ssl
import struct
import termios
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tasks.core.errors import NETWORK, TIMEOUT, MicrostockError, StageStopped, TransientError
from tasks.core.secrets import redact

#: The ``target_cause`` of a full disk or quota at the target (FTP 451/452/552, fewer bytes kept than sent).
DISK_FULL = "the server's disk is full or over quota"


class Transport(ABC):
    """One open connection to one agency's upload target.

    Use as a context manager: ``__enter__`` connects (and authenticates),
    ``__exit__`` closes. One connection is reused for every file of a run;
    after a TransientError the caller closes and connects again.
    Errors are raised only as :mod:`tasks.core.errors` classes:
    TransientError (retry this file), StageStopped — AuthenticationFailed
    among them — (stop this agency), PermanentError (give up on this file,
    leave it pending; raised by ``connect`` it stops the agency too). An
    error every further file to this target would meet says so in its
    ``scope`` and ``target_cause``; a write the server refused, in ``refused``.
    """

    #: False where the remote cannot be listed (the agency moves files away
    #: after upload); then :meth:`remote_size` always answers None and
    #: :meth:`put` confirms on the server's success reply alone.
    can_list: bool = True

    #: Where files land, for messages and the ledger (never with a password).
    display: str = ""
    #: The password (or key passphrase) this connection was opened with; None where there is none.
    _password: str | None = None

    def redacted(self, text: str) -> str:
        """``text`` with this connection's password (and anything key-shaped) cut out: for the words of an
        unforeseen error, which may quote what was sent. Asks no store for the password: it is the one in hand."""
        return redact(text, self._password)

    def __enter__(self) -> "Transport":
        self.connect()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @abstractmethod
    def connect(self) -> None:
        """Open the connection and log in. Raises AuthenticationFailed on a refused login."""

    @property
    @abstractmethod
    def connected(self) -> bool:
        """True between a successful :meth:`connect` and :meth:`close`."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; never raises. Safe to call twice or before connect."""

    @abstractmethod
    def remote_size(self, name: str) -> int | None:
        """Size in bytes of the remote file ``name``, or None when it is absent (or cannot be known)."""

    def put(self, local: Path, name: str) -> str:
        """Upload ``local`` as ``name``, confirm it, and return its remote path.

        Returns only when the server reported success **and** the remote size
        equals the local size (or, where ``can_list`` is False, on the success
        reply alone); otherwise raises. Replaces a partial remote file of the
        same name; after a write the server ``refused``, deletes what it left.
        """
        size = local.stat().st_size
        try:
            self.send(local, name)
            self.confirm(name, size)
        except MicrostockError as exc:
            if exc.refused:  # the server refused, the transfer is over
                self._clear_partial(name, size, exc)
            raise
        return self.remote_path(name)

    def _clear_partial(self, name: str, size: int, exc: MicrostockError) -> None:
        """After a refused write, delete what it left under the final name (an agency would ingest a
        zero-byte or cut-short file), and say in ``exc`` what was left. Never raises: the refusal is the news."""
        try:
            left = self.remote_size(name) if self.connected else None
            if left is None or left >= size:
                return
            self.remove(name)
            said = f"; the partial file it left ({left} bytes) was deleted"
        except MicrostockError:
            said = f"; a partial file may be left at {self.remote_path(name)} (it could not be deleted)"
        exc.message += said
        exc.args = (exc.message,)

    @abstractmethod
    def remove(self, name: str) -> None:
        """Delete the remote file ``name`` (only ever a partial one this run wrote)."""

    @abstractmethod
    def send(self, local: Path, name: str) -> None:
        """Send ``local`` as ``name``; return once the server reported the file stored, else raise."""

    def confirm(self, name: str, expected: int) -> None:
        """The second half of a confirmation: the remote file has exactly ``expected`` bytes.

        A file that is not there right after the server said it was stored is
        neither recorded nor sent again: the agency may have taken it already.
        That stops the agency with a message saying what to check.
        """
        if not self.can_list:
            return
        size = self.remote_size(name)
        if size is None:
            raise StageStopped(
                f"{self.remote_path(name)}: the server said it was stored, but it is not there; "
                "it was probably moved away by the agency, so it is not sent again. If the agency shows it, "
                "record it with `microstock ledger done`; if this agency always moves uploads away, set "
                "remote_keeps_files = false for it", kind="unconfirmed"
            )
        if size != expected:
            message = f"{self.remote_path(name)}: the server kept {size} of {expected} bytes"
            if size < expected:
                raise TransientError(f"{message} (a write was refused: disk full or quota?)", kind="size_mismatch",
                                     target_cause=DISK_FULL, refused=True)
            raise TransientError(message, kind="size_mismatch")

    def remote_path(self, name: str) -> str:
        """The remote path of ``name`` as shown to people and written to the ledger."""
        return f"{self.display.rstrip('/')}/{name}"


def remote_display(scheme: str, user: str, host: str, port: int, folder: str) -> str:
    """How a remote target is shown to people and in the ledger: ``scheme://user@host:port/folder``."""
    who = f"{user}@" if user else ""
    return f"{scheme}://{who}{host}:{port}/{folder}"


def say(where: str, text: object, secret: str | None = None) -> str:
    """A message about ``where`` (a target without password), with ``secret`` and anything key-shaped cut out."""
    return redact(f"{where}: {text}", secret)


@contextmanager
def network_errors(where: str, secret: str | None = None) -> Iterator[None]:
    """Turn what a socket or TLS connection raises into :mod:`tasks.core.errors` classes.

    - timeouts → TransientError ``timeout``
    - TLS breakage → TransientError ``network:tls``; a host name not found → ``network:dns``
    - refused, reset, dropped connections → TransientError ``network``

    Protocol mappers wrap this one and handle their own library's errors
    first (a certificate that cannot be verified is FTPS's, a bare OSError
    may be an SFTP status).
    """
    try:
        yield
    except MicrostockError:
        raise
    except (TimeoutError, socket.timeout) as exc:
        raise TransientError(say(where, f"no answer in time ({str(exc) or 'timed out'})", secret),
                             kind=TIMEOUT) from exc
    except ssl.SSLError as exc:
        raise TransientError(say(where, f"TLS failure ({exc.reason or exc})", secret), kind=NETWORK,
                             code="tls") from exc
    except socket.gaierror as exc:
        raise TransientError(say(where, f"host name not found ({exc.strerror})", secret), kind=NETWORK,
                             code="dns") from exc
    except EOFError as exc:
        raise TransientError(say(where, f"connection lost ({str(exc) or 'closed'})", secret), kind=NETWORK) from exc
    except OSError as exc:
        raise TransientError(say(where, f"connection failed ({exc.strerror or exc})", secret),
                             kind=NETWORK) from exc



#: OSError numbers that mean "this file was refused", not "the connection broke".
REFUSED_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR})


# --- what the server still has to read -------------------------------------------------


@dataclass(frozen=True)
class Drained:
    """What :func:`drain` saw: bytes the server had already acknowledged when the last byte was
    handed over, and the rate it read the rest at (None when there was nothing to measure)."""

    acknowledged: int
    rate: float | None

    def reply_wait(self, timeout: float) -> float:
        """How long the server's reply may take after the last byte: ``timeout`` plus the time the
        server needs, at the rate it was seen reading, for what it had acknowledged but perhaps not
        yet read (its own receive buffer)."""
        if not self.rate:
            return timeout
        return timeout + self.acknowledged / self.rate


def unacknowledged(sock: socket.socket) -> int | None:
    """Bytes written to ``sock`` that the peer has not acknowledged yet (Linux ``SIOCOUTQ``); None
    where the kernel cannot say."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    except (OSError, AttributeError):
        return None


def drain(sock: socket.socket, size: int, timeout: float, answer: socket.socket | None = None,
          poll_s: float = 0.05) -> Drained:
    """Wait until the peer has acknowledged every byte written to ``sock`` (``size`` in all).

    The wait lasts as long as the server keeps reading — a slow server is
    not a dead one — and raises TimeoutError once nothing was acknowledged
    for ``timeout`` seconds. It ends early when ``answer`` (the control
    connection) has something to say: the server's verdict (426 disk full,
    say) comes before the rest would be read.
    """
    held = unacknowledged(sock)
    if held is None:
        return Drained(size, None)
    start = last_change = time.monotonic()
    left = held
    while left > 0:
        if answer is None:
            time.sleep(poll_s)
        elif select.select([answer], [], [], poll_s)[0]:
            return Drained(max(0, size - held), None)
        now_left = unacknowledged(sock) or 0
        now = time.monotonic()
        if now_left < left:
            left, last_change = now_left, now
        elif now - last_change > timeout:
            raise TimeoutError(f"the server read nothing for {timeout:g} s ({left} of {size} bytes unread)")
    took = time.monotonic() - start
    measured = took >= 4 * poll_s  # shorter: the polling itself, not the server's pace
    return Drained(max(0, size - held), held / took if measured else None)  # TLS adds bytes to held
