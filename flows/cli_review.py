"""``microstock review``: what waits for review, and the contributor's decisions from the terminal.

Decisions go into the assets' sidecars, where the next run takes them up.
When a stock-batch run of the workdir is paused for review on the Prefect
server of ``PREFECT_API_URL``, ``approve`` (every asset) and ``reject NAME…``
answer its form through Prefect's API instead: the rejected ones are left out,
every other asset it asked about is approved, and the run goes on.
Registered on the ``microstock`` app by :mod:`flows.cli`; Prefect is imported
only inside the commands, after the environment is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tasks.core.errors import ConfigError
from tasks.core.workdir import Workdir, default_workdir

review_app = typer.Typer(help="Review before anything leaves ([review] enabled = true): list, approve, reject, reopen.",
                         no_args_is_help=True)
console = Console()
WorkdirOpt = typer.Option(None, "--workdir", help="Workdir (default: $MICROSTOCK_WORKDIR, else ./microstock-data).")


def _workdir(workdir: Optional[Path]) -> Workdir:
    """The workdir, with Prefect's environment set for it (before Prefect is imported)."""
    from tasks.orchestration.environment import set_prefect_env

    path = (workdir or default_workdir()).resolve()
    try:
        set_prefect_env(path)
    except ConfigError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}", highlight=False)
        raise typer.Exit(2)
    return Workdir(path)


def _say_missing(missing: list[str]) -> None:
    for name in missing:
        console.print(f"{name}: no such described asset: nothing recorded", highlight=False)


@review_app.command("list")
def review_list(workdir: Optional[Path] = WorkdirOpt) -> None:
    """The assets waiting for a decision, and those rejected in review."""
    from tasks.stages.review import review_overview

    waiting, rejected = review_overview(_workdir(workdir))
    for name in waiting:
        typer.echo(f"waiting\t{name}")
    for name, at in sorted(rejected.items()):
        typer.echo(f"rejected\t{name}\t{at}")
    if not waiting:
        console.print("nothing waiting for review", highlight=False)


@review_app.command("approve")
def review_approve(names: Optional[list[str]] = typer.Argument(None, help="Asset file names (none: every waiting asset)."),
                   workdir: Optional[Path] = WorkdirOpt) -> None:
    """Approve NAME… (or, without names, everything waiting — answering a paused run when one waits)."""
    from tasks.stages.review import answer_paused_run, decide, paused_review_run, review_overview

    wd = _workdir(workdir)
    paused = paused_review_run(wd)
    if paused and not names:
        answer_paused_run(paused, [])
        console.print(f"answered the paused run {paused}: every asset it asked about is approved", highlight=False)
        return
    chosen = list(names or review_overview(wd)[0])
    missing = decide(wd, chosen, "approved")
    _say_missing(missing)
    console.print(f"approved {len(chosen) - len(missing)} asset(s); the next run sends them", highlight=False)
    if paused:
        console.print(f"a run waits for review ({paused}): it asked about its own list; answer it with "
                      "`microstock review approve` (all) or `microstock review reject NAME…`", highlight=False)


@review_app.command("reject")
def review_reject(names: list[str] = typer.Argument(..., help="Asset file names to leave out for good."),
                  workdir: Optional[Path] = WorkdirOpt) -> None:
    """Reject NAME…: no CSV row, never uploaded. A paused run is answered: every other asset it asked about is approved."""
    from tasks.stages.review import answer_paused_run, decide, paused_review_run

    wd = _workdir(workdir)
    missing = decide(wd, names, "rejected")
    _say_missing(missing)
    console.print(f"rejected {len(names) - len(missing)} asset(s)", highlight=False)
    paused = paused_review_run(wd)
    if paused:
        answer_paused_run(paused, list(names))
        console.print(f"answered the paused run {paused}: these are left out, every other asset it asked about is "
                      "approved", highlight=False)


@review_app.command("reopen")
def review_reopen(names: list[str] = typer.Argument(..., help="Asset file names to ask about again."),
                  workdir: Optional[Path] = WorkdirOpt) -> None:
    """Forget the decision about NAME…: the next run asks again."""
    from tasks.stages.review import decide

    missing = decide(_workdir(workdir), names, None)
    _say_missing(missing)
    console.print(f"reopened {len(names) - len(missing)} asset(s): the next run asks about them", highlight=False)
