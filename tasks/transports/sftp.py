"""``sftp://`` targets with paramiko (Adobe Stock's upload protocol).

Host keys are checked against known_hosts (``~/.ssh/known_hosts`` by
default) before the password or key is offered. An unknown host is refused
unless the agency is set to ``trust_unknown_host``: then its key is accepted
once and appended to known_hosts, so later runs check it (ssh's
``StrictHostKeyChecking=accept-new``). A *changed* key is always refused.

Authentication is by key file (``key_file``; the agency password, if any,
is its passphrase and is never sent to the server) or by password. Agent and ``~/.ssh/id_*`` keys are not tried: what is
used is what the settings say.

Files are written under their final name (see docs/UPLOADS.md for why not a
temporary one); every write is acknowledged by the server, and the size is
checked with ``stat`` after the file is closed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import paramiko
from paramiko.ssh_exception import NoValidConnectionsError

from tasks.core.errors import (
    NETWORK,
    AuthenticationFailed,
    MicrostockError,
    PermanentError,
    StageStopped,
    TransientError,
)
from tasks.transports.base import REFUSED_ERRNOS, Transport, network_errors, remote_display, say
from tasks.transports.progress import TransferProgress

_BLOCK = 32 * 1024  # one SFTP write request
logger = logging.getLogger("microstock.transports")


class _UnknownHost(paramiko.SSHException):
    """Raised by the host-key policy inside paramiko; :func:`sftp_errors` makes it ``host_key``."""


@contextmanager
def sftp_errors(where: str, secret: str | None = None, alive: Callable[[], bool] | None = None,
                changed_hint: str = "remove its old line from known_hosts") -> Iterator[None]:
    """Turn paramiko's errors into :mod:`tasks.core.errors` classes (on top of
    :func:`~tasks.transports.base.network_errors`).

    ``alive`` tells whether the connection still stands: paramiko raises a
    bare OSError both for an SFTP "failure" status and for a closed socket.

    - authentication refused → AuthenticationFailed ``auth:ssh``
    - unknown or changed host key → StageStopped ``host_key``
    - SFTP "no such file", "permission denied", "failure" → PermanentError ``sftp`` (``refused``)
    - SSH breakage, no connection → TransientError ``network``
    """
    with network_errors(where, secret):
        try:
            yield
        except MicrostockError:
            raise
        except paramiko.AuthenticationException as exc:
            raise AuthenticationFailed(say(where, f"login refused ({type(exc).__name__}: {exc})", secret),
                                       code="ssh") from None
        except paramiko.BadHostKeyException as exc:
            raise StageStopped(say(where, f"the server's host key has CHANGED (got {exc.key.get_name()} "
                                          f"{exc.key.fingerprint}); refusing to connect — if the change is "
                                          f"expected, {changed_hint}", secret), kind="host_key") from None
        except _UnknownHost as exc:
            raise StageStopped(say(where, str(exc), secret), kind="host_key") from None
        except NoValidConnectionsError as exc:
            raise TransientError(say(where, f"connection failed ({exc.strerror})", secret), kind=NETWORK) from None
        except paramiko.SSHException as exc:
            raise TransientError(say(where, f"connection lost ({type(exc).__name__}: {str(exc) or 'closed'})",
                                     secret), kind=NETWORK) from None
        except OSError as exc:
            if isinstance(exc, TimeoutError):  # a stalled server, not a refusal: network_errors says so
                raise
            if exc.errno in REFUSED_ERRNOS or (exc.errno is None and alive is not None and alive()):
                raise PermanentError(say(where, f"refused ({exc.strerror or exc})", secret), kind="sftp",
                                     refused=True) from None
            raise


def default_known_hosts() -> Path:
    return Path(os.path.expanduser("~/.ssh/known_hosts"))


def host_pattern(host: str, port: int) -> str:
    """The host as known_hosts and ssh-keygen name it: ``host`` on port 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path, port: int) -> None:
        self.known_hosts, self.port = known_hosts, port

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        host = hostname[1:].split("]")[0] if hostname.startswith("[") else hostname
        raise _UnknownHost(
            f"host {hostname} is not in {self.known_hosts} (its {key.get_name()} key is {key.fingerprint}); "
            f"check that fingerprint with the agency, then add it with `ssh-keyscan -p {self.port} {host} >> "
            f"{self.known_hosts}` — or set trust_unknown_host = true to accept it on first use"
        )


_known_hosts_lock = threading.Lock()  # parallel_files connections of one process; fcntl covers other processes


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Trust on first use: accept an unknown host, remember its key in known_hosts (once), log it (once)."""

    def __init__(self, known_hosts: Path, port: int) -> None:
        self.known_hosts, self.port = known_hosts, port

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}"
        with _known_hosts_lock:
            self.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.known_hosts, "a+", encoding="ascii") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.seek(0)
                if line not in fh.read().splitlines():  # another connection of this run accepted it already
                    fh.write(line + "\n")
                    fh.flush()
                    logger.warning("accepted the host key of %s on first use (%s %s); added to %s",
                                   hostname, key.get_name(), key.fingerprint, self.known_hosts)
        client.get_host_keys().add(hostname, key.get_name(), key)


class SftpTarget(Transport):
    """One SSH connection with one SFTP session, reused for every file of the run."""

    def __init__(
        self,
        host: str,
        port: int = 22,
        user: str = "",
        password: str | None = None,
        folder: str = "",
        *,
        key_file: str = "",
        trust_unknown_host: bool = False,
        known_hosts: Path | None = None,
        timeout: float = 30.0,
        keeps_files: bool = True,
    ) -> None:
        self.host, self.port, self.user, self.folder = host, port, user, folder
        self.key_file, self.trust_unknown_host, self.timeout = key_file, trust_unknown_host, timeout
        self.known_hosts = known_hosts or default_known_hosts()
        self._password = password
        self.can_list = keeps_files
        self.display = remote_display("sftp", user, host, port, folder)
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None

    def connect(self) -> None:
        """Check the host key, log in with the key or password, open SFTP, change to the folder."""
        self.close()
        key = self._load_key() if self.key_file else None
        client = paramiko.SSHClient()
        forget = f'run `ssh-keygen -R "{host_pattern(self.host, self.port)}" -f {self.known_hosts}`, then connect again'
        with sftp_errors(self.display, self._password, self._alive, changed_hint=forget):
            try:
                if self.known_hosts.exists():
                    client.load_host_keys(str(self.known_hosts))
                policy = _AcceptNew if self.trust_unknown_host else _RefuseUnknown
                client.set_missing_host_key_policy(policy(self.known_hosts, self.port))
                client.connect(
                    self.host, self.port, username=self.user or None,
                    # with a key, the password is its passphrase: never sent to the server
                    pkey=key, password=None if key else self._password,
                    timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout,
                    channel_timeout=self.timeout, allow_agent=False, look_for_keys=False,
                )
                sftp = client.open_sftp()
                sftp.get_channel().settimeout(self.timeout)
                if self.folder:
                    sftp.chdir(self.folder)
            except BaseException:
                client.close()
                raise
        self._client, self._sftp = client, sftp

    @property
    def connected(self) -> bool:
        return self._sftp is not None

    def _alive(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return bool(transport and transport.is_active())

    def _load_key(self) -> paramiko.PKey:
        path = os.path.expanduser(self.key_file)
        try:
            return paramiko.PKey.from_path(path, self._password.encode() if self._password else None)
        except OSError as exc:
            raise StageStopped(f"{self.display}: key_file {path} cannot be read ({exc.strerror or exc})",
                               kind="key_file") from None
        except (paramiko.SSHException, ValueError) as exc:  # wrong or missing passphrase, unknown key type
            raise AuthenticationFailed(f"{self.display}: key_file {path} cannot be used ({type(exc).__name__}); "
                                       "an encrypted key's passphrase is the agency password", code="key") from None

    def close(self) -> None:
        sftp, client = self._sftp, self._client
        self._sftp = self._client = None
        for thing in (sftp, client):
            if thing is not None:
                try:
                    thing.close()
                except Exception:
                    pass

    def remote_size(self, name: str) -> int | None:
        if not self.can_list:
            return None
        sftp = self._connected()
        with sftp_errors(self.display, self._password, self._alive):
            try:
                return sftp.stat(name).st_size
            except FileNotFoundError:
                return None

    def send(self, local: Path, name: str) -> None:
        """Write ``name`` (truncating a partial one) and close it; :meth:`put` then checks the size with stat.

        ``timeout`` is the server's silence, not the transfer's length:
        paramiko's channel timeout bounds each wait for the server to open
        its window (take more bytes) or to send the next acknowledgement, so
        a clip on a slow link goes on as long as the server keeps taking it.
        """
        sftp = self._connected()
        size, sent = local.stat().st_size, 0
        progress = TransferProgress(self.display, name, size)
        with open(local, "rb") as src, sftp_errors(self.display, self._password, self._alive):
            try:
                with sftp.open(name, "wb") as remote:
                    remote.set_pipelined(True)  # one round trip per file, not per write
                    while chunk := src.read(_BLOCK):
                        remote.write(chunk)
                        sent += len(chunk)
                        progress(sent)
                    # Wait here for every write's acknowledgement: paramiko's close does not wait for
                    # them itself, and swallows a timeout in its own wait (the stall then surfaced
                    # later, as a bare "timed out" from the size check).
                    _after_every_write(remote)
            except TimeoutError:
                raise TimeoutError(f"the server took nothing of {name} for {self.timeout:g} s "
                                   f"({sent:,} of {size:,} bytes handed over)") from None

    def remove(self, name: str) -> None:
        with sftp_errors(self.display, self._password, self._alive):
            self._connected().remove(name)

    def _connected(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self.connect()
        assert self._sftp is not None
        return self._sftp


def _after_every_write(remote: paramiko.SFTPFile) -> None:
    """Return once the server answered every write sent on ``remote``: it answers in order, so the answer to
    an ``fstat`` sent after them comes after theirs. An upload-only server may refuse the ``fstat`` itself;
    its refusal is an answer too (the size is checked after the close, where the server can be listed)."""
    try:
        remote.stat()
    except TimeoutError:
        raise
    except OSError as exc:
        if exc.errno not in (None, *REFUSED_ERRNOS):  # not an SFTP status: the connection itself broke
            raise
