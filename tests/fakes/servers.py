"""Real FTP, FTPS and SFTP servers on 127.0.0.1 for the upload tests.

- :class:`FtpServer`: pyftpdlib's ``ThreadedFTPServer``; FTPS with a
  self-signed certificate made here with ``cryptography``.
- :class:`SftpServer`: paramiko's server side (``ServerInterface`` +
  ``SFTPServerInterface``) over a real socket, with a host key made here.

Both write into a real folder, record what they received in a
:class:`ServerLog` (the server's own "file received" events), and suffer the
faults set in their :class:`Faults`: replies instead of accepting a file
(421, 452), a connection dropped mid-transfer, a full disk, a slow or stalled
server, a wrong password.

The FTP server behaves like vsftpd where pyftpdlib differs: a *reset* data
connection is an aborted upload (pyftpdlib takes it for the end of the file),
and an upload in flight ends by its own data connection, not when the control
connection goes away (pyftpdlib aborts it then).
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import ipaddress
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.filesystems import AbstractedFS
from pyftpdlib.handlers import DTPHandler, FTPHandler, TLS_DTPHandler, TLS_FTPHandler
from pyftpdlib.ioloop import _ERRNOS_DISCONNECTED, _ERRNOS_RETRY, IOLoop, _RetryError
from pyftpdlib.servers import ThreadedFTPServer

USER = "alice"
PASSWORD = "pässword-42"  # non-ASCII on purpose

_log = logging.getLogger("pyftpdlib")
_log.addHandler(logging.NullHandler())  # pyftpdlib configures root logging when nothing is set up
_log.propagate = False
logging.getLogger("paramiko").setLevel(logging.CRITICAL)


# --- what the server saw -------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """One "file received" event: the file as it was on the server's disk at that moment."""

    name: str
    size: int
    sha256: str
    complete: bool  # False: the server saw the upload aborted


class ServerLog:
    """Thread-safe list of the server's receive events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Received] = []
        self.stor_commands = 0
        #: Connections accepted, and passwords received (FTP PASS, SSH password auth).
        self.connections = 0
        self.passwords = 0

    def add(self, path: str | Path, complete: bool) -> None:
        p = Path(path)
        digest, size = hashlib.sha256(), 0
        if p.exists():  # streamed: a clip of hundreds of MB is never held whole
            with open(p, "rb") as fh:
                while block := fh.read(1 << 20):
                    digest.update(block)
                    size += len(block)
        with self._lock:
            self.events.append(Received(p.name, size, digest.hexdigest(), complete))

    def received(self, name: str | None = None) -> list[Received]:
        """Completed receive events (of ``name``, when given)."""
        with self._lock:
            return [e for e in self.events if e.complete and (name is None or e.name == name)]

    def aborted(self) -> list[Received]:
        with self._lock:
            return [e for e in self.events if not e.complete]


@dataclass
class Faults:
    """Faults the next transfers suffer; one-shot lists are consumed as they fire."""

    #: Replies sent instead of accepting the next STOR / SFTP open (e.g. "421 ...", "452 ...").
    refuse_next: list[str] = field(default_factory=list)
    #: Drop the whole connection once the next uploads pass these many bytes (one entry per upload).
    drop_after: list[int] = field(default_factory=list)
    #: Bytes the disk can still take; writes past it fail with ENOSPC.
    disk_free: int | None = None
    #: What the FTP server replies when a write fails for a full disk (pyftpdlib: "426 ...; transfer
    #: aborted."; vsftpd: "451 Failure writing to local file.").
    disk_full_reply: str | None = None
    #: Stop reading the next FTP uploads, connection left open, once they pass these many bytes (one
    #: entry per upload): a transfer that died in flight. They resume when the server stops.
    hang_after: list[int] = field(default_factory=list)
    #: Bytes per second the data channel reads at (None: as fast as it can).
    rate: float | None = None
    #: The FTP server holds what it reads and writes it to disk in blocks of this size, as vsftpd
    #: does (64 KiB): at a low rate, the file on disk grows in bursts seconds apart.
    write_block: int | None = None
    #: The port the FTP server advertises in its PASV reply instead of the one it listens on (a
    #: firewall, NAT or wrong passive setting between client and server: unreachable).
    passive_port: int | None = None
    #: SO_RCVBUF of the FTP server's data connections (None: the kernel's default): a large one
    #: lets the client hand over a whole file long before the server has read it.
    receive_buffer: int | None = None
    #: Seconds the server sits on an upload request before answering.
    stall_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pop(self, which: str):
        with self.lock:
            queue = getattr(self, which)
            return queue.pop(0) if queue else None

    def take_disk(self, n: int) -> bool:
        """Reserve ``n`` bytes of disk; False when the disk is full."""
        with self.lock:
            if self.disk_free is None:
                return True
            if n > self.disk_free:
                self.disk_free = 0
                return False
            self.disk_free -= n
            return True


# --- certificates and keys -----------------------------------------------------------


def make_self_signed_cert(folder: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 + its key, in one PEM file (also usable as a CA file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = folder / "ftps-cert.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    return pem


def write_client_key(path: Path, passphrase: str | None = None) -> paramiko.PKey:
    """An ECDSA key pair for SSH key auth; the private key in OpenSSH PEM at ``path``."""
    key = paramiko.ECDSAKey.generate()
    key.write_private_key_file(str(path), password=passphrase)
    return key


# --- FTP / FTPS ------------------------------------------------------------------------


class _QuotaFile:
    """A file object whose writes fail with ENOSPC once the server's disk is 'full', and that
    reaches the disk in ``write_block`` bursts when the faults ask for them."""

    def __init__(self, fh, faults: Faults) -> None:
        self._fh, self._faults = fh, faults
        self._held = b""

    def write(self, data: bytes) -> int:
        if not self._faults.take_disk(len(data)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        block = self._faults.write_block
        if block is None:
            return self._fh.write(data)
        self._held += data
        while len(self._held) >= block:
            self._fh.write(self._held[:block])
            self._fh.flush()
            self._held = self._held[block:]
        return len(data)

    def close(self) -> None:
        if self._held:
            self._fh.write(self._held)
            self._held = b""
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


class _FaultyFS(AbstractedFS):
    def open(self, filename, mode):
        fh = super().open(filename, mode)
        return _QuotaFile(fh, self.cmd_channel.ctl.faults) if "w" in mode else fh


class _FaultsOnData:
    """Data-channel behaviour shared by FTP and FTPS: slow reads, drops, a large receive buffer."""

    def __init__(self, sock, cmd_channel):
        size = cmd_channel.ctl.faults.receive_buffer
        if size:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
        super().__init__(sock, cmd_channel)

    def recv(self, buffer_size):
        chunk = self._recv_chunk(buffer_size)
        if chunk:
            ctl = self.cmd_channel.ctl
            limit = ctl.current_drop
            if limit is not None and self.tot_bytes_received + len(chunk) >= limit:
                ctl.current_drop = None
                self.cmd_channel.close()  # the server goes away mid-transfer: both connections die
                self.close()
                return b""
            hang = ctl.current_hang
            if hang is not None and self.tot_bytes_received + len(chunk) >= hang:
                ctl.current_hang = None
                ctl.stopping.wait()
            if ctl.faults.rate:
                time.sleep(len(chunk) / ctl.faults.rate)
        return chunk


    def handle_error(self):
        reply = self.cmd_channel.ctl.faults.disk_full_reply
        if reply is None or self.cmd_channel.ctl.faults.disk_free != 0:
            return super().handle_error()
        self._resp = (reply, _log.debug)
        self.close()


class _PlainDTP(_FaultsOnData, DTPHandler):
    ac_in_buffer_size = 16384

    def _recv_chunk(self, buffer_size):
        try:
            chunk = self.socket.recv(buffer_size)
        except OSError as err:
            if err.errno == errno.ECONNRESET:  # the client aborted: not the end of the file
                self._resp = ("426 Connection reset by peer; transfer aborted.", _log.debug)
                self.close()
                return b""
            if err.errno in _ERRNOS_DISCONNECTED:
                self.handle_close()
                return b""
            if err.errno in _ERRNOS_RETRY:
                raise _RetryError from err
            raise
        if not chunk:
            self.handle_close()
        return chunk


class _TlsDTP(_FaultsOnData, TLS_DTPHandler):
    ac_in_buffer_size = 16384

    def _recv_chunk(self, buffer_size):
        return TLS_DTPHandler.recv(self, buffer_size)


class _FaultyCommands:
    """Control-channel behaviour shared by FTP and FTPS: refusals, stalls, events."""

    auth_failed_timeout = 0  # pyftpdlib waits 3 s after a wrong password by default
    abstracted_fs = _FaultyFS

    def ftp_STOR(self, file, mode="w"):
        ctl = self.ctl
        ctl.log.stor_commands += 1
        if ctl.faults.stall_s:
            time.sleep(ctl.faults.stall_s)
        reply = ctl.faults.pop("refuse_next")
        if reply:
            self.respond(reply)
            if reply.startswith("421"):
                self.close_when_done()
            return None
        ctl.current_drop = ctl.faults.pop("drop_after")
        ctl.current_hang = ctl.faults.pop("hang_after")
        return super().ftp_STOR(file, mode)

    def close(self):
        """Like vsftpd, an upload in flight ends on its own terms — end of file or reset —
        not when the control connection goes (pyftpdlib alone aborts it then)."""
        dtp = self.data_channel
        if not self._closed and dtp is not None and dtp.receive and not dtp._closed:
            self.data_channel = None
        super().close()

    def respond(self, resp, logfun=_log.debug):
        port = self.ctl.faults.passive_port
        if port is not None and resp.startswith("227"):
            address = resp[resp.index("(") + 1:resp.index(")")].split(",")[:4]
            resp = f"227 Entering passive mode ({','.join(address)},{port // 256},{port % 256})."
        if not self._closed:
            super().respond(resp, logfun)

    def _on_dtp_close(self):
        if self._closed:
            self.data_channel = None
        else:
            super()._on_dtp_close()

    def on_connect(self):
        self.ctl.log.connections += 1

    def ftp_PASS(self, line):
        self.ctl.log.passwords += 1
        return super().ftp_PASS(line)

    def on_file_received(self, file):
        self.ctl.log.add(file, complete=True)

    def on_incomplete_file_received(self, file):
        self.ctl.log.add(file, complete=False)


class FtpServer:
    """A pyftpdlib server on 127.0.0.1 serving ``root`` to USER/PASSWORD; FTPS when given a cert."""

    def __init__(self, root: Path, certfile: Path | None = None, user: str = USER, password: str = PASSWORD) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.certfile = certfile
        self.user, self.password = user, password
        self.log = ServerLog()
        self.faults = Faults()
        self.current_drop: int | None = None
        self.current_hang: int | None = None
        self.stopping = threading.Event()
        authorizer = DummyAuthorizer()
        authorizer.add_user(user, password, str(root), perm="elradfmwMT")
        if certfile:
            handler = type("Handler", (_FaultyCommands, TLS_FTPHandler), {
                "ctl": self, "authorizer": authorizer, "dtp_handler": _TlsDTP, "certfile": str(certfile),
                "tls_control_required": True, "tls_data_required": True,
            })
        else:
            handler = type("Handler", (_FaultyCommands, FTPHandler), {
                "ctl": self, "authorizer": authorizer, "dtp_handler": _PlainDTP,
            })
        # its own IO loop: pyftpdlib's default is one per process, and two servers would share it
        self._server = ThreadedFTPServer(("127.0.0.1", 0), handler, ioloop=IOLoop())
        self.port = self._server.address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"timeout": 0.2, "handle_exit": False},
                                        daemon=True, name=f"ftp-{self.port}")

    @property
    def scheme(self) -> str:
        return "ftps" if self.certfile else "ftp"

    def url(self, folder: str = "") -> str:
        return f"{self.scheme}://{self.user}@127.0.0.1:{self.port}/{folder}"

    def file(self, name: str) -> Path:
        return self.root / name

    def start(self) -> "FtpServer":
        self._thread.start()
        return self

    def use_certificate(self, certfile: Path) -> None:
        """Present ``certfile`` from the next connection on (a swapped, or impostor, server)."""
        handler = self._server.handler
        handler.certfile = handler.keyfile = str(certfile)  # the key is in the same PEM file
        handler.ssl_context = None  # pyftpdlib builds its context again

    def stop(self) -> None:
        self.stopping.set()  # hung transfers go on and end
        self._server.close_all()
        self._thread.join(5)


# --- SFTP --------------------------------------------------------------------------


class _SftpHandle(paramiko.SFTPHandle):
    def __init__(self, ctl: "SftpServer", path: Path, fh, flags: int, writing: bool) -> None:
        super().__init__(flags)
        self.ctl, self.path, self.writing = ctl, path, writing
        self.writefile = self.readfile = fh
        self.written = 0
        #: Set when the session ended with the file still open (the client went away).
        self.aborted = False

    def write(self, offset, data):
        ctl = self.ctl
        if self.aborted:  # the connection was dropped: requests still buffered go nowhere
            return paramiko.sftp.SFTP_FAILURE
        if ctl.faults.rate:
            time.sleep(len(data) / ctl.faults.rate)
        if ctl.current_drop is not None and self.written + len(data) >= ctl.current_drop:
            ctl.current_drop = None
            self.aborted = True
            ctl.drop_all()
            return paramiko.sftp.SFTP_FAILURE
        if not ctl.faults.take_disk(len(data)):
            return paramiko.sftp.SFTP_FAILURE  # SFTP v3 has no "disk full": a plain failure
        self.written += len(data)
        return super().write(offset, data)

    def stat(self):
        return paramiko.SFTPAttributes.from_stat(os.fstat(self.writefile.fileno()))

    def close(self):
        super().close()
        if self.writing:
            self.ctl.log.add(self.path, complete=not self.aborted)
            self.writing = False


class _SftpFiles(paramiko.SFTPServerInterface):
    """The server's folder, as SFTP sees it (paths are relative to ``root``)."""

    def __init__(self, server, *args, ctl: "SftpServer", **kwargs) -> None:
        super().__init__(server, *args, **kwargs)
        self.ctl = ctl
        self.handles: list[_SftpHandle] = []

    def session_ended(self):
        # paramiko closes the handles left open right after this: those uploads were cut short
        for handle in self.handles:
            handle.aborted = True

    def _local(self, path: str) -> Path:
        return self.ctl.root / self.canonicalize(path).lstrip("/")

    def open(self, path, flags, attr):
        ctl = self.ctl
        if flags & (os.O_WRONLY | os.O_RDWR):
            ctl.log.stor_commands += 1
            if ctl.faults.stall_s:
                time.sleep(ctl.faults.stall_s)
            if ctl.faults.pop("refuse_next"):
                return paramiko.sftp.SFTP_FAILURE
            ctl.current_drop = ctl.faults.pop("drop_after")
        local = self._local(path)
        mode = "wb" if flags & os.O_TRUNC or not local.exists() else "r+b"
        if not flags & (os.O_WRONLY | os.O_RDWR):
            mode = "rb"
        try:
            fh = open(local, mode)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        handle = _SftpHandle(ctl, local, fh, flags, writing=mode != "rb")
        self.handles.append(handle)
        return handle

    def stat(self, path):
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(self._local(path)))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    lstat = stat

    def list_folder(self, path):
        folder = self._local(path)
        try:
            return [paramiko.SFTPAttributes.from_stat(os.stat(p), p.name) for p in folder.iterdir()]
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def remove(self, path):
        try:
            self._local(path).unlink()
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        return paramiko.sftp.SFTP_OK


class _SftpSubsystem(paramiko.SFTPServer):
    """paramiko's SFTP server, closing the files a client left open even when the client is gone. paramiko's
    ``finish_subsystem`` closes the channel before the files, a close sent to a peer already dead raises EOFError,
    and its handler thread swallows it: the killed uploader's file was never closed, so its aborted upload was
    never logged (test_upload_large's SFTP kill: about one run in four here, 2026-12-05)."""

    def finish_subsystem(self):
        try:
            super().finish_subsystem()
        except (EOFError, OSError):
            for f in (*self.file_table.values(), *self.folder_table.values()):
                f.close()
            self.file_table, self.folder_table = {}, {}


class _SftpAuth(paramiko.ServerInterface):
    def __init__(self, ctl: "SftpServer") -> None:
        self.ctl = ctl

    def get_allowed_auths(self, username):
        return "password,publickey"

    def check_auth_password(self, username, password):
        self.ctl.log.passwords += 1
        ok = username == self.ctl.user and password == self.ctl.password
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_auth_publickey(self, username, key):
        ok = username == self.ctl.user and self.ctl.client_key is not None and key == self.ctl.client_key
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


class SftpServer:
    """An SFTP server on 127.0.0.1 serving ``root``; password USER/PASSWORD or ``client_key``."""

    def __init__(self, root: Path, user: str = USER, password: str = PASSWORD,
                 client_key: paramiko.PKey | None = None) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.user, self.password, self.client_key = user, password, client_key
        self.host_key = paramiko.ECDSAKey.generate()
        self.log = ServerLog()
        self.faults = Faults()
        self.current_drop: int | None = None
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._transports: list[paramiko.Transport] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"sftp-{self.port}")

    def url(self, folder: str = "") -> str:
        return f"sftp://{self.user}@127.0.0.1:{self.port}/{folder}"

    def file(self, name: str) -> Path:
        return self.root / name

    def known_hosts_line(self, key: paramiko.PKey | None = None) -> str:
        key = key or self.host_key
        return f"[127.0.0.1]:{self.port} {key.get_name()} {key.get_base64()}\n"

    def start(self) -> "SftpServer":
        self._thread.start()
        return self

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self.log.connections += 1
            t = paramiko.Transport(conn)
            t.add_server_key(self.host_key)
            t.set_subsystem_handler("sftp", _SftpSubsystem, _SftpFiles, ctl=self)
            self._transports.append(t)
            try:
                t.start_server(server=_SftpAuth(self))
            except (paramiko.SSHException, EOFError, OSError):
                t.close()

    def drop_all(self) -> None:
        """Cut every open connection, as a server crash would."""
        for t in list(self._transports):
            t.close()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self._sock.close()
        for t in list(self._transports):
            t.close()


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture
def ftp_server(tmp_path):
    server = FtpServer(tmp_path / "ftp-root").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ftps_cert(tmp_path_factory) -> Path:
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def ftps_server(tmp_path, ftps_cert):
    server = FtpServer(tmp_path / "ftps-root", certfile=ftps_cert).start()
    yield server
    server.stop()


@pytest.fixture
def sftp_server(tmp_path):
    server = SftpServer(tmp_path / "sftp-root").start()
    yield server
    server.stop()


@pytest.fixture
def known_hosts(tmp_path, sftp_server) -> Path:
    """A known_hosts file that knows the test SFTP server."""
    path = tmp_path / "known_hosts"
    path.write_text(sftp_server.known_hosts_line())
    return path
