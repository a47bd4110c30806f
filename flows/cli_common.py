"""What every ``microstock`` command module shares: the consoles, the workdir option, and the one place every
command's errors end (:class:`Commands`) with the one table of exit codes (:data:`EXIT_CODES`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click
import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from tasks.core.errors import BadInput, ConfigError, MicrostockError, StoreUnavailable
from tasks.core.printable import printable
from tasks.core.workdir import default_workdir

# Every exit code of every command but 0 (docs/INTERFACE.md, "Exit codes"), named once here.

#: The work itself failed (a flow run, a call, a name the command could not act on); nothing to change first.
FAILED = 1
#: The command cannot start: its configuration, workdir, options or input, or a local store, are unusable.
CANNOT_START = 2
#: ``run`` only: the run completed, but an agency's uploads or a stage were stopped early (Incomplete).
STOPPED_EARLY = 3
#: Ctrl-C.
INTERRUPTED = 130

#: The exit code of each error group, the first match winning: what a command's error ends it with, whichever
#: command raised it. A group is added here, never chosen by a command.
EXIT_CODES: tuple[tuple[type[MicrostockError], int], ...] = (
    (ConfigError, CANNOT_START),
    (BadInput, CANNOT_START),
    (StoreUnavailable, CANNOT_START),
    (MicrostockError, FAILED),  # TransientError, PermanentError, StageStopped, BatchJobEnded
)


def exit_code(exc: MicrostockError) -> int:
    """The exit code of ``exc``'s group (:data:`EXIT_CODES`)."""
    return next(code for group, code in EXIT_CODES if isinstance(exc, group))


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


class Commands(TyperGroup):
    """The ``microstock`` group, where every command's errors end, so that a command just calls and prints (httpx's
    ``_main.py`` does the same for its command).

    A :class:`MicrostockError` is one line on stderr (``error: <message>``), never a traceback, and the exit code of
    its group (:data:`EXIT_CODES`); a Prefect server that does not answer: :data:`FAILED`; Ctrl-C:
    :data:`INTERRUPTED`. A command exits by itself only with an outcome that is no error, named here too: ``run``'s
    :data:`STOPPED_EARLY`, ``server status`` finding no server and ``review``/``similar release`` given a name
    that is no described asset (one line per name: :data:`FAILED`).
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MicrostockError as exc:
            print_error(exc.message)
            raise typer.Exit(exit_code(exc)) from None
        except KeyboardInterrupt:
            err.print("interrupted: nothing recorded for unfinished work; run again to finish it")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as exc:
            import httpx  # Prefect's client: a server that does not answer (loaded only when one failed)

            if not isinstance(exc, httpx.TransportError):
                raise
            print_error(f"the Prefect server at {os.environ.get('PREFECT_API_URL', '?')} did not answer ({exc}); "
                        "`microstock server status` says whether it runs")
            raise typer.Exit(FAILED) from None


def workdir_agencies(workdir: Path) -> tuple[str, ...]:
    """Every agency of the workdir, shipped and its own (a broken spec: ConfigError)."""
    from tasks.agencies.catalog import agency_names
    from tasks.core.workdir import Workdir

    return agency_names(Workdir(workdir))
