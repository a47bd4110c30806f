"""What every ``microstock`` command module shares: the consoles, the workdir option, one way to fail."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from tasks.core.printable import printable
from tasks.core.workdir import default_workdir

#: The width of a console whose output goes to a pipe or a file (cron's log): wide enough that no table cell, path
#: or line is ever cut or wrapped; a terminal keeps its own width.
PIPE_WIDTH = 10_000


def command_console(stderr: bool) -> Console:
    """A console for a command's output: on a terminal, its width; to a pipe or a file, no cut at 80 columns
    (a cell ending in ``…/microstock-data/c…`` tells the log's reader nothing), every line as long as it is.

    No Rich markup (``markup=False``): what it prints holds the contributor's file names, and a file named
    ``[bold red]x[/].jpg`` or ``[link=…]…`` is shown as it is, never taken as style or link. Style is given
    as :class:`~rich.text.Text` (:func:`print_error`)."""
    out = Console(stderr=stderr, markup=False)
    if out.is_terminal:
        return out
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True, markup=False)


console = command_console(stderr=False)
err = command_console(stderr=True)

WorkdirOpt = typer.Option(None, "--workdir", help="Workdir (default: $MICROSTOCK_WORKDIR, else ./microstock-data).")


def resolve_workdir(workdir: Optional[Path], config: Optional[Path] = None) -> Path:
    """The workdir a command uses (``--workdir``, else $MICROSTOCK_WORKDIR, else ./microstock-data), its real path;
    ConfigError (exit 2) when another user could change it or its configuration (``config``: ``--config``), before
    anything of it is read (:func:`~tasks.core.ownership.check_workdir`): every command, the read-only ones too."""
    from tasks.core.ownership import check_workdir

    path = workdir or default_workdir()
    check_workdir(path, config)
    return path.resolve()


def print_error(message: str) -> None:
    """``error: <message>`` on stderr, one line: every character of the message shown as it is (``[gemini]`` is
    no markup), control characters written out (:func:`~tasks.core.printable.printable`)."""
    err.print(Text.assemble(("error:", "red"), " ", printable(message)), highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    """:func:`print_error`, then the exit code (2: the command cannot start)."""
    print_error(message)
    raise typer.Exit(code)


def workdir_agencies(workdir: Path) -> tuple[str, ...]:
    """Every agency of the workdir, shipped and its own (a broken spec: ConfigError)."""
    from tasks.agencies.catalog import agency_names
    from tasks.core.workdir import Workdir

    return agency_names(Workdir(workdir))
