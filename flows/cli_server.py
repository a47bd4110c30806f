"""``microstock server start|stop|status``: the workdir's own Prefect server (the one every command uses
without PREFECT_API_URL; it stops by itself after MICROSTOCK_SERVER_IDLE_SECONDS without a command)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import WorkdirOpt, console, fail, resolve_workdir

server_app = typer.Typer(help="The workdir's local Prefect server and its UI.", no_args_is_help=True)


def _home(workdir: Optional[Path]) -> Path:
    """The workdir's Prefect home (PREFECT_HOME when set, as every command uses it)."""
    return Path(os.environ.get("PREFECT_HOME") or resolve_workdir(workdir) / ".prefect")


def _say_where(record, home: Path, started: bool) -> None:
    from tasks.orchestration.workdir_server import auth_path, log_path

    console.print(f"{'started' if started else 'running'}: Prefect UI {record.url} (pid {record.pid}, since "
                  f"{record.started}; stops after {record.idle_s:.0f} s without a command; "
                  f"log {log_path(home)}); the UI's login asks for the auth string in {auth_path(home)}",
                  highlight=False, soft_wrap=True)


@server_app.command("start")
def server_start(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Start the workdir's server (or find it running) and say where its UI is."""
    from tasks.orchestration import workdir_server
    from tasks.orchestration.environment import set_prefect_env

    if os.environ.get("PREFECT_API_URL"):
        fail(f"PREFECT_API_URL is set ({os.environ['PREFECT_API_URL']}): commands use that server, not the "
             "workdir's")
    set_prefect_env(resolve_workdir(workdir), server=False)  # the batching the server is started with
    home = _home(workdir)
    record, started = workdir_server.ensure(home)
    _say_where(record, home, started)


@server_app.command("status")
def server_status(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Where the UI is, or that no server runs (exit 1); counts as a use (the idle time starts again)."""
    from tasks.orchestration import workdir_server

    if os.environ.get("PREFECT_API_URL"):
        console.print(f"PREFECT_API_URL is set: commands use {os.environ['PREFECT_API_URL']}", highlight=False)
        return
    home = _home(workdir)
    record = workdir_server.running(home)
    if record is None:
        console.print(f"no server runs for {home} (the next command starts one; or `microstock server start`)",
                      highlight=False)
        raise typer.Exit(1)
    workdir_server.touch(home)
    _say_where(record, home, started=False)


@server_app.command("stop")
def server_stop(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Stop the workdir's server (nothing is lost: its database stays in the workdir)."""
    from tasks.orchestration import workdir_server

    home = _home(workdir)
    record = workdir_server.stop(home)
    console.print(f"stopped the server on {record.url}" if record else f"no server ran for {home}",
                  highlight=False)
