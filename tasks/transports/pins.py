"""Trust on first use for FTPS: the certificate's SHA-256, pinned in the workdir like ssh's known_hosts.

A server whose certificate no CA vouches for (self-signed, as many FTP
servers are) is trusted only when the agency is set to
``trust_unknown_host``, and then not blindly: the first connection pins the
certificate's fingerprint (``host:port sha256``, one line each, in
``<workdir>/ftps_known_certs``) and logs it once; every later connection must
present the same certificate, or is refused before the password is sent.
Writers hold an exclusive lock and read the file again under it, so
``parallel_files`` connections (or two processes) pin one line, not four.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import threading
from pathlib import Path

from tasks.core.errors import StageStopped

logger = logging.getLogger("microstock.transports")
_lock = threading.Lock()  # threads of one process; fcntl covers other processes


def fingerprint(der: bytes) -> str:
    """``SHA256:ab:cd:…`` of a DER certificate, as people compare it."""
    digest = hashlib.sha256(der).hexdigest()
    return "SHA256:" + ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


class CertificatePins:
    """The pinned certificates of FTPS servers, one ``host:port fingerprint`` line each."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def check(self, where: str, host: str, port: int, der: bytes) -> None:
        """Pin ``der`` for ``host:port`` on first use; StageStopped ``tls:changed`` when another one is pinned."""
        key, seen = f"{host}:{port}", fingerprint(der)
        with _lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+", encoding="ascii") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.seek(0)
                pinned = dict(line.split(maxsplit=1) for line in fh.read().splitlines() if line.count(" ") == 1)
                if key not in pinned:
                    fh.write(f"{key} {seen}\n")
                    fh.flush()
                    logger.warning("%s: trusted the TLS certificate of %s on first use (%s); pinned in %s",
                                   where, key, seen, self.path)
                    return
        if pinned[key] != seen:
            raise StageStopped(
                f"{where}: the server's TLS certificate has CHANGED since it was first trusted (pinned "
                f"{pinned[key]}, now {seen}); refusing to connect, the password was not sent — if the change "
                f"is expected (a renewed certificate), delete the line for {key} in {self.path}",
                kind="tls", code="changed")
