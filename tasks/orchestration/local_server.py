"""A local Prefect server as a child process: SQLite, loopback only.

:class:`LocalServer` starts Prefect's own server (what ``prefect server start`` runs in the foreground, on a
socket of the project's: :mod:`server_launch`) with its
output on ``<home>/server.log``, waits until ``/api/health`` answers, and
stops it (SIGTERM, then SIGKILL after a grace period) when the ``with`` block
ends or its parent dies. The workdir's server (:mod:`workdir_server`) is one
run by a keeper; tests and benchmarks use it directly. Why not
``prefect server start --background``: docs/ARCHITECTURE.md, Workarounds.

Nothing here imports Prefect: the server's address must be in the
environment before Prefect is imported by the serving process.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.orchestration.prefect_settings import pin
from tasks.orchestration.server_proof import ask

DEFAULT_PORT = 4200
HOST = "127.0.0.1"


def port_in_use(port: int, host: str = HOST) -> bool:
    """True when something already accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_port(host: str = HOST) -> int:
    """A port nothing listens on right now (the cluster's PostgreSQL and server ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def new_auth_string() -> str:
    """A new ``user:password`` for a server's ``PREFECT_SERVER_API_AUTH_STRING`` (and its clients'
    ``PREFECT_API_AUTH_STRING``): ``microstock:`` and 32 random URL-safe characters (:data:`AUTH_SHAPE`)."""
    return f"microstock:{secrets.token_urlsafe(24)}"


#: What :func:`new_auth_string` makes (and every auth string made since the first, issue 34): anything else in
#: a server's auth file is damage (cut short, a bad byte).
AUTH_SHAPE = re.compile(r"microstock:[A-Za-z0-9_-]{32}")


class AuthRefused(ConfigError):
    """A server proven to be the one asked for refused the auth string it was given (it was started with
    another): the workdir's server says which file and the way on."""


def healthy(api_url: str, timeout_s: float = 2.0, *, pid: int | None = None, auth: str | None = None) -> bool:
    """True when the server at ``api_url`` answers.

    With ``pid`` (the server's process, or the keeper whose child it is): only once the port has proven to be
    held by it (:func:`server_proof.ask`: nothing is sent to anyone else's, issue 50); then, with ``auth``, an
    authenticated ``GET <api_url>/admin/version`` must answer 200 (:class:`AuthRefused` when that proven server
    refuses ``auth``: it was started with another one, and waiting cannot help), else ``GET <api_url>/health``.
    Without ``pid``: ``/health`` alone, whoever answers (a server of the test harness, no auth string).

    Why the proof, not ``/health``: with an auth string on, Prefect answers ``GET /health`` to anyone, so it
    cannot tell a server from another one on the same port. Two workdirs' servers started at once both chose
    the free port 4200, and the one that lost the bind took the winner's ``/health`` for its own (a CI run,
    2026-12-03); another user's server on the port would have been sent the auth string.
    """
    if pid is None:
        if auth is not None:
            raise ValueError("an auth string goes only to a server that proved it is ours: give its pid")
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=timeout_s) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False
    try:
        answer = ask(api_url, "/admin/version" if auth else "/health", pid=pid, auth=auth, timeout_s=timeout_s)
    except (OSError, ValueError):
        return False
    if answer and answer[0] == 401 and auth:
        raise AuthRefused(f"the server on {api_url.removesuffix('/api')} (pid {pid}) refuses the auth string it "
                          "was given")
    return answer is not None and answer[0] == 200


def refuse_busy_port(port: int) -> None:
    """ConfigError saying what to do when something already listens on ``port``."""
    if port_in_use(port):
        raise ConfigError(f"port {port} on {HOST} is already in use; if a Prefect server runs there, use it with "
                          f"PREFECT_API_URL=http://{HOST}:{port}/api, else choose another port with --port")


def log_tail(log: Path, lines: int = 5) -> str:
    """The last non-empty lines of a server's log, joined for one error message."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def wait_healthy(proc: subprocess.Popen, api_url: str, log: Path, timeout_s: float, what: str,
                 auth: str | None = None) -> None:
    """Return once the server ``proc`` runs (it, or a child of it) answers on ``api_url``, proven its own
    (with ``auth``: as the server holding that auth string, :func:`healthy`); ConfigError with the log's last
    lines when ``proc`` exits first or ``timeout_s`` passes (``prefect server start --background`` returns
    before its server answers and never says whether it did)."""
    deadline = time.monotonic() + timeout_s
    while not healthy(api_url, pid=proc.pid, auth=auth):
        if proc.poll() is not None:
            raise ConfigError(f"{what} did not start on {api_url.removesuffix('/api')} (it exited with code "
                              f"{proc.returncode}): {log_tail(log)} (log: {log})")
        if time.monotonic() > deadline:
            raise ConfigError(f"{what} did not answer on {api_url} within {timeout_s:.0f} s: {log_tail(log)} "
                              f"(log: {log})")
        time.sleep(0.25)


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGTERM it when the serving process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalServer:
    """Prefect's server (``prefect server start``'s foreground path, :mod:`server_launch`) on
    ``127.0.0.1:PORT`` with its database in ``home``.

    It runs in ``home``, with every setting that decides where its data lives pinned there
    (:func:`~tasks.orchestration.prefect_settings.pin`): no settings file of the folder it was started from is
    read (issue 50: a ``prefect.toml`` there moved the database).

    Use as a context manager: entering starts the server and returns once it
    is healthy (ConfigError with the log's last lines if it exits or does not
    answer within ``startup_timeout_s``); leaving stops it. The server's
    output goes to ``<home>/server.log``. With ``auth_string`` every API call
    but ``GET /health`` must carry it (``PREFECT_API_AUTH_STRING`` for a
    client, the login page for the UI).
    """

    def __init__(self, home: Path, port: int = DEFAULT_PORT, *, auth_string: str | None = None,
                 startup_timeout_s: float = 180.0, stop_timeout_s: float = 20.0) -> None:
        self.home = home
        self.port = port
        self.auth_string = auth_string
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The UI's address."""
        return f"http://{HOST}:{self.port}"

    @property
    def api_url(self) -> str:
        """The value for ``PREFECT_API_URL``."""
        return f"{self.url}/api"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    def __enter__(self) -> "LocalServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        refuse_busy_port(self.port)
        self.home.mkdir(parents=True, exist_ok=True)
        # The UI asks the API at the address it is served from (not Prefect's default port 4200).
        env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_API_URL=self.api_url,
                   PREFECT_SERVER_UI_API_URL=self.api_url)
        pin(env, self.home)  # its database, UI files, profile... in its home, whatever a settings file says
        env.pop("PREFECT_API_URL", None)
        if self.auth_string:
            env["PREFECT_SERVER_API_AUTH_STRING"] = self.auth_string
        with open(self.log_path, "ab") as log:
            # Its own session: a Ctrl-C in the terminal reaches its parent only, which stops it when it is done
            # with it (`microstock serve` pauses its deployments through it first).
            # Prefect's foreground start, on a socket of the project's (server_launch: why).
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tasks.orchestration.server_launch", str(self.port)],
                env=env, cwd=self.home, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
        try:
            wait_healthy(self.proc, self.api_url, self.log_path, self.startup_timeout_s, "the local Prefect server",
                         self.auth_string)
        except BaseException:  # also Ctrl-C / SIGTERM while waiting: __exit__ does not run when __enter__ raises
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``stop_timeout_s``; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            proc.wait()
