"""From an agency's ``target`` setting to a (not yet connected) transport.

Target URLs (INTERFACE.md)::

    (empty)                          <workdir>/outbox/<agency>/
    file:///absolute/path            a local folder
    ftp://user@host:port/dir         FTP, passive, binary
    ftps://user@host:port/dir        FTP with explicit TLS (AUTH TLS, PROT P)
    sftp://user@host:port/dir        SFTP (SSH)

The port defaults to 21 (FTP/FTPS) or 22 (SFTP). ``dir`` is relative to the
folder the login lands in (RFC 1738); ``/`` or nothing means that folder
itself, and ``%2F`` starts an absolute path (``ftp://u@h/%2Fincoming``).
Passwords never go in the URL: they come from ``MICROSTOCK_<AGENCY>_PASSWORD``
or the Prefect Secret block ``microstock-<agency>-password`` (tasks.core.secrets),
and are looked up only for a protocol that needs one.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tasks.core.errors import ConfigError
from tasks.core.ownership import check_ours
from tasks.core.secrets import agency_password, password_block_name, password_env_var
from tasks.core.settings import AgencySettings, Settings
from tasks.core.workdir import Workdir
from tasks.transports.base import Transport, remote_display
from tasks.transports.ftp import FtpTarget
from tasks.transports.local import LocalFolder
from tasks.transports.pins import CertificatePins

_PORTS = {"ftp": 21, "ftps": 21, "sftp": 22}
#: The FTPS certificates pinned on first use (``trust_unknown_host``), in the workdir.
_PINS_FILE = "ftps_known_certs"


@dataclass(frozen=True)
class Target:
    """A parsed target URL (never holds a password)."""

    scheme: str  # "file", "ftp", "ftps" or "sftp"
    host: str = ""
    port: int = 0
    user: str = ""
    #: Local folder for "file"; remote folder relative to the login folder otherwise.
    path: str = ""


def parse_target(agency: str, url: str) -> Target:
    """Parse ``url``; ConfigError naming the agency and the problem when it is unusable."""
    where = f"agencies.{agency}.target"
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: not a usable URL ({exc})") from None
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: unexpected '?' or '#' part in the URL")
    if parts.password is not None:
        raise ConfigError(f"{where}: do not put the password in the URL; "
                          f"set {password_env_var(agency)} or the Prefect Secret block instead")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{where}: a file:// target is a local folder (file:///path)")
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise ConfigError(f"{where}: a file:// target needs an absolute path (file:///path)")
        return Target("file", path=path)
    if scheme not in _PORTS:
        raise ConfigError(f"{where}: unsupported scheme {scheme or '(none)'!r} "
                          "(use file://, ftp://, ftps:// or sftp://)")
    if not parts.hostname:
        raise ConfigError(f"{where}: no host in {scheme}:// URL")
    folder = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path).rstrip("/")
    if "/" + folder == "/":
        folder = ""
    return Target(scheme, parts.hostname, port or _PORTS[scheme], unquote(parts.username or ""), folder)


def check_targets(settings: Settings, agencies: list[str], workdir: Workdir) -> None:
    """ConfigError naming the first of ``agencies`` whose target URL is unusable, or whose local folder (a
    ``file://`` target, else the workdir's outbox) or FTPS trust (its ``ca_file``, the workdir's pinned
    certificates) another user could change: whoever can, chooses the server the password goes to (before
    anything runs)."""
    for agency in agencies:
        agency_settings = settings.agency(agency)
        parsed = parse_target(agency, agency_settings.target) if agency_settings.target.strip() else None
        if parsed is None or parsed.scheme == "file":
            folder = Path(parsed.path) if parsed else workdir.outbox(agency)
            check_ours(folder, f"{agency}'s target folder", sends="your files")
        elif parsed.scheme == "ftps" and agency_settings.ca_file:
            check_ours(Path(os.path.expanduser(agency_settings.ca_file)), f"agencies.{agency}.ca_file")
        elif parsed.scheme == "ftps" and agency_settings.trust_unknown_host:
            check_ours(workdir.root / _PINS_FILE, "the pinned FTPS certificates")


def target_display(agency: str, settings: AgencySettings, workdir: Workdir) -> str:
    """Where ``agency``'s files go, as its transport shows it — without connecting or asking for a password."""
    if not settings.target.strip():
        return LocalFolder(workdir.outbox(agency)).display
    target = parse_target(agency, settings.target)
    if target.scheme == "file":
        return LocalFolder(Path(target.path)).display
    return remote_display(target.scheme, target.user, target.host, target.port, target.path)


def open_transport(agency: str, settings: AgencySettings, workdir: Workdir) -> Transport:
    """The transport for ``agency`` as configured (not connected yet: use it as a context manager)."""
    if not settings.target.strip():
        return LocalFolder(workdir.outbox(agency))
    target = parse_target(agency, settings.target)
    if target.scheme == "file":
        return LocalFolder(Path(target.path))
    if target.scheme == "sftp":
        from tasks.transports.sftp import SftpTarget  # paramiko (≈ 0.2 s to import) only for an SFTP target

        # With a key file the password is only the key's passphrase: the environment may give one,
        # but no Prefect API call is made for it.
        password = _required_password(agency) if not settings.key_file else _env_password(agency)
        return SftpTarget(
            target.host, target.port, target.user, password, target.path,
            key_file=settings.key_file, trust_unknown_host=settings.trust_unknown_host,
            timeout=settings.timeout_s, keeps_files=settings.remote_keeps_files,
        )
    context, pins = None, None
    if target.scheme == "ftps" and settings.ca_file:
        context = _trusting(agency, settings.ca_file)
    elif target.scheme == "ftps" and settings.trust_unknown_host:
        pins = CertificatePins(workdir.root / _PINS_FILE)
    return FtpTarget(
        target.host, target.port, target.user, _required_password(agency), target.path,
        tls=target.scheme == "ftps", timeout=settings.timeout_s, ssl_context=context, pins=pins,
        keeps_files=settings.remote_keeps_files,
    )


def _trusting(agency: str, ca_file: str) -> ssl.SSLContext:
    """A TLS context that trusts exactly the certificates in ``ca_file`` (ConfigError when unusable)."""
    path = os.path.expanduser(ca_file)
    try:
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"agencies.{agency}.ca_file: {path} cannot be used as a PEM certificate file "
                          f"({getattr(exc, 'strerror', None) or exc})") from None


def _required_password(agency: str) -> str:
    """The agency's password; ConfigError ``config:password``, before any connection, when there is none
    (an empty one would be sent, and counted by the server as a failed login)."""
    password = agency_password(agency)
    if not password:
        raise ConfigError(f"{agency}: no password set — set {password_env_var(agency)} or the Prefect Secret "
                          f"block {password_block_name(agency)} (`microstock secrets set "
                          f"{password_block_name(agency)}`)", code="password")
    return password


def _env_password(agency: str) -> str | None:
    return os.environ.get(password_env_var(agency)) or None
