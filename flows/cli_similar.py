"""``microstock similar``: the similarity risk of the last pack, and releasing a held-back asset.

``list`` prints each asset's risk per agency as the last run's pack stage
found it (``reports/similarity.json``). ``release NAME…`` keeps the
contributor's decision in ``similar_released.json`` (docs/INTERFACE.md): the
next run sends the asset to the agencies that held it back (or those given
with ``--agency``) however alike it is. A name that is no described asset
changes nothing and exits with status 1. Registered on the ``microstock``
app by :mod:`flows.cli`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import WorkdirOpt, console, err, resolve_workdir

similar_app = typer.Typer(help="Similar-content risk: list it, release a held-back asset.", no_args_is_help=True)


@similar_app.command("list")
def similar_list(workdir: Optional[Path] = WorkdirOpt) -> None:
    """Each asset's risk per agency, as the last run's pack stage found it: ``NAME  AGENCY  RISK`` a line."""
    from tasks.core.workdir import Workdir
    from tasks.observe.similar_view import risk_words
    from tasks.stores.similar_risks import read_risks

    risks = read_risks(Workdir(resolve_workdir(workdir)))
    if not risks:
        console.print("no similarity report yet: run a batch first")
        return
    for agency, per in risks.items():
        for name, risk in per.items():
            console.print(f"{name}  {agency}  {risk_words(risk)}", highlight=False, soft_wrap=True, markup=False)


@similar_app.command("release")
def similar_release(names: list[str] = typer.Argument(..., help="Asset file names."),
                    agency: Optional[list[str]] = typer.Option(None, "--agency", help="Only for this agency "
                                                               "(repeatable; default: where it was held back)."),
                    workdir: Optional[Path] = WorkdirOpt) -> None:
    """Send held-back assets anyway: the decision is kept for the next runs."""
    from tasks.core.errors import BadInput
    from tasks.core.workdir import Workdir
    from tasks.stages.similarity import release_held_back

    wd = Workdir(resolve_workdir(workdir))
    code = 0
    for name in names:
        try:
            done = release_held_back(wd, name, agency or None)
        except BadInput as exc:
            err.print(f"[red]error:[/red] {exc.reason}: nothing changed", highlight=False, soft_wrap=True)
            code = 1
            continue
        console.print(f"{name}: released for {', '.join(done)}; the next run sends it there" if done
                      else f"{name}: nothing to release (not held back, or released already)", highlight=False)
    raise typer.Exit(code)
