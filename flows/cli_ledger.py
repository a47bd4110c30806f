"""``microstock ledger``: the ledger's three questions (pending, done, status), without loading Prefect."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import WorkdirOpt, console, err, resolve_workdir, workdir_agencies
from tasks.core.errors import ConfigError
from tasks.core.printable import printable

ledger_app = typer.Typer(help="The upload ledger: what is uploaded, what is pending.", no_args_is_help=True)


def ledger_agencies(workdir: Path, only: Optional[str]) -> list[str]:
    """The enabled agencies of the workdir's config (or just ``only``); ConfigError with the config's reason."""
    from tasks.agencies.catalog import enabled_agencies
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir

    return enabled_agencies(load_settings(Workdir(workdir).config_file), [only] if only else None, Workdir(workdir))


def warn_ledger_problems(state) -> None:
    for number, reason in state.problems:
        err.print(f"uploads.ledger line {number}: {printable(reason)}", highlight=False, soft_wrap=True)  # names


@ledger_app.command("pending")
def ledger_pending(
    agency: Optional[str] = typer.Option(None, "--agency", help="Only this agency."),
    workdir: Optional[Path] = WorkdirOpt,
) -> None:
    """What the next run uploads: one line per agency and file (described, packed, not in the ledger)."""
    from tasks.core.workdir import Workdir
    from tasks.stores.pending import ledger_overview

    wd_path = resolve_workdir(workdir)
    rows, state = ledger_overview(Workdir(wd_path), ledger_agencies(wd_path, agency))
    warn_ledger_problems(state)
    for row in rows:
        for item in row.pending:
            typer.echo(f"{row.agency}\t{printable(item.name)}")
    if not any(row.pending for row in rows):
        err.print("nothing pending")


@ledger_app.command("done")
def ledger_done(
    agency: str = typer.Argument(..., help="The agency (one with a spec, shipped or in <workdir>/agencies/)."),
    file: str = typer.Argument(..., help="The asset's file name (assets/) or its upload-ready name (packs/ready/)."),
    workdir: Optional[Path] = WorkdirOpt,
) -> None:
    """Record by hand that FILE is uploaded to AGENCY (the key is the SHA-256 of its source image)."""
    from tasks.core.workdir import Workdir
    from tasks.stores.pending import mark_done

    wd_path = resolve_workdir(workdir)
    if agency not in (known := workdir_agencies(wd_path)):
        raise ConfigError(f"unknown agency {agency!r} (choose from {', '.join(known)})")
    entry = mark_done(Workdir(wd_path), agency, file)  # no such asset (BadInput): exit 2
    if entry is None:
        console.print(f"{printable(file)} is already recorded as uploaded to {agency}: nothing added", highlight=False)
    else:
        console.print(f"recorded {printable(entry.filename)} as uploaded to {agency} (sha256 {entry.sha256[:12]}…)",
                      highlight=False)


@ledger_app.command("status")
def ledger_status(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Uploads done and pending per agency."""
    from rich.table import Table

    from tasks.core.workdir import Workdir
    from tasks.stores.pending import ledger_overview

    wd_path = resolve_workdir(workdir)
    rows, state = ledger_overview(Workdir(wd_path), ledger_agencies(wd_path, None))
    table = Table("agency", "done", "pending", "held back", title=f"uploads.ledger · {printable(wd_path)}",
                  title_justify="left")
    for row in rows:
        table.add_row(row.agency, str(row.done), str(len(row.pending)), str(len(row.held_back)))
    console.print(table)
    warn_ledger_problems(state)
