"""``microstock review``: what waits for review, and the contributor's decisions from the terminal.

Decisions and corrections go into the assets' sidecars, where the next run
takes them up. When a stock-batch run of the workdir is paused for review on
the Prefect server of ``PREFECT_API_URL``, ``approve`` (every asset) and
``reject NAME…`` answer its form through Prefect's API instead: the rejected
ones are left out, every other asset it asked about is approved, and the run
goes on. ``edit NAME`` does not answer it (an edit is not a decision about
the other assets): the paused run takes the correction up when it is
answered, and packs and writes the CSVs again for it before anything leaves.
A name that is no described asset changes nothing and exits with status 1.
Registered on the ``microstock`` app by :mod:`flows.cli`; Prefect is imported
only inside the commands, after the environment is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from flows.cli_common import WorkdirOpt, console, err, fail, resolve_workdir
from tasks.core.workdir import Workdir

review_app = typer.Typer(help=escape("Review before anything leaves ([review] enabled = true): list, approve, reject, "
                                     "edit, reopen."),
                         no_args_is_help=True)


def _workdir(workdir: Optional[Path]) -> Workdir:
    """The workdir, with Prefect's environment set for it (before Prefect is imported)."""
    from tasks.orchestration.environment import set_prefect_env

    path = resolve_workdir(workdir)
    set_prefect_env(path, start_server=False)  # a run paused for review is only on a running server
    return Workdir(path)


def _described_or_exit(wd: Workdir, names: list[str]) -> None:
    """Exit with status 1, changing nothing, when a name is no described asset of the workdir."""
    from tasks.stages.review import not_described

    missing = not_described(wd, names)
    for name in missing:
        err.print(f"[red]error:[/red] {name}: no such described asset in {wd.assets}: nothing changed",
                  highlight=False, soft_wrap=True)
    if missing:
        raise typer.Exit(1)


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
def review_approve(names: Optional[list[str]] = typer.Argument(None,
                                                               help="Asset file names (none: every waiting asset)."),
                   workdir: Optional[Path] = WorkdirOpt) -> None:
    """Approve NAME… (or, without names, everything waiting — answering a paused run when one waits)."""
    from tasks.orchestration.review_pause import answer_paused_run, paused_review_run
    from tasks.stages.review import decide, review_overview

    wd = _workdir(workdir)
    paused = paused_review_run(wd)
    if paused and not names:
        refused = answer_paused_run(paused, [])
        if refused:
            fail(f"the paused run {paused} refused the answer: {refused}", code=1)
        console.print(f"answered the paused run {paused}: every asset it asked about is approved", highlight=False)
        return
    chosen = list(names or review_overview(wd)[0])
    _described_or_exit(wd, chosen)
    decide(wd, chosen, "approved")
    console.print(f"approved {len(chosen)} asset(s); the next run sends them", highlight=False)
    if paused:
        console.print(f"a run waits for review ({paused}): it asked about its own list; answer it with "
                      "`microstock review approve` (all) or `microstock review reject NAME…`", highlight=False)


@review_app.command("reject")
def review_reject(names: list[str] = typer.Argument(..., help="Asset file names to leave out for good."),
                  workdir: Optional[Path] = WorkdirOpt) -> None:
    """Reject NAME…: no CSV row, never uploaded. A paused run is answered: every other asset it asked about is
    approved."""
    from tasks.orchestration.review_pause import answer_paused_run, paused_review_run
    from tasks.stages.review import decide

    wd = _workdir(workdir)
    _described_or_exit(wd, names)
    paused = paused_review_run(wd)
    if paused:  # the run decides and records: a name it is not waiting for refuses the whole answer
        refused = answer_paused_run(paused, list(names))
        if refused:
            fail(f"the paused run {paused} refused the answer, nothing changed: {refused}. "
                 "`microstock review list` shows what waits", code=1)
        console.print(f"answered the paused run {paused}: these are left out, every other asset it asked about is "
                      "approved", highlight=False)
        return
    decide(wd, names, "rejected")
    console.print(f"rejected {len(names)} asset(s)", highlight=False)


@review_app.command("reopen")
def review_reopen(names: list[str] = typer.Argument(..., help="Asset file names to ask about again."),
                  workdir: Optional[Path] = WorkdirOpt) -> None:
    """Forget the decision about NAME…: the next run asks again."""
    from tasks.stages.review import decide

    wd = _workdir(workdir)
    _described_or_exit(wd, names)
    decide(wd, names, None)
    console.print(f"reopened {len(names)} asset(s): the next run asks about them", highlight=False)


@review_app.command("edit")
def review_edit(name: str = typer.Argument(..., help="The asset's file name."),
                title: Optional[str] = typer.Option(None, "--title", help="The new title."),
                keywords: Optional[str] = typer.Option(None, "--keywords",
                                                       help="The new keywords, comma-separated, most important first."),
                description: Optional[str] = typer.Option(None, "--description", help="The new description."),
                workdir: Optional[Path] = WorkdirOpt) -> None:
    """Correct NAME's title, keywords and/or description, checked against each enabled agency's rules.

    Written to the sidecar as the paused run's form writes its corrections; the run that sends the asset packs
    it and writes the CSVs again first. A paused run is not answered: it takes the correction up when it is.
    """
    from tasks.agencies.catalog import catalog
    from tasks.core.settings import load_settings
    from tasks.orchestration.review_pause import paused_review_run
    from tasks.stages.review import Correction, edit_asset

    wd = _workdir(workdir)
    if title is None and keywords is None and description is None:
        fail("nothing to change: give --title, --keywords and/or --description")
    _described_or_exit(wd, [name])
    settings = load_settings(wd.config_path(None))
    agencies = catalog(wd).enabled(settings)
    words = None if keywords is None else [w.strip() for w in keywords.split(",") if w.strip()]
    sidecar, rows = edit_asset(wd, settings, agencies, Correction(file=name, title=title, description=description,
                                                                  keywords=words))
    changed = [f for f, v in (("title", title), ("keywords", words), ("description", description)) if v is not None]
    console.print(f"{name}: {', '.join(changed)} written to its sidecar", highlight=False)
    if sidecar.rejected:
        console.print(f"{name} was rejected in review: it gets no row and is never sent unless reopened "
                      f"(`microstock review reopen {name}`)", highlight=False)
        return
    for row in rows:
        fixed = "; ".join(f.message for f in row.fixes)
        if row.ok:
            console.print(f"  {row.agency}: gets a row" + (f" (fixed: {fixed})" if fixed else ""), highlight=False)
        else:
            why = "; ".join(f"{p.rule}: {p.message}" for p in row.problems)
            console.print(f"  {row.agency}: held back ({why})", highlight=False)
    paused = paused_review_run(wd)
    if paused:
        console.print(f"the run {paused} waits for review: it takes this up when answered (`microstock review "
                      "approve`, `microstock review reject NAME…`, or the form in the Prefect UI)", highlight=False)
    else:
        console.print("the next run packs it and writes the CSVs with it before anything is sent", highlight=False)
