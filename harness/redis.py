"""A Redis server for the cluster's Prefect messaging, started as PostgreSQL is (Debian's ``redis-server``).

Prefect's in-memory broker gives each subscriber a queue of 10,000 messages
and drops what does not fit ("Subscription queue is full"); with
``prefect-redis`` (the ``redis`` extra) the server's messaging goes through
Redis streams instead (:meth:`RedisServer.prefect_server_env`: Prefect's
``PREFECT_MESSAGING_BROKER`` / ``PREFECT_MESSAGING_CACHE`` and prefect-redis's
``PREFECT_REDIS_MESSAGING_*``, names as in prefect-redis 0.3's
``RedisMessagingSettings``).

Loopback only, no disk persistence (the messages are in flight, the record
is in PostgreSQL), a generated password: other users of the machine reach
loopback too. The password is in ``redis.conf`` (mode 0600) and the server's
environment, never on a command line or in a log.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.orchestration.local_server import HOST
from tasks.orchestration.redis_publisher import REDIS_PUBLISHER_SETTINGS


def find_redis_server() -> str | None:
    """``redis-server`` on PATH or Debian's ``/usr/bin/redis-server``."""
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").is_file()
                                             else None)


class RedisServer:
    """``redis-server`` with its config, log and pid file in ``home``, on ``HOST:port``."""

    def __init__(self, home: Path, port: int, password: str | None = None) -> None:
        self.home = home
        self.port = port
        self.password = password or secrets.token_urlsafe(24)
        self.binary = find_redis_server()
        if self.binary is None:
            raise ConfigError("redis-server is not installed: sudo apt-get install redis-server (or `make redis`)")

    @property
    def log_path(self) -> Path:
        return self.home / "redis.log"

    @property
    def pid_path(self) -> Path:
        return self.home / "redis.pid"

    def prefect_server_env(self) -> dict[str, str]:
        """What a Prefect server needs to use this Redis for its messaging (contains the password), its events
        published one at a time (:data:`~tasks.orchestration.redis_publisher.REDIS_PUBLISHER_SETTINGS`)."""
        return {**REDIS_PUBLISHER_SETTINGS, "PREFECT_MESSAGING_BROKER": "prefect_redis.messaging",
                "PREFECT_MESSAGING_CACHE": "prefect_redis.messaging",
                "PREFECT_REDIS_MESSAGING_HOST": HOST, "PREFECT_REDIS_MESSAGING_PORT": str(self.port),
                "PREFECT_REDIS_MESSAGING_DB": "0", "PREFECT_REDIS_MESSAGING_PASSWORD": self.password}

    def start(self, timeout_s: float = 30.0) -> int:
        """Start it daemonized (it outlives this command); returns its pid once it answers PING."""
        self.home.mkdir(parents=True, exist_ok=True)
        conf = self.home / "redis.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"bind {HOST}\nport {self.port}\nprotected-mode yes\ndaemonize yes\n"
                    f"pidfile {self.pid_path}\nlogfile {self.log_path}\ndir {self.home}\n"
                    f'save ""\nappendonly no\nrequirepass {self.password}\n')
        result = subprocess.run([self.binary, str(conf)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0:
            raise ConfigError(f"redis-server did not start: {(result.stderr or result.stdout).strip()[-400:]}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ping():
                return int(self.pid_path.read_text().strip())
            time.sleep(0.2)
        try:  # daemonized but silent: nobody else knows its pid yet, so stop it here
            stop_redis(int(self.pid_path.read_text().strip()))
        except (OSError, ValueError):
            pass
        raise ConfigError(f"redis-server did not answer on {HOST}:{self.port} within {timeout_s:.0f} s "
                          f"(log {self.log_path})")

    def ping(self) -> bool:
        """True when the server answers an authenticated PING."""
        try:
            with socket.create_connection((HOST, self.port), timeout=1) as s:
                s.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
                reply = b""
                while reply.count(b"\r\n") < 2:
                    chunk = s.recv(256)
                    if not chunk:
                        break
                    reply += chunk
                return reply.endswith(b"+PONG\r\n")
        except OSError:
            return False


def stop_redis(pid: int, timeout_s: float = 30.0) -> None:
    """SIGTERM the redis-server ``pid`` (never a pid that is not one: it may have been reused), SIGKILL after
    ``timeout_s``."""
    import signal

    def alive() -> bool:
        try:
            return (b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
                    and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")
        except OSError:
            return False

    if not alive():
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.kill(pid, signal.SIGKILL)
