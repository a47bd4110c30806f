"""What every ``microstock`` command module shares: the consoles, the workdir option, one way to fail."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tasks.core.errors import ConfigError
from tasks.core.workdir import default_workdir

console = Console(stderr=False)
err = Console(stderr=True)

WorkdirOpt = typer.Option(None, "--workdir", help="Workdir (default: $MICROSTOCK_WORKDIR, else ./microstock-data).")


def resolve_workdir(workdir: Optional[Path]) -> Path:
    return (workdir or default_workdir()).resolve()


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, then the exit code (2: the command cannot start)."""
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def workdir_agencies(workdir: Path) -> tuple[str, ...]:
    """Every agency of the workdir, shipped and its own; fails with a broken spec's one-line reason."""
    from tasks.agencies.catalog import agency_names
    from tasks.core.workdir import Workdir

    try:
        return agency_names(Workdir(workdir))
    except ConfigError as exc:
        fail(exc.message)
