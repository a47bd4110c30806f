"""``microstock server start|stop|status|list``: the workdir's own Prefect server (the one every command uses
without PREFECT_API_URL; it stops by itself after MICROSTOCK_SERVER_IDLE_SECONDS without a command, and comes
back on the same port)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import FAILED, WorkdirOpt, console, resolve_workdir
from tasks.core.errors import ConfigError

server_app = typer.Typer(help="The workdir's local Prefect server and its UI.", no_args_is_help=True)


def _home(workdir: Optional[Path]) -> Path:
    """The workdir's Prefect home (PREFECT_HOME when set, as every command uses it)."""
    return Path(os.environ.get("PREFECT_HOME") or resolve_workdir(workdir) / ".prefect")


def _say_where(record, home: Path, started: bool) -> None:
    from tasks.orchestration.server_record import auth_path, log_path

    console.print(f"{'started' if started else 'running'}: Prefect UI {record.url} (pid {record.pid}, since "
                  f"{record.started}; stops after {record.idle_s:.0f} s without a command, and comes back on "
                  f"this port with `microstock server start`; log {log_path(home)}); the UI's login asks for "
                  f"the auth string in {auth_path(home)}", highlight=False, soft_wrap=True)


@server_app.command("start")
def server_start(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Start the workdir's server (or find it running) on the port it last had; say where its UI is and list
    the last runs' pages."""
    from tasks.orchestration import workdir_server
    from tasks.orchestration.environment import set_prefect_env

    if os.environ.get("PREFECT_API_URL"):
        raise ConfigError(f"PREFECT_API_URL is set ({os.environ['PREFECT_API_URL']}): commands use that server, "
                          "not the workdir's")
    set_prefect_env(resolve_workdir(workdir), server=False)  # the batching the server is started with
    home = _home(workdir)
    record, started = workdir_server.ensure(home)
    _say_where(record, home, started)
    workdir_server.attach(home, record)  # a user while it asks for the last runs
    from tasks.orchestration.recent_runs import recent_runs

    runs = recent_runs()
    if runs:
        console.print("the last runs:", highlight=False)
    for r in runs:
        console.print(f"  {r.started}  {r.name}  {r.state}  {r.url}", highlight=False, soft_wrap=True)


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
        raise typer.Exit(FAILED)
    workdir_server.touch(home)
    _say_where(record, home, started=False)


@server_app.command("stop")
def server_stop(
    workdir: Optional[Path] = WorkdirOpt,
    force: bool = typer.Option(False, "--force", help="Stop it even while commands use it (they stop too)."),
    every: bool = typer.Option(False, "--all", help="Stop every workdir server of yours (`server list`)."),
) -> None:
    """Stop the workdir's server (nothing is lost: its database stays in the workdir); refused while a command
    uses it, unless --force."""
    from tasks.orchestration import workdir_server

    homes = [s.home for s in workdir_server.servers() if s.record] if every else [_home(workdir)]
    refused = []
    for home in homes:
        try:
            record = workdir_server.stop(home, force=force)
        except ConfigError as exc:
            if not every:
                raise
            refused.append(exc.message)
            continue
        console.print(f"stopped the server on {record.url} ({home})" if record else f"no server ran for {home}",
                      highlight=False)
    if every and not homes:
        console.print("no workdir server of yours runs", highlight=False)
    if refused:
        raise ConfigError("; ".join(refused))


@server_app.command("list")
def server_list() -> None:
    """Your workdir servers (every workdir one ran for): running or not, address, memory, who uses it.

    One line per server, never cut: the workdir and the address are what a contributor copies, and a
    table cuts them to the terminal's (or a pipe's 80-column) width."""
    from tasks.orchestration import workdir_server

    listed = workdir_server.servers()
    if not listed:
        console.print("no workdir server has run for you yet", highlight=False)
        return
    for s in listed:
        workdir = s.home.parent if s.home.name == ".prefect" else s.home
        if s.record:
            users = ", ".join(f"{u.what} (pid {u.pid})" for u in s.users) or "no command"
            line = f"{workdir}  running  {s.record.url}  {s.memory_mb:.0f} MB  used by: {users}"
        else:
            line = f"{workdir}  stopped" + (f"  (was http://127.0.0.1:{s.port})" if s.port else "")
        console.print(line, highlight=False, soft_wrap=True, markup=False)
