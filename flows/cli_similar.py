"""``microstock similar``: the similarity risk of the last pack, setting alike assets apart, releasing.

``list`` prints each asset's risk per agency as the last run's pack stage
found it (``reports/similarity.json``). ``distinct [NAME…]`` asks the
describer for titles and keyword orders unlike the rest of each asset's
group (``tasks.stages.distinct``). ``release NAME…`` keeps the contributor's
decision in ``similar_released.json`` (docs/INTERFACE.md): the next run
sends the asset to the agencies that held it back (or those given with
``--agency``) however alike it is. A name that is no described asset
changes nothing: ``release`` says so for each such name and exits with
status 1 once it has released the others; ``distinct`` refuses to start
(BadInput, status 2, as every command given an unusable input). Registered
on the ``microstock`` app by :mod:`flows.cli`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import FAILED, WorkdirOpt, console, print_error, resolve_workdir
from tasks.core.printable import printable

similar_app = typer.Typer(help="Similar-content risk: list it, set alike assets apart, release a held-back asset.",
                          no_args_is_help=True)


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
            console.print(f"{printable(name)}  {agency}  {printable(risk_words(risk))}", highlight=False,
                          soft_wrap=True, markup=False)


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
            print_error(f"{exc.reason}: nothing changed")
            code = FAILED
            continue
        console.print(f"{printable(name)}: released for {', '.join(done)}; the next run sends it there" if done
                      else f"{printable(name)}: nothing to release (not held back, or released already)",
                      highlight=False)
    raise typer.Exit(code)


@similar_app.command("distinct")
def similar_distinct(names: Optional[list[str]] = typer.Argument(None, help="Asset file names (default: every "
                                                                 "asset found alike, but the first of each motif)."),
                     workdir: Optional[Path] = WorkdirOpt) -> None:
    """Ask the describer (Gemini with a key, else offline) for titles and keyword orders unlike the group's."""
    from tasks.core.secrets import gemini_key, openai_api_key
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.orchestration.environment import set_prefect_env
    from tasks.stages.distinct import make_distinct
    from tasks.stages.offline_describer import select_describer

    wd = Workdir(resolve_workdir(workdir))
    set_prefect_env(wd.root, start_server=False)  # a Secret-block key is read from a running server only
    settings = load_settings(wd.config_path())
    describer = select_describer(settings, gemini_key(), openai_api_key())
    done = make_distinct(wd, describer, names or None, settings.keywords)  # no described asset of a name: BadInput
    if not done:
        console.print("nothing to set apart: no asset of the last run was found alike another")
    for name, change in done.items():
        console.print(f"{printable(name)}: «{change['before']['title']}» → «{change['after']['title']}»; "
                      "first keywords now "
                      f"{', '.join(change['after']['keywords'])}", highlight=False, soft_wrap=True, markup=False)
    if done:
        console.print("the next run packs them again and checks them again", highlight=False)
