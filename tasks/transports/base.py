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
import socket
import ssl
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from tasks.core.errors import (
    MicrostockError,
    NetworkError,
    ServiceTimeout,
    SizeMismatch,
    Unconfirmed,
)
from tasks.core.secrets import redact


class Transport(ABC):
    """One open connection to one agency's upload target.

    Use as a context manager: ``__enter__`` connects (and authenticates),
    ``__exit__`` closes. One connection is reused for every file of a run;
    after a TransientError the caller closes and connects again.
    Errors are raised only as :mod:`tasks.failures` classes:
    TransientError (retry this file), StageStopped — AuthenticationFailed
    among them — (stop this agency), PermanentError (give up on this file,
    leave it pending; raised by ``connect`` it stops the agency too).
    """

    #: False where the remote cannot be listed (the agency moves files away
    #: after upload); then :meth:`remote_size` always answers None and
    #: :meth:`put` confirms on the server's success reply alone.
    can_list: bool = True

    #: Where files land, for messages and the ledger (never with a password).
    display: str = ""

    def __enter__(self) -> "Transport":
        self.connect()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
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
        same name.
        """
        size = local.stat().st_size
        self.send(local, name)
        self.confirm(name, size)
        return self.remote_path(name)

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
            raise Unconfirmed(
                f"{self.remote_path(name)}: the server said it was stored, but it is not there; "
                "it was probably moved away by the agency, so it is not sent again. If the agency shows it, "
                "record it with `microstock ledger done`; if this agency always moves uploads away, set "
                "remote_keeps_files = false for it"
            )
        if size != expected:
            why = " (a write was refused: disk full or quota?)" if size < expected else ""
            raise SizeMismatch(f"{self.remote_path(name)}: the server kept {size} of {expected} bytes{why}")

    def remote_path(self, name: str) -> str:
        """The remote path of ``name`` as shown to people and written to the ledger."""
        return f"{self.display.rstrip('/')}/{name}"


def say(where: str, text: object, secret: str | None = None) -> str:
    """A message about ``where`` (a target without password), with ``secret`` and anything key-shaped cut out."""
    return redact(f"{where}: {text}", secret)


@contextmanager
def network_errors(where: str, secret: str | None = None) -> Iterator[None]:
    """Turn what a socket or TLS connection raises into :mod:`tasks.core.errors` classes.

    - timeouts → ServiceTimeout
    - TLS breakage → NetworkError ``network:tls``; a host name not found → ``network:dns``
    - refused, reset, dropped connections → NetworkError

    Protocol mappers wrap this one and handle their own library's errors
    first (a certificate that cannot be verified is FTPS's, a bare OSError
    may be an SFTP status).
    """
    try:
        yield
    except MicrostockError:
        raise
    except (TimeoutError, socket.timeout) as exc:
        raise ServiceTimeout(say(where, f"no answer in time ({str(exc) or 'timed out'})", secret)) from exc
    except ssl.SSLError as exc:
        raise NetworkError(say(where, f"TLS failure ({exc.reason or exc})", secret), code="tls") from exc
    except socket.gaierror as exc:
        raise NetworkError(say(where, f"host name not found ({exc.strerror})", secret), code="dns") from exc
    except EOFError as exc:
        raise NetworkError(say(where, f"connection lost ({str(exc) or 'closed'})", secret)) from exc
    except OSError as exc:
        raise NetworkError(say(where, f"connection failed ({exc.strerror or exc})", secret)) from exc


#: OSError numbers that mean "this file was refused", not "the connection broke".
REFUSED_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR})
