"""What the upload-ready JPEG carries: one title, description and keyword list for every agency at once.

The agencies read the embedded XMP/IPTC (Adobe Stock first; an agency without a CSV reads nothing else), so
these values pass the same rules as the CSV rows (:mod:`tasks.agencies.rows`), the strictest of them;
:mod:`tasks.images.embed` writes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from tasks.agencies.disclosure import without_terms
from tasks.agencies.protected import ProtectedNames
from tasks.agencies.spec import AgencySpec, TextRule
from tasks.agencies.text import clean_cell, prepare, shorten
from tasks.core.records import Metadata

#: Only cleaned: the description's rule in the embedded fields.
_PLAIN = TextRule()


class EmbeddedFields(BaseModel):
    """Title, description and keywords for the XMP/IPTC of the upload-ready JPEG."""

    model_config = ConfigDict(frozen=True)

    title: str
    description: str
    keywords: tuple[str, ...]


def embedded_fields(metadata: Metadata, specs: Iterable[AgencySpec],
                    names: ProtectedNames | None = None) -> EmbeddedFields:
    """The values one upload-ready JPEG carries for every agency in ``specs``.

    One file goes to every agency, so the strictest limits apply: the title
    and description are cleaned and shortened at a word boundary to the
    smallest limit (kept whole when no boundary fits: the CSV row is what the
    agency validates), keywords are cleaned, de-duplicated and capped at the
    smallest maximum, in their order; the title is rewritten by every agency's
    title rules at once (:meth:`TextRule.rewriting_of_all`), so it is never
    looser than the strictest CSV; an AI-generated asset's title and keywords
    lose every agency's ``ai.forbidden_terms``; with ``names`` (the run's protected
    names) keywords naming one go, as described and once cleaned, as from the rows (an editorial asset keeps
    them). A title or description naming one is kept: the rows of the agencies that refuse it hold the asset
    back (:func:`tasks.agencies.rows.build_row`'s ``embedded``).
    """
    specs = list(specs)

    def limit(values: Iterable[int | None]) -> int | None:
        found = [v for v in values if v is not None]
        return min(found) if found else None

    def text(raw: str, fallback: str, max_chars: int | None, rule: TextRule = _PLAIN) -> str:
        value = prepare(rule, raw) or prepare(rule, fallback)
        return (shorten(value, max_chars) or value) if max_chars else value

    strictest = TextRule.rewriting_of_all(s.title for s in specs)  # Adobe: no commas or special characters
    # an AI-generated asset's embedded title and keywords also lose the wording any of the agencies forbids
    terms = tuple(t for s in specs for t in s.ai.forbidden_terms) if metadata.ai_generated else ()
    title = text(without_terms(metadata.title, terms)[0], without_terms(metadata.description, terms)[0],
                 limit(s.title.max_chars for s in specs), strictest)
    description = text(metadata.description, metadata.title, limit(s.description.max_chars for s in specs))
    keywords: list[str] = []
    seen: set[str] = set()
    unnamed = names if names is not None and not metadata.editorial else None
    raw_keywords = unnamed.keywords_without(metadata.keywords)[0] if unnamed else metadata.keywords
    for raw in raw_keywords:
        for part in without_terms(raw, terms)[0].split(","):
            word = clean_cell(part)
            if word and word.casefold() not in seen and not (unnamed and unnamed.found_in(word)):
                seen.add(word.casefold())
                keywords.append(word)
    cap = limit(s.keywords.max for s in specs)
    return EmbeddedFields(title=title, description=description, keywords=tuple(keywords[:cap] if cap else keywords))
