"""``microstock``: the contributor's command line (typer + rich).

Prefect is imported only inside commands, after the environment is set:
state lives in ``<workdir>/.prefect`` (unless PREFECT_HOME or PREFECT_API_URL
is set), analytics are off, and without PREFECT_API_URL each command runs on
the workdir's own server (flows/cli_server.py), started by the first command.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional, get_args

import typer

from flows.cli_batches import batches_app
from flows.cli_cluster import accounts_app, all_accounts_summary, cluster_app, shared_dead_letter_url
from flows.cli_common import (
    CANNOT_START,
    Commands,
    WorkdirOpt,
    console,
    err,
    exit_code,
    resolve_workdir,
    workdir_agencies,
)
from flows.cli_ledger import ledger_app
from flows.cli_models import models
from flows.cli_review import review_app
from flows.cli_server import server_app
from flows.cli_similar import similar_app
from tasks.core.errors import BadInput, ConfigError, MicrostockError
from tasks.core.printable import printable

app = typer.Typer(help="Take a microstock batch from images to agencies, without losing or double-posting anything.",
                  cls=Commands, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def root() -> None:
    """Commands follow INTERFACE.md: run, replay, dead-letter, ledger, serve."""


def prefect_env(workdir: Path, verbose: bool = False, server: bool = True, new_workdir: bool = False) -> None:
    """Prefect's environment for this command (before Prefect is imported); the workdir's server unless
    ``server=False`` (none for a folder holding no workdir, unless the command makes one: ``new_workdir``)."""
    from tasks.orchestration.environment import set_prefect_env

    set_prefect_env(workdir, verbose, server=server, new_workdir=new_workdir)


@app.command()
def run(
    workdir: Optional[Path] = WorkdirOpt,
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: <workdir>/microstock.toml)."),
    count: int = typer.Option(0, "--count", min=0, help="Generate images 0…N-1 (without --source). Without it "
                                                        "nothing is generated: the run finishes the workdir's assets."),
    clips: int = typer.Option(0, "--clips", min=0, help="Generate clips 0…N-1 (without --source): Gemini's clip "
                                                        "model with a key, else the offline generator's."),
    source: Optional[Path] = typer.Option(None, "--source",
                                          help="Ingest the JPEG/PNG images and MP4/MOV/AVI/MPEG clips of this folder."),
    agency: Optional[list[str]] = typer.Option(None, "--agency", help="Limit to these agencies (repeatable)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs on the terminal."),
) -> None:
    """Run the stock-batch flow once: assets → describe → pack → CSVs → upload."""
    from tasks.core.secrets import gemini_api_key
    from tasks.stages.run_context import RunContext

    wd_path = resolve_workdir(workdir, config)
    if config is not None and not config.is_file():
        raise ConfigError(f"{config}: config file not found")
    if source is not None and not source.is_dir():
        raise BadInput(str(source), "source folder not found")
    # The check before a run made here too, before Prefect starts (a bad target or a retired model is one line at
    # once, no server started); the flow makes it again, so a deployment run is refused exactly as this one. The
    # model list is kept for the day: Gemini is asked once, and its notes (a fresh list only) are said once, here.
    ctx = RunContext.open(wd_path, config, agency)
    for note in ctx.check(bool(count and source is None), gemini_api_key(), bool(clips and source is None)):
        err.print(note, highlight=False, soft_wrap=True)
    ctx.wd.prepare()  # a read-only folder or a folder in the ledger's place: one line, exit 2, nothing started
    for note in ctx.catalog.notes:
        console.print(note, highlight=False)
    if not count and not clips and source is None:  # a bare re-run adds nothing nobody asked for
        console.print(f"no --count or --source: nothing is generated; finishing what {wd_path / 'assets'} holds",
                      highlight=False)

    from tasks.orchestration import workdir_server

    own_server = wd_path if workdir_server.wanted() else None  # before prefect_env sets PREFECT_API_URL
    prefect_env(wd_path, verbose, new_workdir=True)
    from flows.run_outcome import INCOMPLETE
    from flows.run_outcome import exit_code as run_exit_code
    from flows.stock_batch import stock_batch
    from tasks.observe.summary import BatchSummary
    from tasks.observe.terminal import skip_notes, stage_bars, summary_table, validation_table

    with stage_bars(console):
        state = stock_batch(
            workdir=str(wd_path), count=count, clips=clips, source=str(source.resolve()) if source else None,
            agencies=list(agency) if agency else None, config=str(config.resolve()) if config else None,
            return_state=True,
        )
    if not state.is_completed() and state.name != INCOMPLETE:  # Incomplete: uploads left undone, summary kept
        exc = state.result(raise_on_failure=False)
        if isinstance(exc, MicrostockError) and exit_code(exc) == CANNOT_START:  # e.g. the check before a run
            raise exc
        raise MicrostockError(f"the run failed: {state.message}")  # the work failed: exit 1
    summary = BatchSummary.model_validate(state.result(raise_on_failure=False))
    if summary.validation.agencies:  # this run's final CSV report, in the run's result (none: no CSV stage ran)
        console.print(validation_table(summary.validation, summary.upload_stopped))
    console.print(summary_table(summary))
    for line in skip_notes(summary) + summary.ai_tick_notes():
        console.print(line, highlight=False)
    run_url(state, own_server)
    if code := run_exit_code(summary):  # the run completed, but an agency or a stage stopped early: cron should know
        raise typer.Exit(code)


def run_url(state, own_server: Optional[Path]) -> None:
    """The last line of a run's summary: where the UI shows the run (nothing without a server's UI); before it,
    on the workdir's own server (``own_server``: the workdir), how long that page stays up and the command that
    brings it back."""
    from prefect.utilities.urls import url_for

    url = url_for("flow-run", obj_id=state.state_details.flow_run_id)
    if not url:
        return
    if own_server is not None:
        from tasks.orchestration import workdir_server

        record = workdir_server.running(Path(os.environ["PREFECT_HOME"]))
        if record is not None:
            idle = f"{record.idle_s:.0f} s" if record.idle_s < 120 else f"{record.idle_s / 60:.0f} min"
            console.print(f"the UI stays up while a command uses the workdir's server and {idle} after the last;"
                          f" `microstock server start --workdir {own_server}` brings it back "
                          f"on port {record.port}, this page and the last runs' with it",
                          highlight=False, soft_wrap=True)
    console.print(f"the run in the Prefect UI: {url}", highlight=False, soft_wrap=True)


@app.command()
def serve(
    workdir: Optional[Path] = WorkdirOpt,
    port: Optional[int] = typer.Option(None, "--port",
                                       help="Port for a new local Prefect server (when PREFECT_API_URL is not "
                                            "set; default: the port it last had, else 4200, else a free one)."),
    timezone: Optional[str] = typer.Option(None, "--timezone", help="Timezone of every schedule (IANA name), "
                                                                   "instead of prefect.yaml's."),
) -> None:
    """Serve the deployments of prefect.yaml with their schedules, without a worker.

    Without PREFECT_API_URL a local Prefect server (SQLite in <workdir>/.prefect, 127.0.0.1 only)
    runs as long as this command does. SIGTERM or Ctrl-C stops both cleanly.
    """
    from tasks.core.workdir import Workdir
    from tasks.orchestration.deployments import serve_all

    wd_path = resolve_workdir(workdir)
    Workdir(wd_path).prepare()
    if timezone:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(timezone)
        except (ValueError, LookupError):
            raise ConfigError(f"unknown timezone {timezone!r} (use an IANA name such as Europe/Berlin)") from None
    prefect_env(wd_path, verbose=True, server=False)  # serve_all starts the workdir's server on --port
    serve_all(wd_path, port=port, timezone=timezone, say=lambda line: console.print(line, highlight=False))


secrets_app = typer.Typer(help="The Gemini key and agency passwords as Prefect Secret blocks.", no_args_is_help=True)
app.add_typer(secrets_app, name="secrets")


def secret_names(workdir: Path) -> list[str]:
    from tasks.core.secrets import password_block_name

    return ["gemini-api-key", *(password_block_name(a) for a in workdir_agencies(workdir))]


@secrets_app.command("set")
def secrets_set(
    name: str = typer.Argument(..., help="gemini-api-key or microstock-<agency>-password "
                                         "(`microstock secrets list` names them all)."),
    workdir: Optional[Path] = WorkdirOpt,
) -> None:
    """Save a secret as a Prefect Secret block; the value comes from a hidden prompt, or stdin when piped."""
    known = secret_names(resolve_workdir(workdir))
    if name not in known:
        raise ConfigError(f"unknown secret {name!r} (choose from {', '.join(known)})")
    if sys.stdin.isatty():
        value = typer.prompt(f"{name}", hide_input=True, confirmation_prompt=True)
    else:
        value = sys.stdin.read().strip()
    if not value:
        raise ConfigError("empty value: nothing saved")
    wd_path = resolve_workdir(workdir)
    prefect_env(wd_path, new_workdir=True)  # the key is often saved before the first run
    from prefect.blocks.system import Secret

    Secret(value=value).save(name, overwrite=True)
    where = os.environ.get("PREFECT_API_URL") or f"the local Prefect database in {os.environ['PREFECT_HOME']}"
    console.print(f"saved Prefect Secret block {name!r} on {where}", highlight=False)


@secrets_app.command("list")
def secrets_list(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Which secrets are set, in the environment and as Secret blocks (never their values)."""
    from rich.table import Table

    wd_path = resolve_workdir(workdir)
    prefect_env(wd_path)
    from tasks.core.secrets import password_env_var, secret_block

    table = Table("secret block", "block", "environment variable")
    for name in secret_names(wd_path):
        env_vars = (["GOOGLE_API_KEY", "GEMINI_API_KEY"] if name == "gemini-api-key"
                    else [password_env_var(name.removeprefix("microstock-").removesuffix("-password"))])
        env_set = [v for v in env_vars if os.environ.get(v)]
        table.add_row(name, "set" if secret_block(name) else "—",
                      ", ".join(f"{v} set" for v in env_set) or f"{' / '.join(env_vars)} not set")
    console.print(table)


@app.command()
def replay(
    workdir: Optional[Path] = WorkdirOpt,
    limit: int = typer.Option(20, "--limit", min=1, help="At most this many parked jobs, oldest first."),
    error_class: Optional[str] = typer.Option(None, "--error-class",
                                              help="Only error classes starting with this "
                                                   "(exhausted, permanent:400, blocked …)."),
    apply: bool = typer.Option(False, "--apply", help="Replay them; without it, only list what would be replayed."),
    include_doomed: bool = typer.Option(False, "--include-doomed",
                                        help="Also replay jobs that fail again unless changed first "
                                             "(permanent:*, blocked:*); by default they stay parked."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs on the terminal."),
) -> None:
    """Run the replay-dead-letters flow: list parked jobs (dry run), or --apply to replay them and publish the
    recovered."""
    wd_path = resolve_workdir(workdir)
    prefect_env(wd_path, verbose)
    from flows.replay import replay_dead_letters
    from tasks.observe.terminal import stage_bars

    with stage_bars(console):
        state = replay_dead_letters(limit=limit, dry_run=not apply, error_class=error_class, workdir=str(wd_path),
                                    include_doomed=include_doomed, return_state=True)
    if not state.is_completed():
        exc = state.result(raise_on_failure=False)
        if isinstance(exc, MicrostockError):  # its group's exit code: an unreadable dead-letter store 2
            raise exc
        raise MicrostockError(f"the replay failed: {state.message}")  # the work failed: exit 1
    result = state.result()
    for line in result["would_replay"]:  # asset names are files': control characters written out
        typer.echo(printable(line))
    for name, why in sorted(result["failing"].items()):
        typer.echo(f"still failing: {printable(name)}: {printable(why)}")
    for name, error_class in sorted(result["skipped"].items()):
        typer.echo(f"skipped: {printable(name)} ({error_class}) fails again unless changed first; "
                   "--include-doomed replays it")
    if result["stopped"]:
        typer.echo(f"stopped: {result['stopped']}")
    typer.echo(state.message)
    if result["dry_run"] and result["scanned"]:
        typer.echo("run again with --apply to replay them")


dead_letter_app = typer.Typer(help="The dead-letter store: describe jobs parked for replay.", no_args_is_help=True)
app.add_typer(dead_letter_app, name="dead-letter")


def _job_statuses() -> type[Enum]:
    """The dead-letter store's statuses, as the choices of ``--status``."""
    from tasks.stores.dead_letter import Status

    return Enum("JobStatus", {s: s for s in get_args(Status)}, type=str)


JobStatus = _job_statuses()


def open_dead_letters(workdir: Optional[Path]):
    """The workdir's store (the account's view of the shared PostgreSQL one when a ``dead_letter_url``
    is set), or None when it is SQLite and has no file yet (nothing was ever parked)."""
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.stores.dead_letter_open import open_store, store_settings

    wd = Workdir(resolve_workdir(workdir))
    if not wd.dead_letter_db.exists() and not shared_dead_letter_url(wd.root):
        return None
    return open_store(wd, store_settings(load_settings(wd.config_file), os.environ))


@dead_letter_app.command("summary")
def show_dead_letter_summary(
    workdir: Optional[Path] = WorkdirOpt,
    all_accounts: bool = typer.Option(False, "--all-accounts",
                                      help="Every account of the shared PostgreSQL store (dead_letter_url), "
                                           "a block each."),
) -> None:
    """Parked jobs per error class and the oldest one's age: the daily dead-letter-summary flow's report."""
    from tasks.stores.dead_letter import Summary

    if all_accounts:
        all_accounts_summary(resolve_workdir(workdir))
        return
    store = open_dead_letters(workdir)
    typer.echo((store.summary() if store else Summary()).text())


@dead_letter_app.command("list")
def list_dead_letters(
    workdir: Optional[Path] = WorkdirOpt,
    status: Optional[JobStatus] = typer.Option(None, "--status",
                                               help="Only parked or only recovered jobs (default: both)."),
) -> None:
    """One line per job: job id, error class, attempts, first and last seen (UTC), status, asset."""
    store = open_dead_letters(workdir)
    jobs = store.list(status=status.value if status else None) if store else []
    for job in jobs:
        typer.echo(printable(job.line()))  # the asset's name is a file's: control characters written out
    if not jobs:
        err.print(f"no {status.value if status else ''} jobs in the dead-letter store".replace("  ", " "))


app.add_typer(accounts_app, name="accounts")
app.add_typer(cluster_app, name="cluster")


app.add_typer(ledger_app, name="ledger")
app.add_typer(server_app, name="server")  # its own module, flows/cli_server.py
app.add_typer(review_app, name="review")  # its own module, flows/cli_review.py
app.add_typer(batches_app, name="batches")  # its own module, flows/cli_batches.py
app.add_typer(similar_app, name="similar")  # its own module, flows/cli_similar.py
app.command()(models)  # its own module, flows/cli_models.py


def main() -> None:
    """Console-script entry point (``[project.scripts]``); the errors of every command end in :class:`Commands`,
    where ``typer.testing.CliRunner`` meets them too."""
    app()
