"""The similarity risk where the contributor decides: cells of ``batch-assets``, summary lines, the review form.

Everything here reads ``reports/similarity.json`` (``tasks.stores.similar_risks``)
as the last pack stage wrote it, and decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from tasks.core.printable import printable
from tasks.core.records import CLIP_EXTENSIONS, ready_name
from tasks.core.workdir import Workdir
from tasks.images.clip_poster import poster_paths
from tasks.observe.thumbnails import inline_thumbnail
from tasks.stores.portfolio import portfolio_thumb
from tasks.stores.similar_risks import Risk

#: Width of the nearest asset's inline thumbnail in the review form.
THUMB_PX = 96


def risk_words(risk: Risk) -> str:
    """``0.72 like sunset_v0.jpg (uploaded; colour 0.95, title 1.00) · held back``, or ``low (0.12)``."""
    if not risk.nearest:
        return "nothing alike"
    if not risk.risky:
        return f"low ({risk.score:.2f}, nearest {risk.nearest})"
    where = "uploaded" if risk.nearest_uploaded else "this batch"
    tail = f" · {risk.outcome}" if risk.outcome else ""
    return f"{risk.score:.2f} like {risk.nearest} ({where}; {risk.why}) · {risk.versions} versions{tail}"


def risk_cell(risks: Mapping[str, Mapping[str, Risk]], name: str) -> str:
    """One cell for an asset: its risk at each agency, the agencies that see it alike said once."""
    seen: dict[str, list[str]] = {}
    for agency, per in risks.items():
        if name in per:
            seen.setdefault(risk_words(per[name]), []).append(agency)
    if len(seen) == 1:
        return next(iter(seen))
    return "; ".join(f"{', '.join(agencies)}: {words}" for words, agencies in seen.items())


def add_risk_column(rows: list[dict[str, str]], risks: Mapping[str, Mapping[str, Risk]]) -> None:
    """``batch-assets``: a ``similar`` cell in every row once some asset is alike another (no column before)."""
    if not any(r.risky for per in risks.values() for r in per.values()):
        return
    for row in rows:
        seen = any(row["asset"] in per for per in risks.values())
        row["similar"] = risk_cell(risks, row["asset"]) if seen else ""


def summary_notes(risks: Mapping[str, Mapping[str, Risk]]) -> dict[str, str]:
    """agency -> ``2 alike (score ≥ 0.40): b.jpg ~ a.jpg 0.72, …; 1 held back, 1 released`` (agencies with any);
    two assets that are each other's nearest are shown as one pair."""
    out = {}
    for agency, per in risks.items():
        risky = sorted(((n, r) for n, r in per.items() if r.risky), key=lambda p: (-p[1].score, p[0]))
        if not risky:
            continue
        pairs = [(n, r) for n, r in risky if not (r.nearest in per and per[r.nearest].nearest == n and r.nearest < n)]
        shown = ", ".join(f"{printable(n)} ~ {printable(r.nearest)} {r.score:.2f}"
                          for n, r in pairs[:3]) + (", …" if len(pairs) > 3 else "")
        counts = [f"{sum(1 for _, r in risky if r.outcome == o)} {o}" for o in ("held back", "released")
                  if any(r.outcome == o for _, r in risky)]
        out[agency] = (f"{len(risky)} alike (score ≥ {risky[0][1].threshold:.2f}): {shown}"
                       + (f"; {', '.join(counts)}" if counts else ""))
    return out


def review_cell(wd: Workdir, risks: Mapping[str, Mapping[str, Risk]], changes: Mapping[str, dict], name: str,
                escape: Callable[[str], str], thumbnail: bool = True) -> str:
    """The review form's cell: the risk, the nearest asset's thumbnail (when ``thumbnail``) and name when it
    is alike, and the title and keywords before and after ``microstock similar distinct`` (``changes``: what
    :func:`~tasks.stores.similar_risks.read_distinct` read, once for the form); its words passed through
    ``escape``."""
    near = max((per[name] for per in risks.values() if name in per), key=lambda r: r.score, default=None)
    if near is None:
        return ""
    thumb = ""
    if near.risky and thumbnail:
        clip = Path(near.nearest).suffix.lower() in CLIP_EXTENSIONS  # a clip's thumbnail is its poster's
        kept = poster_paths(wd, near.nearest)[1] if clip else wd.packs / "thumbs" / ready_name(near.nearest)
        thumb = inline_thumbnail(kept if kept.exists() else portfolio_thumb(wd, near.nearest_sha256), THUMB_PX,
                                 "nearest")
        thumb += " " if thumb else ""
    return thumb + escape(risk_cell(risks, name) + _changed_words(changes.get(name)))


def _changed_words(change: dict | None) -> str:
    if not change:
        return ""
    b, a = change["before"], change["after"]
    return (f" · set apart by {change.get('by', '?')}: title «{b['title']}» → «{a['title']}», first keywords "
            f"«{', '.join(b['keywords'][:5])}» → «{', '.join(a['keywords'][:5])}»")
