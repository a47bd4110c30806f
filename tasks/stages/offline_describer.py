"""Describers: the interface, the offline describer, and choosing one.

A :class:`Describer` turns an asset into :class:`~tasks.core.records.Metadata`.
Two exist: Gemini (:mod:`tasks.gemini.describer`, when a key is set) and the
offline describer here, which writes what is honestly known without a model:
for a generated demo image its prompt (in the file's EXIF); for an ingested
file, the title, description and keywords already embedded in it (XMP, IPTC,
EXIF; for a clip its container's ``title``, ``description``/``comment`` and
``keywords`` tags, :mod:`tasks.images.clip_tags`); failing those, its file
name, marked ``from_file_name`` so that no agency gets it (the pack stage holds
it back everywhere). It never invents content.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Protocol

from tasks.core.records import Asset, Metadata
from tasks.core.settings import Settings
from tasks.gemini.ratelimit import RateLimiter
from tasks.images.clip_tags import read_clip_tags
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
    #: Its calls are Gemini's: they count against the workdir's daily request budget (``gemini.requests_per_day``)
    #: and a Prefect server's shared Gemini quota.
    gemini_quota: bool

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

    def set_apart(self, asset: Asset, metadata: Metadata, others: list[Metadata]) -> Metadata:
        """Metadata for ``asset`` (now ``metadata``) whose title and first keywords differ from ``others``,
        the assets that look like it (docs/AGENCIES.md, "Similar content"). Raises as :meth:`describe`."""
        ...

    def job_over(self, asset: Asset) -> None:
        """``asset``'s job is over, whatever its end (described, failed, left pending): let go of what its
        attempts kept for the next one (the Gemini describer: a clip uploaded to the Files API). Never raises."""
        ...


def select_describer(settings: Settings, key: str | None, openai_key: str | None) -> Describer:
    """The describer ``[describer] provider`` names: ``openai`` (with ``openai_key``, the run's ``OPENAI_API_KEY``;
    None for a local server), ``offline``; ``gemini`` (the default) when there is a Gemini ``key``, else the
    offline describer."""
    chosen = settings.describer
    if chosen.provider == "openai":
        from tasks.agencies.keyword_rules import avoided_words
        from tasks.openai_compat.describer import OpenAIDescriber  # the SDK loads only when it is used

        return OpenAIDescriber(chosen, openai_key, settings.gemini.language, avoided_words(settings.keywords))
    if key and chosen.provider == "gemini":
        from tasks.agencies.keyword_rules import avoided_words
        from tasks.gemini.describer import GeminiDescriber  # the SDK loads only when it is used

        return GeminiDescriber(settings.gemini, key, avoided_words(settings.keywords))
    return OfflineDescriber()


def sees_pictures(settings: Settings, key: str | None) -> bool:
    """Whether :func:`select_describer` chooses a describer that sees the picture (not the offline one)."""
    return settings.describer.provider == "openai" or (settings.describer.provider == "gemini" and bool(key))


_STOP = {"a", "an", "the", "of", "with", "in", "on", "at", "and", "or", "under", "over", "for", "to", "img", "dsc",
         "jpg", "png", "mp4", "mov"}


def _words(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for w in re.findall(r"[^\W\d_]{2,}", text.lower()):
        if w not in _STOP:
            seen.setdefault(w, None)
    return list(seen)


class OfflineDescriber:
    """Metadata without a model: from the generation prompt, embedded metadata (a clip's tags) or the file name."""

    name = "offline"
    model = "offline"
    limiter = None
    gemini_quota = False

    def replay_payload(self) -> dict[str, Any]:
        return {}

    def set_apart(self, asset: Asset, metadata: Metadata, others: list[Metadata]) -> Metadata:
        """Without a model: ``metadata`` reordered and retitled by :func:`distinct_from`."""
        return distinct_from(metadata, others, asset.asset_id)

    def job_over(self, asset: Asset) -> None:
        """Nothing is kept between attempts."""

    def describe(self, asset: Asset) -> Metadata:
        # each block on its own: a damaged one is a note, never a failure
        found = read_clip_tags(asset.path) if asset.is_clip else read_embedded(asset.path)
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
        return Metadata(title=title, description=description, keywords=keywords, describer=self.name, cost_usd=0.0,
                        from_file_name=not (found.title or found.description or found.keywords))


#: A distinct title stays within Adobe's 70 characters (docs/AGENCIES.md), the shortest title limit shipped.
DISTINCT_TITLE_CHARS = 70


def distinct_from(md: Metadata, others: list[Metadata], salt: str = "") -> Metadata:
    """``md`` made to differ from ``others`` without a model.

    Keywords: those fewest of the others have among their first ten come
    first; among equals the order is turned by a step taken from ``salt``
    (the asset's content id; never 0), so assets whose keywords are all
    shared still start differently from the group's first and, mostly, from
    each other. Title: the first two keywords of that order that are in no
    title of the group are added ("Sunset over a calm sea – evening,
    horizon"), within :data:`DISTINCT_TITLE_CHARS`.
    """
    shared = Counter(k.lower() for o in others for k in o.keywords[:10])
    n = len(md.keywords)
    try:
        turn = 1 + int(salt[:8], 16) % (n - 1) if n > 1 else 0
    except ValueError:
        turn = 1 if n > 1 else 0
    keywords = sorted(md.keywords[turn:] + md.keywords[:turn], key=lambda k: shared[k.lower()])
    in_titles = {w for o in [md, *others] for w in _words(o.title)}
    fresh = [k for k in keywords if not set(_words(k)) & in_titles][:2]
    while fresh and len(f"{md.title} – {', '.join(fresh)}") > DISTINCT_TITLE_CHARS:
        fresh.pop()
    title = f"{md.title} – {', '.join(fresh)}" if fresh else md.title
    return md.model_copy(update={"title": title, "keywords": keywords})
