"""What every ``microstock`` command module shares: the consoles, the workdir option, one way to fail."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from tasks.core.workdir import default_workdir

#: The width of a console whose output goes to a pipe or a file (cron's log): wide enough that no table cell, path
#: or line is ever cut or wrapped; a terminal keeps its own width.
PIPE_WIDTH = 10_000


def command_console(stderr: bool) -> Console:
    """A console for a command's output: on a terminal, its width; to a pipe or a file, no cut at 80 columns
    (a cell ending in ``…/microstock-data/c…`` tells the log's reader nothing), every line as long as it is."""
    out = Console(stderr=stderr)
    if out.is_terminal:
        return out
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


console = command_console(stderr=False)
err = command_console(stderr=True)

WorkdirOpt = typer.Option(None, "--workdir", help="Workdir (default: $MICROSTOCK_WORKDIR, else ./microstock-data).")


def resolve_workdir(workdir: Optional[Path]) -> Path:
    return (workdir or default_workdir()).resolve()


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, every word of the message shown (``[gemini]`` is no markup), then the exit code
    (2: the command cannot start)."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def workdir_agencies(workdir: Path) -> tuple[str, ...]:
    """Every agency of the workdir, shipped and its own (a broken spec: ConfigError)."""
    from tasks.agencies.catalog import agency_names
    from tasks.core.workdir import Workdir

    return agency_names(Workdir(workdir))
