"""The contributor's keyword rules, applied to every describer's answer (offline and Gemini alike).

:func:`apply_keyword_rules` takes the keywords a describer wrote and gives
the ones the sidecar keeps, in this order of steps:

1. each keyword cleaned (one line, no control characters) and written as the
   contributor's preferred word when it is one of its synonyms
   (``[keywords] vocabulary``);
2. the excluded ones (``[keywords] excluded``) and every keyword holding a
   protected name (:mod:`tasks.agencies.protected`) taken out, each kept with
   why in the metadata's ``removed_keywords`` (shown in review and
   ``batch-assets``);
3. near-repeats taken out: a keyword that differs from an earlier one only in
   case or a plural ending (``Cats`` after ``cat``, ``boxes`` after ``box``)
   — the first stays where it was, so the describer's relevance order holds;
4. the required ones (``[keywords] required``) not already there added after
   the first ten, so they never push out one of the ten most relevant (Adobe
   weighs those most: docs/AGENCIES.md) and survive an agency's maximum of
   ten plus their number.

Titles and descriptions are not rewritten here: one that names a protected
name holds the asset back for the agencies whose spec says so
(:mod:`tasks.agencies.rows`, ``[names]``). Each agency's minimum and maximum
count stays in its spec (``[keywords] min``/``max``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tasks.agencies.protected import ProtectedNames
from tasks.agencies.text import clean_cell
from tasks.core.records import Metadata
from tasks.core.settings import KeywordSettings

#: The keywords an agency weighs most (Adobe: "The first 10 keywords will have the most weight").
FIRST_KEYWORDS = 10


def _singular(word: str) -> str:
    """A plural ending cut: ``boxes`` → ``box``, ``cities`` → ``city``, ``cats`` → ``cat`` (not ``glass``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def repeat_key(keyword: str) -> str:
    """What a keyword and its near-repeats share: lower case, each word's plural ending cut."""
    return " ".join(_singular(w) for w in re.split(r"[\s\-]+", keyword.casefold()) if w)


@dataclass
class KeywordChanges:
    """What the rules changed in one asset's keywords (shown in the describe log)."""

    replaced: dict[str, str] = field(default_factory=dict)
    excluded: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    #: Every keyword taken out (excluded or naming a protected name) -> why: the sidecar's ``removed_keywords``.
    removed: dict[str, str] = field(default_factory=dict)
    repeats: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        said = []
        if self.replaced:
            said.append("vocabulary: " + ", ".join(f"{a} → {b}" for a, b in self.replaced.items()))
        if self.excluded:
            said.append("excluded: " + ", ".join(self.excluded))
        if self.protected:
            said.append("removed (protected names): " + ", ".join(self.protected))
        if self.repeats:
            said.append("near-repeats removed: " + ", ".join(self.repeats))
        if self.added:
            said.append("required added: " + ", ".join(self.added))
        return said


def avoided_words(rules: KeywordSettings) -> tuple[str, ...]:
    """What the Gemini describer is told never to write: every protected name, then the excluded keywords."""
    return (*ProtectedNames.of(rules).listed(), *rules.excluded)


def apply_keyword_rules(metadata: Metadata, rules: KeywordSettings,
                        names: ProtectedNames) -> tuple[Metadata, KeywordChanges]:
    """``metadata`` with its keywords after the contributor's rules (module docstring), and what changed.

    An editorial asset keeps keywords that name brands (Shutterstock: trademarks are "generally acceptable"
    in editorial titles and keywords, docs/AGENCIES.md); every other rule applies to it too.
    """
    preferred = {s.casefold(): clean_cell(word) for word, synonyms in rules.vocabulary.items() for s in synonyms}
    excluded = {repeat_key(e) for e in rules.excluded}
    changes = KeywordChanges()
    check_names = not metadata.editorial and names.in_any([*metadata.keywords, *preferred.values()])
    kept: list[str] = []
    seen: set[str] = set()
    for raw in metadata.keywords:
        word = clean_cell(raw)
        if not word:
            continue
        if word.casefold() in preferred:
            changes.replaced[word] = preferred[word.casefold()]
            word = preferred[word.casefold()]
        key = repeat_key(word)
        if key in excluded:
            changes.excluded.append(word)
            changes.removed[word] = "excluded"
        elif check_names and (found := names.found_in(word)):
            changes.protected.append(word)
            changes.removed[word] = "protected name " + ", ".join(str(n) for n in found)
        elif key in seen:
            changes.repeats.append(word)
        else:
            seen.add(key)
            kept.append(word)
    for word in (clean_cell(r) for r in rules.required):
        if word and repeat_key(word) not in seen:
            seen.add(repeat_key(word))
            changes.added.append(word)
    keywords = [*kept[:FIRST_KEYWORDS], *changes.added, *kept[FIRST_KEYWORDS:]]
    removed = {**metadata.removed_keywords, **changes.removed}  # the rules run again on a sidecar: none forgotten
    return metadata.model_copy(update={"keywords": keywords, "removed_keywords": removed}), changes


def removed_words(removed: Mapping[str, str]) -> str:
    """The sidecar's ``removed_keywords`` in words, as review and ``batch-assets`` show them:
    ``nike: protected name 'Nike' (brand); stock: excluded``; "" when none."""
    return "; ".join(f"{word}: {why}" for word, why in removed.items())
