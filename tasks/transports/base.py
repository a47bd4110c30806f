"""The transport interface: put a file on an agency's server and prove it arrived.

Each protocol lives in its own module behind :class:`Transport`. The ledger
only records what :meth:`Transport.put` confirmed, so a transport must never
return from ``put`` unless the remote holds the whole file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType


class Transport(ABC):
    """One open connection to one agency's upload target.

    Use as a context manager: ``__enter__`` connects (and authenticates),
    ``__exit__`` closes. One connection is reused for every file of a run.
    Errors are raised only as :mod:`tasks.failures` classes:
    TransientError (retry this file), AuthenticationFailed (stop this agency),
    PermanentError (give up on this file, leave it pending).
    """

    #: False where the remote cannot be listed (files are moved away after
    #: upload); then :meth:`remote_size` always answers None.
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

    @abstractmethod
    def close(self) -> None:
        """Close the connection; never raises."""

    @abstractmethod
    def remote_size(self, name: str) -> int | None:
        """Size in bytes of the remote file ``name``, or None when it is absent (or cannot be known)."""

    @abstractmethod
    def put(self, local: Path, name: str) -> str:
        """Upload ``local`` as ``name`` and return its remote path.

        Returns only when the server reported success **and** the remote size
        equals the local size; otherwise raises. Replaces a partial remote
        file of the same name.
        """
