"""What ``microstock review list`` says of each asset, one line each: what the review form shows, for a terminal.

A line is tab-separated: the state (``waiting`` or ``rejected``), the file, its title, where the last CSV stage
held it back and why (``reports/validation.json``: an image rule, a protected name in the title … — not the review
itself, the state says that), how many keywords the contributor's rules removed, and for a rejected asset when.
Every name and text from the contributor's files goes through :func:`tasks.core.printable.printable`.
"""

from __future__ import annotations

from tasks.core.printable import printable
from tasks.core.records import Sidecar
from tasks.core.reports import CsvReport
from tasks.core.workdir import Workdir
from tasks.stages.review import review_overview, review_sidecars
from tasks.stores.pending import last_csvs


def held_back_words(name: str, csvs: CsvReport) -> str:
    """``held back: adobe (why); dreamstime (why)`` from the CSV stage's report, or ``held back nowhere``."""
    why: dict[str, str] = {}
    for problem in csvs.problems:
        if problem.asset == name and problem.rule != "review":
            why.setdefault(problem.agency, problem.message)  # the first, as the review form shows it
    if not why:
        return "held back nowhere"
    return "held back: " + "; ".join(f"{agency} ({printable(message)})" for agency, message in why.items())


def _line(state: str, sidecar: Sidecar, csvs: CsvReport) -> str:
    md = sidecar.metadata
    removed = len(md.removed_keywords)
    return "\t".join([state, printable(sidecar.name), printable(md.title) or "(no title)",
                      held_back_words(sidecar.name, csvs),
                      f"{removed} keyword{'' if removed == 1 else 's'} removed by your rules"])


def review_list_lines(wd: Workdir) -> list[str]:
    """The waiting assets' lines, then the rejected ones' (each with when), in file-name order."""
    waiting, rejected = review_overview(wd)
    sidecars = {s.name: s for s in review_sidecars(wd)}
    csvs = last_csvs(wd)
    lines = [_line("waiting", sidecars[name], csvs) for name in waiting]
    lines += [_line("rejected", sidecars[name], csvs) + f"\t{at}" for name, at in sorted(rejected.items())]
    return lines
