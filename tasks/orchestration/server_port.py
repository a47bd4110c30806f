"""The workdir server's port stays this user's for as long as a command or the keeper uses it, even while the
server is down.

Why: when the server dies under a command, Prefect's client in that command (HTTP, the events websocket, logs)
retries for about a minute with the auth string, to whatever then listens on the port; the port was free until
the new server bound it (≈ 7 s of start-up), and another local user looping on ``bind()`` got it and the auth
string (with it, the Secret blocks).

How (measured on this machine's Linux 6.18 as root and a second user; ``inet_bind_conflict`` in
``net/ipv4/inet_connection_sock.c``): a socket bound to ``127.0.0.1:PORT`` with ``SO_REUSEPORT`` and without
``SO_REUSEADDR``, never listening (:func:`hold`), makes every ``bind()`` of another user's to that port fail
with EADDRINUSE, whatever their options (``SO_REUSEADDR``, ``SO_REUSEPORT``, ``0.0.0.0``, ``[::]``), and a
connection to it is refused (the client retries, sending nothing); a listening socket of this user's with
``SO_REUSEPORT`` binds beside it (:func:`listen`), one without (``prefect server start``, uvicorn) does not:
hence the launcher (:mod:`server_launch`). The keeper and every command attached to the server hold one
(:func:`hold`) for their lifetime.

What ``SO_REUSEPORT`` would also allow is refused here: two listening sockets of this user's on one port (two
workdirs' servers, which would share the connections between them). :func:`listen` makes a server's socket
under a per-user, per-port lock (``port-<PORT>.lock`` beside the user's list of servers) once the kernel's lookup
(:mod:`server_proof`) finds no listener there; once it listens, that lookup refuses the next one. The lock is
held from the look to the listen only: a server being stopped may take seconds to end after its listener
closed, and the server brought back must not wait for it.

Nothing here imports Prefect.
"""

from __future__ import annotations

import errno
import fcntl
import socket

from tasks.core.errors import ConfigError
from tasks.orchestration.local_server import HOST
from tasks.orchestration.server_proof import listening
from tasks.orchestration.server_record import servers_list_path


def _taken(port: int, why: str) -> OSError:
    # "already in use": the words workdir_server._lost_the_port looks for in the server's log.
    return OSError(errno.EADDRINUSE, f"port {port} on {HOST} is already in use ({why})")


#: The placeholders this process holds (:func:`hold`), open until it ends.
_HELD: dict[int, socket.socket] = {}


def hold(port: int) -> None:
    """Keep ``127.0.0.1:port`` this user's until this process ends: a socket bound there, never listening (a
    connection to the port while no server listens is refused: the client retries, sending nothing).
    ConfigError ("already in use") when another program holds the port without ``SO_REUSEPORT`` or is another
    user's."""
    if port in _HELD:
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(_taken(port, f"it cannot be held: {exc.strerror or exc}").strerror) from None
    _HELD[port] = sock


def unheld(port: int) -> bool:
    """True when nothing listens on ``127.0.0.1:port`` and nothing holds it (:func:`hold`): a bind with
    ``SO_REUSEADDR`` only (old connections in TIME_WAIT are no holder) succeeds. Where a fresh workdir's server
    may go: a port that only answers "refused" may be another workdir's, held while its server comes back."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def listen(port: int) -> socket.socket:
    """The server's listening socket on ``127.0.0.1:port`` (``SO_REUSEPORT``: beside the placeholders of
    :func:`hold`), made once the port's lock is held and no server listens there. OSError (EADDRINUSE, "already
    in use") when a server listens there already or another program holds the port."""
    lock_dir = servers_list_path().parent
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with open(lock_dir / f"port-{port}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # from the look to the listen: two servers starting at once
            if listening(HOST, port):
                raise _taken(port, "a server listens there")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: old connections in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            try:
                sock.bind((HOST, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise _taken(port, "another program holds it") from None
                raise
            sock.listen(2048)  # uvicorn's backlog
    except BaseException:
        sock.close()
        raise
    return sock
