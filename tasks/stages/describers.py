"""Describers: the interface, the offline describer, and choosing one.

A :class:`Describer` turns an asset into :class:`~tasks.core.records.Metadata`.
Two exist: Gemini (:mod:`tasks.gemini.describer`, when a key is set) and the
offline describer here, which writes what is honestly known without a model:
for a generated demo image its prompt (in the file's EXIF); for an ingested
file, the title, description and keywords already embedded in it (XMP, IPTC,
EXIF); failing those, its file name. It never invents content.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from tasks.core.records import Asset, Metadata
from tasks.core.settings import Settings
from tasks.gemini.ratelimit import RateLimiter
from tasks.images.contributor_meta import read_embedded
from tasks.images.demo import DEMO_SOFTWARE, demo_prompt_for


class Describer(Protocol):
    """Writes stock metadata for one asset."""

    #: Shown in logs and stored in the metadata (``offline``, ``gemini:<model>``).
    name: str
    #: The model behind it, stored with a parked job (``offline`` without one).
    model: str
    #: The quota every call of this describer waits for; None when it has none.
    limiter: RateLimiter | None

    def describe(self, asset: Asset) -> Metadata:
        """Return metadata for ``asset``.

        Raises only :class:`~tasks.core.errors.MicrostockError` subclasses, so the
        caller decides retry / park / stop from the class alone:
        Retry (retry), Park (park), StageStopped (stop calling, leave the rest
        pending), BadInput (reject the file). Must be safe to call from
        several threads at once.
        """
        ...

    def replay_payload(self) -> dict[str, Any]:
        """What a parked job must remember to be replayed the same way (never a key, never image bytes)."""
        ...


def select_describer(settings: Settings, key: str | None) -> Describer:
    """Gemini when there is a key, else the offline describer."""
    if key:
        from tasks.gemini.describer import GeminiDescriber  # the SDK loads only when it is used

        return GeminiDescriber(settings.gemini, key)
    return OfflineDescriber()

_STOP = {"a", "an", "the", "of", "with", "in", "on", "at", "and", "or", "under", "over", "for", "to", "img", "dsc",
         "jpg", "png"}


def _words(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for w in re.findall(r"[^\W\d_]{2,}", text.lower()):
        if w not in _STOP:
            seen.setdefault(w, None)
    return list(seen)


class OfflineDescriber:
    """Metadata without a model: from the generation prompt, embedded metadata or the file name."""

    name = "offline"
    model = "offline"
    limiter = None

    def replay_payload(self) -> dict[str, Any]:
        return {}

    def describe(self, asset: Asset) -> Metadata:
        found = read_embedded(asset.path)  # each block on its own: a damaged one is a note, never a failure
        demo = demo_prompt_for(found.description) if found.software == DEMO_SOFTWARE else None
        if demo is not None:
            return Metadata(
                title=demo.prompt,
                description=f"{demo.prompt}. Demo image drawn by the offline generator (not a photograph).",
                keywords=list(demo.keywords),
                adobe_category=demo.adobe_category,
                dreamstime_categories=list(demo.dreamstime_categories),
                category_hints=list(demo.category_hints),
                describer=self.name,
                cost_usd=0.0,
            )
        stem_words = _words(asset.path.stem.replace("_", " ").replace("-", " "))
        title = found.title or found.description or " ".join(stem_words).capitalize() or asset.path.stem
        description = found.description or found.title or title
        keywords = found.keywords or _words(f"{title} {description}") or stem_words
        return Metadata(title=title, description=description, keywords=keywords, describer=self.name, cost_usd=0.0)
