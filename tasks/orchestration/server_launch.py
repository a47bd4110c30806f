"""``python -m tasks.orchestration.server_launch PORT``: Prefect's server on ``127.0.0.1:PORT``, serving on a
listening socket the project made (:func:`server_port.listen`), in the foreground until SIGTERM/SIGINT.

Why not ``prefect server start``: its uvicorn binds the port itself without ``SO_REUSEPORT``, which cannot bind
beside the placeholders (:func:`server_port.hold`) that keep the port the contributor's while the server is
down (another user who took it was sent the auth string by a command's retrying client). What this does is
Prefect 3.9.1's foreground start (``prefect/cli/server.py`` ``start``, ``prefect/cli/_server_utils.py``
``_run_in_foreground``, one worker, services on): its settings as ``start`` reads them (the API's keep-alive,
the websocket pings, the log level; the scheduler, late-runs, analytics and UI switches ``start`` sets back to
the values the settings already hold, so they are read where the app reads them), ``create_app(final=True)``
and ``uvicorn.run``'s server, here ``uvicorn.Server(config).run(sockets=[sock])``. Its output: Prefect's and
uvicorn's log, and one line when the port is not ours to take (``already in use``, read by
:func:`workdir_server._lost_the_port`).
"""

from __future__ import annotations

import sys


def serve(port: int) -> None:
    """Serve Prefect's API and UI on ``127.0.0.1:port`` until stopped; exit 1 with one line when the port is
    not ours to take (:func:`server_port.listen`)."""
    from tasks.orchestration.local_server import HOST
    from tasks.orchestration.server_port import listen

    try:
        sock = listen(port)
    except OSError as exc:
        print(f"the Prefect server did not start: {exc.strerror or exc}", flush=True)
        raise SystemExit(1) from None

    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import (
        PREFECT_SERVER_API_KEEPALIVE_TIMEOUT,
        PREFECT_SERVER_API_WEBSOCKET_PING_INTERVAL,
        PREFECT_SERVER_API_WEBSOCKET_PING_TIMEOUT,
        PREFECT_SERVER_LOGGING_LEVEL,
    )

    print(f"Prefect server on http://{HOST}:{port}", flush=True)
    config = uvicorn.Config(app=create_app(final=True), host=HOST, port=port,
                            timeout_keep_alive=PREFECT_SERVER_API_KEEPALIVE_TIMEOUT.value(),
                            ws_ping_interval=PREFECT_SERVER_API_WEBSOCKET_PING_INTERVAL.value(),
                            ws_ping_timeout=PREFECT_SERVER_API_WEBSOCKET_PING_TIMEOUT.value(),
                            log_level=PREFECT_SERVER_LOGGING_LEVEL.value().lower())
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    serve(int(sys.argv[1]))
