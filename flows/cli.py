"""``microstock``: the contributor's command line (typer + rich).

Prefect is imported only inside commands, after the environment is set:
state lives in ``<workdir>/.prefect`` (unless PREFECT_HOME or PREFECT_API_URL
is set), analytics are off, and without PREFECT_API_URL each command runs on
Prefect's ephemeral server — no server to start.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tasks.failures import ConfigError
from tasks.workdir import default_workdir

app = typer.Typer(help="Take a microstock batch from images to agencies, without losing or double-posting anything.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console(stderr=False)
err = Console(stderr=True)



@app.callback()
def root() -> None:
    """Commands follow INTERFACE.md: run, replay, dead-letter, ledger, serve."""


WorkdirOpt = typer.Option(None, "--workdir", help="Workdir (default: $MICROSTOCK_WORKDIR, else ./microstock-data).")


def resolve_workdir(workdir: Optional[Path]) -> Path:
    return (workdir or default_workdir()).resolve()


def prefect_env(workdir: Path, verbose: bool = False) -> None:
    """Set Prefect's environment before Prefect is imported."""
    if not os.environ.get("PREFECT_HOME") and not os.environ.get("PREFECT_API_URL"):
        home = workdir / ".prefect"
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"workdir {workdir} is not usable: {exc.strerror or exc}")
        os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@contextmanager
def stage_bars(out: Console):
    """Rich progress bars on the terminal, one per stage, fed by ``tasks.progress``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tasks import progress as stage_progress

    bars: dict[str, int] = {}
    with Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out, transient=False) as bar:
        def listener(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                bars[stage] = bar.add_task(stage, total=total)
            bar.update(bars[stage], completed=done, total=total)

        stage_progress.add_listener(listener)
        try:
            yield
        finally:
            stage_progress.remove_listener(listener)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def run(
    workdir: Optional[Path] = WorkdirOpt,
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: <workdir>/microstock.toml)."),
    count: int = typer.Option(12, "--count", min=0, help="Generated images in the batch (without --source)."),
    source: Optional[Path] = typer.Option(None, "--source", help="Ingest the JPEG/PNG images of this folder."),
    agency: Optional[list[str]] = typer.Option(None, "--agency", help="Limit to these agencies (repeatable)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs on the terminal."),
) -> None:
    """Run the stock-batch flow once: assets → describe → CSVs → pack → upload."""
    from tasks.config import load_settings

    wd_path = resolve_workdir(workdir)
    if config is not None and not config.is_file():
        fail(f"{config}: config file not found")
    if source is not None and not source.is_dir():
        fail(f"{source}: source folder not found")
    try:
        settings = load_settings(config or wd_path / "microstock.toml")
        settings.enabled_agencies(agency)
    except ConfigError as exc:
        fail(exc.message)

    prefect_env(wd_path, verbose)
    from flows.stock_batch import stock_batch
    from tasks.report import BatchSummary, skip_notes, summary_table

    with stage_bars(console):
        state = stock_batch(
            workdir=str(wd_path), count=count, source=str(source.resolve()) if source else None,
            agencies=list(agency) if agency else None, config=str(config.resolve()) if config else None,
            return_state=True,
        )
    if not state.is_completed():
        exc = state.result(raise_on_failure=False)
        fail(exc.message if isinstance(exc, ConfigError) else f"the run failed: {state.message}", code=1)
    summary = BatchSummary.model_validate(state.result())
    console.print(summary_table(summary))
    for line in skip_notes(summary):
        console.print(line, highlight=False)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted: nothing recorded for unfinished work; run again to finish it")
        sys.exit(130)
