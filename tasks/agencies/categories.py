"""An asset's categories for one agency: the describer's own ids when the table has them, else mapped from hints.

The table, the hint words and the ids never chosen from a hint are the spec's
``[categories]``; an agency written by name (Shutterstock) gets the table's
text in its cell, one written by number (Adobe, Dreamstime) the id.
"""

from __future__ import annotations

import re

from tasks.agencies.spec import Categories
from tasks.core.records import Metadata


def _forms(word: str) -> set[str]:
    """A word and its plausible singulars, so "skies" meets "sky" and "sunsets" meets "sunset"."""
    w = word.casefold().strip()
    forms = {w}
    if w.endswith("ies") and len(w) > 4:
        forms.add(w[:-3] + "y")
    if w.endswith("es") and len(w) > 3:
        forms.add(w[:-2])
    if w.endswith("s") and not w.endswith("ss") and len(w) > 2:
        forms.add(w[:-1])
    return forms


def hint_to_id(categories: Categories, hint: str) -> int | None:
    """The category id a describer hint maps to: the hints table first, then sub-category names and their words."""
    forms = _forms(hint)
    hints = {k.casefold(): v for k, v in categories.hints.items()}
    for f in sorted(forms):
        if f in hints:
            return hints[f]
    for cid, name in categories.table.items():
        if cid in categories.no_auto:
            continue
        sub = name.rsplit("/", 1)[-1].casefold().strip()
        parts = {sub, *(p.strip() for p in re.split(r"&|,|\band\b", sub) if p.strip())}
        if any(forms & _forms(p) for p in parts):
            return cid
    return None


def choose(categories: Categories, md: Metadata, agency: str) -> tuple[list[int], list[tuple[str, str]]]:
    """Up to ``categories.count`` valid ids, and the fixes (rule, message) made on the way."""
    if categories.field == "adobe_category":
        raw = [md.adobe_category] if md.adobe_category is not None else []
    elif categories.field == "dreamstime_categories":
        raw = list(md.dreamstime_categories)
    else:
        raw = []
    fixes: list[tuple[str, str]] = []
    ids: list[int] = []
    for cid in raw:
        if cid in categories.table and cid not in ids:
            ids.append(cid)
    invalid = [cid for cid in raw if cid not in categories.table]
    if invalid:
        fixes.append(("category.out_of_range", f"dropped category id(s) {invalid}: not in the {agency} table"))
    if len(ids) > categories.count:
        fixes.append(("category.count", f"kept the first {categories.count} of {len(ids)} categories"))
        ids = ids[: categories.count]
    if not ids:
        for hint in md.category_hints:
            cid = hint_to_id(categories, hint)
            if cid is not None and cid not in ids and len(ids) < categories.count:
                ids.append(cid)
        if ids:
            fixes.append(("category.mapped", f"category mapped from hints {md.category_hints} to {ids}"))
        elif raw or md.category_hints:
            fixes.append(("category.empty",
                          "no category could be mapped; left empty (choose one in the agency's portal)"))
    return ids, fixes


def cell(categories: Categories, cid: int) -> str:
    """What a chosen category looks like in the CSV: its id, or its name from the table."""
    return str(cid) if categories.write == "id" else categories.table[cid]
