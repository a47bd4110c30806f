"""The transport interface, and the one place where protocol errors become project errors.

Each protocol lives in its own module behind :class:`Transport`. The ledger
only records what :meth:`Transport.put` confirmed, so a transport must never
return from ``put`` unless the remote holds the whole file.

:func:`map_transport_errors` is the single boundary between ``ftplib``,
``ssl``, ``socket`` and ``paramiko`` exceptions and :mod:`tasks.failures`:
every transport method runs inside it, nothing else classifies them.
"""

from __future__ import annotations

import errno
import ftplib
import socket
import ssl
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import paramiko
from paramiko.ssh_exception import NoValidConnectionsError

from tasks.secrets import redact
from tasks.failures import (
    AuthenticationFailed,
    MicrostockError,
    NetworkError,
    PermanentError,
    ServiceTimeout,
    ServiceUnavailable,
    StageStopped,
    TransientError,
)


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

    @abstractmethod
    def put(self, local: Path, name: str) -> str:
        """Upload ``local`` as ``name`` and return its remote path.

        Returns only when the server reported success **and** the remote size
        equals the local size (or, where ``can_list`` is False, on the success
        reply alone); otherwise raises. Replaces a partial remote file of the
        same name.
        """

    def remote_path(self, name: str) -> str:
        """The remote path of ``name`` as shown to people and written to the ledger."""
        return f"{self.display.rstrip('/')}/{name}"


def confirm_size(transport: Transport, name: str, expected: int) -> None:
    """The second half of a confirmation: the remote file has exactly ``expected`` bytes.

    A file that is not there right after the server said it was stored is
    neither recorded nor sent again: the agency may have taken it already.
    That stops the agency with a message saying what to check.
    """
    if not transport.can_list:
        return
    size = transport.remote_size(name)
    if size is None:
        raise StageStopped(
            f"{transport.remote_path(name)}: the server said it was stored, but it is not there; "
            "it was probably moved away by the agency, so it is not sent again. If the agency shows it, "
            "record it with `microstock ledger done`; if this agency always moves uploads away, set "
            "remote_keeps_files = false for it",
            error_class="unconfirmed",
        )
    if size != expected:
        why = " (a write was refused: disk full or quota?)" if size < expected else ""
        raise TransientError(
            f"{transport.remote_path(name)}: the server kept {size} of {expected} bytes{why}",
            error_class="size_mismatch",
        )


class HostKeyUnknown(paramiko.SSHException):
    """Raised by the SFTP host-key policy: the server is not in known_hosts."""


@contextmanager
def map_transport_errors(where: str, secret: str | None = None,
                         alive: Callable[[], bool] | None = None) -> Iterator[None]:
    """Turn a lower library's exception into a :mod:`tasks.failures` class.

    ``where`` (a target without password) starts every message; ``secret``
    (the password) is cut out of any server text that might echo it.
    ``alive`` tells whether the connection still stands: paramiko raises a
    bare OSError both for an SFTP "failure" status and for a closed socket.

    - FTP 530/532, SSH authentication refused → AuthenticationFailed
    - FTP 4xx (421 busy/closing, 425/426 data connection, 450/451, 452 no
      space) → ServiceUnavailable (retry); FTP 5xx → PermanentError
    - timeouts → ServiceTimeout; refused, reset, dropped connections, DNS,
      TLS/SSH breakage → NetworkError
    - unknown or changed host key, unverifiable certificate → StageStopped
    - SFTP "no such file", "permission denied", "failure" → PermanentError
    """

    def say(text: object) -> str:
        return redact(f"{where}: {text}", secret)

    try:
        yield
    except MicrostockError:
        raise
    except ftplib.error_temp as exc:
        code = str(exc)[:3]
        raise ServiceUnavailable(say(f"server busy or out of room ({exc})"), error_class=f"ftp:{code}") from None
    except ftplib.error_perm as exc:
        code = str(exc)[:3]
        if code in ("530", "532"):
            raise AuthenticationFailed(say(f"login refused ({exc})"), error_class=f"auth:ftp:{code}") from None
        raise PermanentError(say(f"refused ({exc})"), error_class=f"ftp:{code}") from None
    except (ftplib.error_reply, ftplib.error_proto) as exc:
        raise NetworkError(say(f"unexpected FTP reply ({exc})"), error_class="ftp:reply") from None
    except paramiko.AuthenticationException as exc:
        raise AuthenticationFailed(say(f"login refused ({type(exc).__name__}: {exc})"),
                                   error_class="auth:ssh") from None
    except paramiko.BadHostKeyException as exc:
        raise StageStopped(say(f"the server's host key has CHANGED (got {exc.key.get_name()} "
                               f"{exc.key.fingerprint}); refusing to connect — if the change is expected, "
                               "remove its old line from known_hosts"), error_class="host_key") from None
    except HostKeyUnknown as exc:
        raise StageStopped(say(str(exc)), error_class="host_key") from None
    except ssl.SSLCertVerificationError as exc:
        raise StageStopped(say(f"the server's TLS certificate cannot be verified ({exc.verify_message}); "
                               "set trust_unknown_host = true to skip the check"), error_class="tls:certificate") from None
    except (TimeoutError, socket.timeout) as exc:
        raise ServiceTimeout(say(f"no answer in time ({str(exc) or 'timed out'})")) from None
    except ssl.SSLError as exc:
        raise NetworkError(say(f"TLS failure ({exc.reason or exc})"), error_class="network:tls") from None
    except (paramiko.SSHException, EOFError) as exc:
        raise NetworkError(say(f"connection lost ({type(exc).__name__}: {str(exc) or 'closed'})")) from None
    except NoValidConnectionsError as exc:
        raise NetworkError(say(f"connection failed ({exc.strerror})")) from None
    except socket.gaierror as exc:
        raise NetworkError(say(f"host name not found ({exc.strerror})"), error_class="network:dns") from None
    except OSError as exc:
        refused = exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR) or (
            exc.errno is None and alive is not None and alive())
        if refused:  # paramiko's SFTP statuses arrive as OSError: no such file, permission denied, failure
            raise PermanentError(say(f"refused ({exc.strerror or exc})"), error_class="sftp") from None
        raise NetworkError(say(f"connection failed ({exc.strerror or exc})")) from None
