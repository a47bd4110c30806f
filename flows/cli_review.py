"""``microstock review``: what waits for review, and the contributor's decisions from the terminal.

Decisions and corrections go into the assets' sidecars, where the next run
takes them up. When a stock-batch run of the workdir is paused for review on
the Prefect server of ``PREFECT_API_URL``, decisions accumulate the same way
across commands (``approve a b``, later ``reject c``): nothing is approved
that nobody approved. Once no asset is left undecided, the command that made
the last decision answers the run's form through Prefect's API and the run
goes on with those decisions; ``approve`` without names approves every asset
still waiting, and so answers it. ``edit NAME`` does not answer it (an edit
is not a decision): the paused run takes the correction up when it is
answered, and packs and writes the CSVs again for it before anything leaves.
A name that is no described asset changes nothing and exits with status 1,
with the names it is close to ("did you mean"). Rejecting an asset the
ledger records as uploaded says plainly that it cannot be unsent, and where
it went.
Registered on the ``microstock`` app by :mod:`flows.cli`; Prefect is imported
only inside the commands, after the environment is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from flows.cli_common import FAILED, WorkdirOpt, console, print_error, resolve_workdir
from tasks.core.errors import ConfigError, PermanentError
from tasks.core.printable import printable
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


def _paused_run(wd: Workdir) -> str | None:
    """The run of ``wd`` paused for review (:func:`~tasks.orchestration.review_pause.paused_review_run`); None at
    once without a server (no ``PREFECT_API_URL``): only a running server holds a paused run, and importing
    Prefect's client is ~1.3 s of CPU a command without one does not need."""
    if not os.environ.get("PREFECT_API_URL"):
        return None
    from tasks.orchestration.review_pause import paused_review_run

    return paused_review_run(wd)


def _described_or_exit(wd: Workdir, names: list[str]) -> None:
    """Exit with status 1, changing nothing, when a name is no described asset of the workdir."""
    from tasks.stages.review import not_described

    missing = not_described(wd, names)
    for name, close in missing.items():
        hint = f" — did you mean {' or '.join(close)}?" if close else ""
        print_error(f"{name}: no such described asset in {wd.assets}: nothing changed{hint}")
    if missing:
        raise typer.Exit(FAILED)


def _answer_once_all_decided(wd: Workdir, paused: str) -> None:
    """Answer the paused run when nothing it waits for is left undecided; else say what still waits."""
    from tasks.orchestration.review_pause import answer_paused_run
    from tasks.stages.review import review_overview

    still = review_overview(wd)[0]
    if still:
        console.print(f"the run {paused} waits for review: {len(still)} asset(s) not decided yet "
                      f"({', '.join(map(printable, still))}); it goes on once each one is (`microstock review "
                      "approve NAME…` / `reject NAME…`; `microstock review approve` approves all of them)",
                      highlight=False, soft_wrap=True)
        return
    refused = answer_paused_run(paused, [])  # the run keeps every decision recorded while it waited
    if refused:
        raise PermanentError(f"the paused run {paused} refused the answer: {refused}. The decisions are recorded in "
                             "the sidecars; `microstock review list` shows what waits")
    console.print(f"answered the paused run {paused}: every asset it asked about is decided, it goes on with "
                  "these decisions", highlight=False, soft_wrap=True)


@review_app.command("list")
def review_list(workdir: Optional[Path] = WorkdirOpt) -> None:
    """The assets waiting for a decision, and those rejected in review: one line each, tab-separated (state, file,
    title, where it is held back and why, keywords your rules removed; when, for a rejected one)."""
    from tasks.stages.review_list import review_list_lines

    lines = review_list_lines(_workdir(workdir))
    for line in lines:
        typer.echo(line)
    if not any(line.startswith("waiting\t") for line in lines):
        console.print("nothing waiting for review", highlight=False)


@review_app.command("approve")
def review_approve(names: Optional[list[str]] = typer.Argument(None,
                                                               help="Asset file names (none: every waiting asset)."),
                   workdir: Optional[Path] = WorkdirOpt) -> None:
    """Approve NAME… (or, without names, everything waiting). A paused run is answered once nothing it waits for
    is left undecided."""
    from tasks.stages.review import decide, review_overview

    wd = _workdir(workdir)
    chosen = list(names or review_overview(wd)[0])
    _described_or_exit(wd, chosen)
    paused = _paused_run(wd)
    decide(wd, chosen, "approved")
    if paused:
        console.print(f"approved {len(chosen)} asset(s)", highlight=False)
        _answer_once_all_decided(wd, paused)
    else:
        console.print(f"approved {len(chosen)} asset(s); the next run sends them", highlight=False)


@review_app.command("reject")
def review_reject(names: list[str] = typer.Argument(..., help="Asset file names to leave out for good."),
                  workdir: Optional[Path] = WorkdirOpt) -> None:
    """Reject NAME…: no CSV row, never uploaded from now on (what the ledger records as sent stays sent). A paused
    run is answered once nothing it waits for is left undecided; no other asset is approved by this."""
    from tasks.stages.review import already_sent, decide

    wd = _workdir(workdir)
    _described_or_exit(wd, names)
    paused = _paused_run(wd)
    decide(wd, names, "rejected")
    sent = already_sent(wd, names)
    console.print(f"rejected {len(names)} asset(s): no CSV row, not uploaded again", highlight=False)
    for name, agencies in sent.items():
        console.print(f"{printable(name)} was already uploaded to {', '.join(agencies)} (the ledger records it): "
                      "a reject cannot unsend it (microstock never deletes at an agency); it only keeps it from being "
                      "sent again", highlight=False, soft_wrap=True)
    if paused:
        _answer_once_all_decided(wd, paused)


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
    from tasks.stages.review import Correction, edit_asset

    wd = _workdir(workdir)
    if title is None and keywords is None and description is None:
        raise ConfigError("nothing to change: give --title, --keywords and/or --description")
    _described_or_exit(wd, [name])
    settings = load_settings(wd.config_path(None))
    agencies = catalog(wd).enabled(settings)
    words = None if keywords is None else [w.strip() for w in keywords.split(",") if w.strip()]
    sidecar, rows = edit_asset(wd, settings, agencies, Correction(file=name, title=title, description=description,
                                                                  keywords=words))
    changed = [f for f, v in (("title", title), ("keywords", words), ("description", description)) if v is not None]
    console.print(f"{printable(name)}: {', '.join(changed)} written to its sidecar", highlight=False)
    if sidecar.rejected:
        console.print(f"{printable(name)} was rejected in review: it gets no row and is never sent unless reopened "
                      f"(`microstock review reopen {printable(name)}`)", highlight=False)
        return
    for row in rows:
        fixed = "; ".join(f.message for f in row.fixes)
        if row.ok:
            console.print(f"  {row.agency}: gets a row" + (f" (fixed: {fixed})" if fixed else ""), highlight=False)
        else:
            why = "; ".join(f"{p.rule}: {p.message}" for p in row.problems)
            console.print(f"  {row.agency}: held back ({why})", highlight=False)
    paused = _paused_run(wd)
    if paused:
        console.print(f"the run {paused} waits for review: it takes this up when answered (`microstock review "
                      "approve`, `microstock review reject NAME…`, or the form in the Prefect UI)", highlight=False)
    else:
        console.print(_next_run_note(name), highlight=False)


def _next_run_note(name: str) -> str:
    """What the next run does with a corrected asset: an image is packed again (its embedded metadata); a clip is
    never packed (sent as it is), so only its CSV rows carry the correction."""
    from tasks.core.records import CLIP_EXTENSIONS

    if Path(name).suffix.lower() in CLIP_EXTENSIONS:
        return ("the next run writes the CSVs with it before anything is sent (a clip is not packed: its file is sent "
                "unchanged, the correction is in its CSV rows)")
    return "the next run packs it and writes the CSVs with it before anything is sent"
