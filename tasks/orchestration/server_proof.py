"""Nothing of the contributor's goes to a port before the server there has proven it is the workdir's own.

Why: a loopback port is anyone's. Another local user ran a fake HTTP server whose command line looked like
this workdir's keeper, and the contributor's ``microstock server status`` sent it the auth string as Basic
credentials (issue 50); with it they read the Secret blocks from the real server.

The proof (:func:`ask`) is made on the connection itself, after the connect and before a byte is sent, from
what Linux tells any user about sockets and about their own processes; the other end sees nothing (no
request, no challenge):

1. the socket listening where the connection went (the kernel's own lookup of ``127.0.0.1:PORT``) is held by
   the server's process or a child of it (its inode among their ``/proc/<pid>/fd``), each a process of this
   user (:func:`own_process`): the workdir's server, not another one;
2. the far end of this very connection is this user's: a connection takes its listener's uid, so a port that
   changed hands between the connect and step 1 does not pass either.

Another user cannot join a socket of ours on a port (``SO_REUSEPORT`` needs the same uid) nor bind
``0.0.0.0`` over our listening ``127.0.0.1`` (Linux refuses it), so a proven port sends to our server only.
Why not a challenge only the auth string answers: Prefect 3.9.1's API has none; every route but ``GET
/health`` and ``/ready`` compares the Basic credentials themselves (``prefect/server/api/server.py``,
``token_validation``). Why the kernel's socket diagnostics (``sock_diag``, an exact lookup of one socket)
and not ``/proc/net/tcp``: reading that file walks every socket of the machine, 6-11 ms here with 640 of
them (other users can add more), where a lookup takes 25 µs. Cost, measured on the workdir's running server
(2 cores shared with other test runs; 4 fds of the keeper and 28 of the server read): 0.7-1.2 ms a proof; a
whole proven check (``/admin/version`` with the auth string) 4-7 ms, as the old unproven one (``/health``,
then ``/admin/version``: 3-6 ms).

Nothing here imports Prefect.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit

from tasks.core.errors import ConfigError

#: The kernel's socket diagnostics (linux/sock_diag.h, linux/inet_diag.h, linux/netlink.h).
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST = 4, 20, 1
NO_COOKIE, ALL_STATES = 0xFFFFFFFF, 0xFFFFFFFF
#: TCP states (include/net/tcp_states.h): a listening socket; a connection not yet taken from its listener's
#: queue as a socket of its own (its diagnostics carry no uid).
LISTEN, NEW_SYN_RECV = 10, 12


def own_process(pid: int) -> bool:
    """True when ``pid`` lives and every uid of it (real, effective, saved, filesystem) is this user's.

    Why ``status`` and not the owner of ``/proc/<pid>``: a process that made itself non-dumpable shows root
    as that owner, which for a contributor working as root would pass for theirs."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Uid:"):
                return all(int(uid) == os.getuid() for uid in line.split()[1:])
    except (OSError, ValueError):
        pass
    return False


def _diag(host: str, port: int, far_host: str = "0.0.0.0", far_port: int = 0) -> tuple[int, int, int] | None:
    """``(state, uid, inode)`` of the TCP socket the kernel finds for ``host:port`` (with ``far_host:far_port``,
    that connection's end here; without, the socket listening there, whichever a connection would reach), or
    None when there is none: one exact lookup through the kernel's socket diagnostics (``sock_diag``, what
    ``ss`` reads; about 25 µs, readable by every user)."""
    sockid = (struct.pack("!HH", port, far_port) + socket.inet_aton(host) + bytes(12) + socket.inet_aton(far_host)
              + bytes(12) + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE))
    request = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, ALL_STATES) + sockid
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
            nl.sendto(struct.pack("=LHHLL", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + request,
                      (0, 0))
            answer = nl.recv(65536)
    except OSError as exc:
        raise ConfigError(f"cannot tell whose program listens on port {port}: the kernel's socket diagnostics "
                          f"(sock_diag) do not answer ({exc.strerror or exc}); load them (`modprobe inet_diag "
                          "tcp_diag` as root): no auth string is sent to a port unproven") from exc
    if len(answer) < 16 + 72 or struct.unpack_from("=H", answer, 4)[0] != SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket (ENOENT)
    state = answer[16 + 1]
    uid, inode = struct.unpack_from("=II", answer, 16 + 64)  # struct inet_diag_msg after struct nlmsghdr
    return state, uid, inode


def listening(host: str, port: int) -> bool:
    """True when a socket (whoever's) listens where a connection to ``host:port`` would go."""
    found = _diag(host, port)
    return found is not None and found[0] == LISTEN


def family(pid: int) -> list[int]:
    """``pid`` and its descendants (every thread's children), those of this user only."""
    found, todo = [], [pid]
    while todo:
        who = todo.pop()
        if who in found or not own_process(who):
            continue
        found.append(who)
        for task in Path(f"/proc/{who}/task").glob("*/children"):
            try:
                todo.extend(int(child) for child in task.read_text().split())
            except (OSError, ValueError):
                continue
    return found


def _holds(pid: int, inode: int) -> bool:
    """True when ``pid`` or a descendant of it (all this user's) holds the socket ``inode``."""
    wanted = f"socket:[{inode}]"
    for who in family(pid):
        try:
            names = os.listdir(f"/proc/{who}/fd")
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"/proc/{who}/fd/{name}") == wanted:
                    return True
            except OSError:
                continue
    return False


def proven(sock: socket.socket, pid: int) -> bool:
    """True when ``sock``, connected to a loopback port, reached a server held by ``pid`` (or its children)
    of this user's: the two checks of the module's docstring."""
    host, port = sock.getpeername()[:2]
    near_host, near_port = sock.getsockname()[:2]
    far_end = _diag(host, port, near_host, near_port)
    listening = _diag(host, port)
    me = os.getuid()
    return (far_end is not None and far_end[0] != NEW_SYN_RECV and far_end[1] == me
            and listening is not None and listening[0] == LISTEN and listening[1] == me
            and _holds(pid, listening[2]))


def ask(api_url: str, path: str, *, pid: int, auth: str | None = None, body: object = None,
        timeout_s: float = 2.0) -> tuple[int, bytes] | None:
    """``GET`` (``POST`` with a JSON ``body``) ``<api_url><path>`` with ``auth`` as Basic credentials, once the
    connection is :func:`proven` to reach the server ``pid`` runs: ``(status, body)``, or None when it is not
    (nothing was sent). OSError when the port does not answer."""
    parts = urlsplit(api_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        conn.connect()
        if not proven(conn.sock, pid):
            return None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if auth is not None:
            headers["Authorization"] = f"Basic {base64.b64encode(auth.encode()).decode()}"
        conn.request("GET" if body is None else "POST", f"{parts.path}{path}",
                     body=None if body is None else json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except http.client.HTTPException as exc:
        raise OSError(f"{api_url}{path}: {exc}") from exc
    finally:
        conn.close()
