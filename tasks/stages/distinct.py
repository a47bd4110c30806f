"""Help alike assets stand apart: a title and keyword order unlike the rest of their group, from the describer.

For each asset the last similarity check found alike another (any agency, at
or above its threshold) — except the first of its motif, which keeps its
words — the describer is asked again with the metadata of the others of its
group (the assets of the batch with the same motif, and the nearest one,
from the portfolio when it was uploaded earlier): Gemini gets them in its
prompt (``tasks.gemini.describer.distinct_note``), the offline describer
reorders the asset's keywords and adds two of them to its title
(``tasks.stages.offline_describer.distinct_from``). Only the title and keywords of
the sidecar change; what they were and became is kept in
``reports/distinct.json`` for the review form. The next run packs the asset
again (its embedded metadata changed) and checks it again.
"""

from __future__ import annotations

import logging

from tasks.agencies.keyword_rules import apply_keyword_rules
from tasks.agencies.protected import ProtectedNames
from tasks.core.errors import BadInput
from tasks.core.printable import printable
from tasks.core.records import Asset, Metadata, Sidecar, read_sidecar, update_sidecar
from tasks.core.settings import KeywordSettings
from tasks.core.workdir import Workdir
from tasks.stages.offline_describer import Describer
from tasks.stores.portfolio import read_portfolio
from tasks.stores.similar_risks import Risk, read_risks, record_distinct

log = logging.getLogger(__name__)


def alike_assets(risks: dict[str, dict[str, Risk]]) -> list[str]:
    """The assets found alike another at some agency, except the first of each motif, and those named like an
    earlier one (``Risk.same_words_as``), by name."""
    return sorted({n for per in risks.values() for n, r in per.items()
                   if (r.risky and n != r.motif) or r.same_words_as})


def _metadata_of(wd: Workdir, name: str, sha256: str, portfolio: dict) -> Metadata | None:
    sidecar = read_sidecar(wd.sidecar(name))
    if sidecar is not None and (not sha256 or sidecar.asset_id == sha256):
        return sidecar.metadata
    sig = portfolio.get(sha256)
    return Metadata(title=sig.title, description=sig.title, keywords=list(sig.keywords)) if sig else None


def group_of(wd: Workdir, name: str, risks: dict[str, dict[str, Risk]], portfolio: dict) -> list[Metadata]:
    """The metadata of the others of ``name``'s group, at every agency: the batch's with its motif, and its nearest."""
    found: dict[str, Metadata] = {}
    for per in risks.values():
        mine = per.get(name)
        if mine is not None and mine.same_words_as and mine.same_words_as not in found:
            found[mine.same_words_as] = _metadata_of(wd, mine.same_words_as, "", portfolio)
        if mine is None or not mine.risky:
            continue
        for other, r in per.items():
            if other != name and r.risky and r.motif == mine.motif and other not in found:
                found[other] = _metadata_of(wd, other, "", portfolio)
        if mine.nearest and mine.nearest not in found:
            found[mine.nearest] = _metadata_of(wd, mine.nearest, mine.nearest_sha256, portfolio)
    return [md for md in found.values() if md is not None]


def make_distinct(wd: Workdir, describer: Describer, names: list[str] | None = None,
                  rules: KeywordSettings = KeywordSettings()) -> dict[str, dict]:
    """New title and keyword order for ``names`` (default: :func:`alike_assets`); name -> ``{before, after}``.
    The new keywords pass the contributor's keyword ``rules`` as every describer's answer does
    (:mod:`tasks.agencies.keyword_rules`): what they take out joins the sidecar's ``removed_keywords``, with why.

    Raises BadInput for a name that is no described asset; the describer's errors reach the caller.
    """
    risks = read_risks(wd)
    portfolio = read_portfolio(wd)
    done: dict[str, dict] = {}
    try:
        _set_apart_each(wd, describer, names, risks, portfolio, done, rules)
    finally:  # the before/after of each asset already rewritten is kept even when a later one fails
        if done:  # added to the file as it is now, under its lock: another process's changes are kept
            record_distinct(wd, done)
    return done


def _set_apart_each(wd: Workdir, describer: Describer, names: list[str] | None, risks, portfolio,
                    done: dict[str, dict], rules: KeywordSettings) -> None:
    """Rewrite each asset's title and keyword order, recording it in ``done`` as soon as its sidecar is saved."""
    protected = ProtectedNames.of(rules)
    for name in names if names is not None else alike_assets(risks):
        sidecar: Sidecar | None = read_sidecar(wd.sidecar(name))
        if sidecar is None or sidecar.name != name:
            raise BadInput(name, f"no described asset {name} in {wd.assets}")
        others = group_of(wd, name, risks, portfolio)
        if not others:
            continue
        before = sidecar.metadata
        new = describer.set_apart(Asset(name=name, asset_id=sidecar.asset_id, path=wd.assets / name), before, others)
        new, changes = apply_keyword_rules(new, rules, protected)
        for line in changes.lines():
            log.info("%s: keywords: %s", printable(name), line)
        if not _retitle(wd, sidecar, new):
            log.warning("%s: its sidecar changed while it was being set apart (its words edited, or the asset "
                        "described again): left as it is now, the new title not written", printable(name))
            continue
        done[name] = {"before": {"title": before.title, "keywords": before.keywords[:10]},
                      "after": {"title": new.title, "keywords": new.keywords[:10]}, "by": describer.name}
        log.info("%s: retitled %r → %r", printable(name), before.title, new.title)


def _retitle(wd: Workdir, was: Sidecar, new: Metadata) -> bool:
    """Write ``new``'s title and keywords (and the keywords its rules removed, with why) into the sidecar as it
    is now (a review decision made meanwhile is kept); False, nothing written, when its asset or its title and
    keywords are no longer ``was``'s."""
    def retitled(now: Sidecar) -> Sidecar | None:
        if now.asset_id != was.asset_id or (now.metadata.title, now.metadata.keywords) != (
                was.metadata.title, was.metadata.keywords):
            return None
        removed = {**now.metadata.removed_keywords, **new.removed_keywords}  # what the rules took out, with why
        return now.model_copy(update={"metadata": now.metadata.model_copy(
            update={"title": new.title, "keywords": new.keywords, "removed_keywords": removed})})

    written = update_sidecar(wd.sidecar(was.name), retitled)
    return written is not None and written.metadata.title == new.title and written.metadata.keywords == new.keywords
