"""Protected names: artists, characters, brands and trademarks an agency refuses in prompts and metadata.

The shipped list is data (``tasks/agencies/names/protected.toml``, with its
sources); the contributor adds names of their own (``[keywords]
protected_names``) and takes names off it (``allowed_names``). One
:class:`ProtectedNames` answers "which protected names does this text hold?":
whole words, case and accents ignored, a space, a hyphen or nothing between a
name's words alike, an apostrophe optional. What a list cannot catch is said
in docs/AGENCIES.md ("Protected names").
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from tasks.core.errors import ConfigError
from tasks.core.settings import KeywordSettings

#: The category of a name the contributor added.
YOURS = "yours"


@dataclass(frozen=True)
class ProtectedName:
    """One name and what it is (``artist``, ``character``, ``brand``, or ``yours``)."""

    name: str
    category: str

    def __str__(self) -> str:
        return f"{self.name!r} ({self.category})"


def _fold(text: str) -> str:
    """Lower case without accents, typographic apostrophes as ``'``."""
    decomposed = unicodedata.normalize("NFKD", text.replace("\u2019", "'").replace("\u2018", "'"))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def _key(text: str) -> str:
    """What two spellings of one name share: folded, without spaces, hyphens and apostrophes."""
    return re.sub(r"[\s\-']+", "", _fold(text))


def _pattern(name: str) -> str:
    words = [w for w in re.split(r"[\s\-]+", _fold(name).strip()) if w]
    return r"[\s\-]*".join(re.escape(w).replace("'", "'?") for w in words)


class ProtectedNames:
    """A set of protected names and the one search over a text for all of them."""

    def __init__(self, names: Iterable[ProtectedName]) -> None:
        self.names: dict[str, ProtectedName] = {}
        for n in names:
            if _key(n.name):
                self.names.setdefault(_key(n.name), n)
        alternatives = sorted((_pattern(n.name) for n in self.names.values()), key=len, reverse=True)
        self._search = re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)") if alternatives else None
        #: text -> what it holds: the CSV stage asks about the same title for every agency.
        self._seen: dict[str, list[ProtectedName]] = {}

    @classmethod
    def of(cls, rules: KeywordSettings) -> "ProtectedNames":
        """The shipped list with the contributor's own names added and their allowed names taken off."""
        allowed = {_key(a) for a in rules.allowed_names}
        own = [ProtectedName(n, YOURS) for n in rules.protected_names]
        return cls(n for n in [*own, *shipped_names()] if _key(n.name) not in allowed)

    def found_in(self, text: str) -> list[ProtectedName]:
        """The protected names ``text`` holds, in the order they first appear, each once."""
        if self._search is None or not text:
            return []
        if text in self._seen:
            return list(self._seen[text])
        found: dict[str, ProtectedName] = {}
        for match in self._search.finditer(_fold(text)):
            name = self.names.get(_key(match.group()))
            if name is not None:
                found.setdefault(_key(name.name), name)
        if len(self._seen) > 100_000:  # a bound, not a policy: a long run's texts are asked about once per agency
            self._seen.clear()
        self._seen[text] = list(found.values())
        return list(found.values())

    def in_any(self, texts: list[str]) -> bool:
        """Does any of ``texts`` hold a protected name? One search over all of them (``|`` never joins two
        texts into one name)."""
        return bool(self.found_in("|".join(texts)))

    def keywords_without(self, keywords: list[str], editorial: bool = False) -> tuple[list[str], list[str]]:
        """(the keywords that name no protected name, the ones that do), order kept: the one check of what an
        agency receives, in its CSV row (:func:`tasks.agencies.rows.build_row`) and in the upload-ready JPEG's
        XMP/IPTC (:func:`tasks.agencies.rows.embedded_fields`) alike. An editorial asset keeps them all, as the
        describe stage's rules do (:func:`tasks.agencies.keyword_rules.apply_keyword_rules`)."""
        if editorial or not self.in_any(keywords):
            return keywords, []
        gone = [k for k in keywords if self.found_in(k)]
        return [k for k in keywords if k not in gone], gone

    def listed(self) -> list[str]:
        """Every name, as written in the list (for the describe prompt)."""
        return [n.name for n in self.names.values()]


@lru_cache(maxsize=1)
def shipped_names() -> tuple[ProtectedName, ...]:
    """The shipped list, by category; ConfigError when the file is broken."""
    origin = "tasks/agencies/names/protected.toml"
    try:
        data = tomllib.loads((resources.files(__package__) / "names" / "protected.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{origin}: cannot read: {exc}") from exc
    if not all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in data.values()):
        raise ConfigError(f"{origin}: each category must be a list of names")
    return tuple(ProtectedName(name, category) for category, names in data.items() for name in names)


def check_prompts(prompts: Iterable[str], names: ProtectedNames) -> None:
    """ConfigError naming the first generation prompt that names a protected name, and the name: Adobe's
    generative-AI guidelines bar artists, characters and third-party IP from prompts (docs/AGENCIES.md,
    "Protected names"), so such an image is never made, nor paid for."""
    for prompt in prompts:
        if found := names.found_in(prompt):
            raise ConfigError(
                f"generate.prompts: {prompt!r} names {', '.join(str(n) for n in found)}: agencies refuse images "
                "made from prompts that name artists, characters or brands; reword it (a name that is yours to "
                "use: add it to [keywords] allowed_names)")
