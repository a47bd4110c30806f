"""``ftp://`` and ``ftps://`` targets with ``ftplib``: passive mode, binary, timeouts.

``ftps://`` is explicit TLS (``AUTH TLS`` before the password is sent) with a
protected data channel (``PROT P``); the certificate is verified against the
system CAs, or against the agency's ``ca_file``; with ``trust_unknown_host``
it is pinned on first use instead (``tasks.transports.pins``), and a changed
one is refused before the password is sent.

Files are stored under their final name, not a temporary one: agencies
ingest what appears in their folder, and a rename after the fact can fail
once the agency has taken the file (which would then be sent again). See
docs/UPLOADS.md.

A killed upload must not look finished. In FTP's stream mode the end of the
file *is* the data connection closing, so a client that dies mid-transfer
and closes normally (FIN) makes the server believe a truncated file was
complete. The data socket therefore lingers with a zero timeout from the
moment it is opened: any close that is not the end of a fully sent file —
an exception, or the kernel closing the socket of a killed process — resets
the connection (RST), which servers report as an aborted transfer. Only
after the last byte is handed to the kernel is the linger switched off, so
the normal close says "end of file". (A kill in the microseconds between
those two steps still resets a file whose bytes may all have arrived; see
docs/UPLOADS.md.)
"""

from __future__ import annotations

import ftplib
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tasks.core.errors import (
    AuthenticationFailed,
    MicrostockError,
    PermanentError,
    ReplyOverdue,
    StageStopped,
    TransientError,
)
from tasks.transports.base import (
    DISK_FULL,
    Transport,
    drain,
    network_errors,
    remote_display,
    say,
    unacknowledged,
)
from tasks.transports.pins import CertificatePins
from tasks.transports.progress import TransferProgress

_BLOCK = 64 * 1024
#: How often a send waiting for the kernel looks whether the server took anything (at most).
_POLL_S = 0.25
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)
_FIN_ON_CLOSE = struct.pack("ii", 0, 0)

#: FTP codes every further file to the target meets alike (``scope="target"``), and the cause the upload
#: stage names.
_TARGET_CAUSES = {"451": DISK_FULL, "452": DISK_FULL, "552": DISK_FULL,
                  "550": "the server does not permit writing there"}


@contextmanager
def ftp_errors(where: str, secret: str | None = None) -> Iterator[None]:
    """Turn ``ftplib``'s and TLS's errors into :mod:`tasks.core.errors` classes (on top of
    :func:`~tasks.transports.base.network_errors`).

    - 530/532 → AuthenticationFailed ``auth:ftp:<code>``
    - other 4xx (421 busy/closing, 425/426 data connection, 450/451, 452 no
      space) → TransientError ``ftp:<code>`` (retry); other 5xx → PermanentError
      ``ftp:<code>``; both ``refused``, and 451/452/552 (disk full or quota) and
      550 (writing not permitted) with ``scope="target"``
    - a reply the protocol does not allow → TransientError ``ftp:reply``
    - an unverifiable certificate → StageStopped ``tls:certificate``
    - a passive data connection that cannot be opened → TransientError ``ftp:data``, ``scope="target"``
    """
    with network_errors(where, secret):
        try:
            yield
        except MicrostockError:
            raise
        except _NoDataConnection as exc:
            raise TransientError(say(where, f"the passive data connection to port {exc.port} cannot be "
                                            f"opened ({exc.cause}), although the login worked: usually a "
                                            "firewall or NAT between here and the server, or the server "
                                            "advertising a wrong passive address or port range (check the "
                                            "agency's passive-mode settings and any firewall on this side)",
                                     secret), kind="ftp", code="data",
                                 target_cause="the passive data connection cannot be opened") from None
        except ftplib.error_temp as exc:
            code = str(exc)[:3]
            cause = _TARGET_CAUSES.get(code)
            raise TransientError(say(where, f"server busy or out of room ({exc})", secret), kind="ftp", code=code,
                                 refused=True, target_cause=cause) from None
        except ftplib.error_perm as exc:
            code = str(exc)[:3]
            if code in ("530", "532"):
                raise AuthenticationFailed(say(where, f"login refused ({exc})", secret), code=f"ftp:{code}") from None
            cause = _TARGET_CAUSES.get(code)
            raise PermanentError(say(where, f"refused ({exc})", secret), kind="ftp", code=code, refused=True,
                                 target_cause=cause) from None
        except (ftplib.error_reply, ftplib.error_proto) as exc:
            raise TransientError(say(where, f"unexpected FTP reply ({exc})", secret), kind="ftp",
                                 code="reply") from None
        except ssl.SSLCertVerificationError as exc:
            raise StageStopped(say(where, f"the server's TLS certificate cannot be verified "
                                          f"({exc.verify_message}); set ca_file to the PEM file of "
                                          "the certificate (or its CA) to trust it, or trust_unknown_host "
                                          "= true to pin it on first use", secret),
                               kind="tls", code="certificate") from None


class _NoDataConnection(Exception):
    """The passive data connection could not be opened; :func:`ftp_errors` makes it ``ftp:data``."""

    def __init__(self, port: int, cause: str) -> None:
        super().__init__(f"port {port}: {cause}")
        self.port, self.cause = port, cause


class _PassiveData:
    """Passive data connections; for STOR one that resets on close from the moment it exists.

    ftplib's own ``ntransfercmd`` sends STOR before handing the socket over:
    a process killed in between would close it normally and leave an empty
    file that looks complete. For FTPS, the data connection resumes the
    control connection's TLS session, which servers such as vsftpd require.
    """

    def ntransfercmd(self, cmd, rest=None):
        host, port = self.makepasv()
        try:
            conn = socket.create_connection((host, port), self.timeout, source_address=self.source_address)
        except TimeoutError:
            raise _NoDataConnection(port, f"no answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise _NoDataConnection(port, exc.strerror or str(exc)) from None
        try:
            if cmd.startswith("STOR"):
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            resp = self.sendcmd(cmd)
            if resp[0] == "2":  # some servers send a 2xx before the 1xx
                resp = self.getresp()
            if resp[0] != "1":
                raise ftplib.error_reply(resp)
            if isinstance(self, ftplib.FTP_TLS) and self._prot_p:
                session = self.sock.session if isinstance(self.sock, ssl.SSLSocket) else None
                conn = self.context.wrap_socket(conn, server_hostname=self.host, session=session)
        except BaseException:
            conn.close()
            raise
        return conn, None


class _FTP(_PassiveData, ftplib.FTP):
    pass


class _FTPS(_PassiveData, ftplib.FTP_TLS):
    pass


class FtpTarget(Transport):
    """One FTP or FTPS login, reused for every file of the run."""

    def __init__(
        self,
        host: str,
        port: int = 21,
        user: str = "",
        password: str | None = None,
        folder: str = "",
        *,
        tls: bool = False,
        timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        pins: CertificatePins | None = None,
        keeps_files: bool = True,
    ) -> None:
        self.host, self.port, self.user, self.folder = host, port, user, folder
        self.tls, self.timeout = tls, timeout
        self._password = password
        self._context = ssl_context
        self._pins = pins
        if tls and self._context is None:
            self._context = ssl.create_default_context()
            if pins is not None:  # trust on first use: the pinned fingerprint is the check, not a CA
                self._context.check_hostname = False
                self._context.verify_mode = ssl.CERT_NONE
        self.can_list = keeps_files
        self.display = remote_display("ftps" if tls else "ftp", user, host, port, folder)
        self._ftp: ftplib.FTP | None = None
        self._no_size_command = False

    # --- connection ------------------------------------------------------------

    def connect(self) -> None:
        """Connect, switch to TLS first for ftps, log in, binary mode, change to the folder."""
        self.close()
        with ftp_errors(self.display, self._password):
            ftp = _FTPS(context=self._context, timeout=self.timeout) if self.tls else _FTP(timeout=self.timeout)
            try:
                ftp.connect(self.host, self.port)
                if isinstance(ftp, ftplib.FTP_TLS):
                    ftp.auth()  # before USER/PASS: the password never travels in clear text
                    if self._pins is not None:  # and never to a server whose certificate changed
                        self._pins.check(self.display, self.host, self.port, ftp.sock.getpeercert(binary_form=True))
                ftp.login(self.user, self._password or "")
                if isinstance(ftp, ftplib.FTP_TLS):
                    ftp.prot_p()
                ftp.set_pasv(True)
                ftp.voidcmd("TYPE I")
                if self.folder:
                    ftp.cwd(self.folder)
            except BaseException:
                _quietly_close(ftp)
                raise
        self._ftp = ftp

    @property
    def connected(self) -> bool:
        return self._ftp is not None

    def close(self) -> None:
        ftp, self._ftp = self._ftp, None
        if ftp is not None:
            try:
                ftp.quit()
            except Exception:
                pass
            _quietly_close(ftp)

    # --- what is there ---------------------------------------------------------

    def remote_size(self, name: str) -> int | None:
        """``SIZE`` in binary mode; servers without it are asked through ``MLSD``."""
        if not self.can_list:
            return None
        ftp = self._connected()
        with ftp_errors(self.display, self._password):
            if not self._no_size_command:
                try:
                    return ftp.size(name)
                except ftplib.error_perm as exc:
                    code = str(exc)[:3]
                    if code == "550":  # no such file (or not a plain file)
                        return None
                    if code not in ("500", "502", "504"):
                        raise
                    self._no_size_command = True  # command not understood: list instead
            return self._size_from_listing(ftp, name)

    def _size_from_listing(self, ftp: ftplib.FTP, name: str) -> int | None:
        try:
            listing = list(ftp.mlsd("", facts=["size", "type"]))
            ftp.voidcmd("TYPE I")  # mlsd() left the session in ASCII mode
        except ftplib.error_perm as exc:
            if str(exc)[:3] in ("500", "502", "504"):
                raise PermanentError(
                    f"{self.display}: the server answers neither SIZE nor MLSD, so uploads cannot be "
                    "confirmed; set remote_keeps_files = false to trust its success replies alone",
                    kind="ftp", code="no_size",
                ) from None
            raise
        for entry, facts in listing:
            if entry == name and facts.get("type", "file") == "file" and "size" in facts:
                return int(facts["size"])
        return None

    # --- sending ---------------------------------------------------------------

    def send(self, local: Path, name: str) -> None:
        """STOR ``name`` (replacing a partial one) and wait for 226; :meth:`put` then checks the size.

        The kernel takes far more than the server has read (a whole file, on
        a fast link to a slow server), so the wait does not start at the last
        byte handed over: it lasts while the server keeps reading what is in
        flight (:func:`~tasks.transports.base.drain`), then allows for what
        its own buffer may still hold at the rate it was seen reading. A
        server that stops reading, or a reply that does not come even then,
        raises ReplyOverdue: every byte was handed over, so the file may still
        be arriving (docs/UPLOADS.md, "Never a second send"). While the file
        is handed over, ``timeout`` is the longest the server may take nothing
        (:func:`hand_over`), however long the whole transfer takes.
        """
        ftp = self._connected()
        size = local.stat().st_size
        with open(local, "rb") as src, ftp_errors(self.display, self._password):
            ftp.voidcmd("TYPE I")  # binary, every time: a listing switches ftplib to ASCII
            conn = ftp.transfercmd(f"STOR {name}")  # resets on close until the last byte is handed over
            started = time.monotonic()
            try:
                hand_over(conn, src, name, size, self.timeout, TransferProgress(self.display, name, size))
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _FIN_ON_CLOSE)  # every byte handed over
            except OSError as exc:
                conn.close()  # resets: the server sees an aborted transfer
                try:
                    ftp.voidresp()  # the server usually says why (426 no space, 452 ...): raise that
                except (OSError, EOFError):  # a stalled or vanished server says nothing: the send's own error
                    raise exc from None
                raise
            try:
                drained = drain(conn, size, self.timeout, answer=ftp.sock)
                wait = drained.reply_wait(self.timeout)
                conn.settimeout(wait)
                if isinstance(conn, ssl.SSLSocket):
                    conn.unwrap()  # close_notify: the end of the file, said in TLS
                conn.close()
                ftp.sock.settimeout(wait)
                ftp.voidresp()  # 226 Transfer complete (4xx/5xx raise)
            except TimeoutError as exc:
                self._ftp = None  # no QUIT: the server answers nothing before the transfer's own reply
                _quietly_close(ftp)
                raise ReplyOverdue(say(self.display, f"every byte of {name} was handed over, but no reply came "
                                                     f"in time ({exc}); the file may still be arriving",
                                       self._password),
                                   started=started) from None
            finally:
                conn.close()
                if self._ftp is not None:
                    ftp.sock.settimeout(self.timeout)

    def remove(self, name: str) -> None:
        with ftp_errors(self.display, self._password):
            self._connected().delete(name)

    def _connected(self) -> ftplib.FTP:
        if self._ftp is None:
            self.connect()
        assert self._ftp is not None
        return self._ftp


def hand_over(conn: socket.socket, src: BinaryIO, name: str, size: int, timeout: float,
              moved: Callable[[int], None]) -> None:
    """Write ``src`` (``size`` bytes) to the data connection ``conn``, telling ``moved`` the bytes handed over.

    ``timeout`` bounds the server's silence, not a block's transfer: a
    ``sendall`` under a socket timeout must move its whole 64 KiB block
    within it (below 64 KiB / 30 s ≈ 2.2 KB/s a live transfer failed).
    Here each ``send`` that the kernel takes bytes from, and each byte the
    server acknowledges meanwhile (``SIOCOUTQ`` falling, read while the
    send waits), starts the clock again; TimeoutError once nothing moved
    for ``timeout`` seconds. A TLS send that times out part-way is retried
    with the same bytes, as OpenSSL requires.
    """
    conn.settimeout(min(_POLL_S, timeout / 4))
    sent = acknowledged = 0
    last_move = time.monotonic()
    while chunk := src.read(_BLOCK):
        view = memoryview(chunk)
        while view:
            try:
                n = conn.send(view)
            except TimeoutError:
                n = 0
            now = time.monotonic()
            if n:
                sent, view, last_move = sent + n, view[n:], now
                moved(sent)
                continue
            held = unacknowledged(conn)
            if held is not None and sent - held > acknowledged:
                acknowledged, last_move = sent - held, now
            elif now - last_move >= timeout:
                raise TimeoutError(f"the server took nothing of {name} for {timeout:g} s "
                                   f"({sent:,} of {size:,} bytes handed over)")
    conn.settimeout(timeout)


def _quietly_close(ftp: ftplib.FTP) -> None:
    try:
        ftp.close()
    except Exception:
        pass
