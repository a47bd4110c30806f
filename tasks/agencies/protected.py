"""Protected names: artists, characters, brands and trademarks an agency refuses in prompts and metadata.

The shipped list is data (``tasks/agencies/names/protected.toml``, with its
sources); the contributor adds names of their own (``[keywords]
protected_names``) and takes names off it (``allowed_names``). One
:class:`ProtectedNames` answers "which protected names does this text hold?".

A text is compared by its :func:`skeleton`, what is left of it once every way of writing a name around the
list is undone, so that no cleaning step afterwards (:func:`tasks.agencies.text.clean_cell` dropping an
invisible character, an agency's rule turning ``_`` or ``.`` into a space, a cut at a word boundary) can make
a name the check did not see. A name is then found as whole words, a space, an apostrophe or nothing between
its words, its own apostrophe optional, with a plural ending (``Nikes``, ``Coca-Colas``) or trailing digits
(``batman2``). What a list cannot catch is said in docs/AGENCIES.md ("Protected names").
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import regex

from tasks.agencies.text import is_wide
from tasks.core.errors import ConfigError
from tasks.core.settings import KeywordSettings

#: The category of a name the contributor added.
YOURS = "yours"

#: Characters that show nothing, removed before matching: Unicode's default-ignorables (zero-width space and
#: joiners, the soft hyphen, variation selectors, Hangul fillers, tags …), the controls, surrogates and
#: non-characters :func:`tasks.agencies.text.clean_cell` drops. Python's unicodedata has no default-ignorable
#: property; the regex module has Unicode's.
_INVISIBLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cc}\p{Cs}\p{Noncharacter_Code_Point}]+")
#: A plural ending or trailing digits after a name: "Nikes", "Coca-Colas", "batman2".
_ENDING = r"(?:e?s)?[0-9]*"


@dataclass(frozen=True)
class ProtectedName:
    """One name and what it is (``artist``, ``character``, ``brand``, or ``yours``)."""

    name: str
    category: str

    def __str__(self) -> str:
        return f"{self.name!r} ({self.category})"


@lru_cache(maxsize=4096)
def _look_alike(ch: str) -> str:
    """The ASCII letters a non-ASCII letter is made to look like, by Unicode's confusables table (UTS #39
    ``confusables.txt``, as the confusable-homoglyphs package ships it); ``ch`` itself when it looks like none.
    The table's prototype ``l`` stands for I, l and 1 alike: a capital (Greek Ι, Cyrillic І) folds to ``I``;
    its ``rn`` is the m's prototype."""
    if ch.isascii() or not ch.isalpha():
        return ch
    # imported here: the package reads its 900 kB table when imported (40 ms), which only a check needs
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(ch, greedy=True)
    ascii_forms = [g["c"] for f in found or [] for g in f["homoglyphs"] if g["c"].isascii() and g["c"].isalpha()]
    if not ascii_forms:
        return ch
    form = ascii_forms[0]
    if form == "l" and ch.isupper():
        return "I"
    return "m" if form == "rn" else form


def _space(ch: str) -> bool:
    """A character that separates words for matching: white space, ``_``, and every punctuation mark or symbol
    but the apostrophe (agencies' rules make them spaces: Adobe's title keeps only ``-`` and ``'``)."""
    return ch.isspace() or (unicodedata.category(ch)[0] in "PSZ" and ch != "'")


def skeleton(text: str) -> str:
    """What ``text`` is matched by: NFKC; invisible characters (:data:`_INVISIBLE`) removed; a space on each side of
    an East Asian wide character (where :func:`tasks.agencies.text.shorten` may cut); accents removed; look-alike
    letters of other scripts folded to the Latin ones they imitate (:func:`_look_alike`); case folded; ``_``,
    ``-`` and every other separator (:func:`_space`) one space. Typographic apostrophes become ``'``."""
    text = unicodedata.normalize("NFKC", text.replace("\u2019", "'").replace("\u2018", "'"))
    text = _INVISIBLE.sub("", "".join(" " if ch.isspace() else ch for ch in text))
    if any(is_wide(ch) for ch in text):
        text = "".join(f" {ch} " if is_wide(ch) else ch for ch in text)
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(_look_alike(ch) for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return " ".join("".join(" " if _space(ch) else ch for ch in folded).split())


def _key(text: str) -> str:
    """What two spellings of one name share: its skeleton without spaces and apostrophes."""
    return re.sub(r"[ ']+", "", skeleton(text))


def _pattern(name: str) -> str:
    """A name's words as they may stand in a skeleton: a space, an apostrophe or nothing between them (an agency's
    rule may make an apostrophe a space), its own apostrophe optional or a space."""
    return "[ ']?".join(re.escape(w).replace("'", "[' ]?") for w in skeleton(name).split(" ") if w)


class ProtectedNames:
    """A set of protected names and the one search over a text for all of them."""

    def __init__(self, names: Iterable[ProtectedName]) -> None:
        self.names: dict[str, ProtectedName] = {}
        for n in names:
            if _key(n.name):
                self.names.setdefault(_key(n.name), n)
        alternatives = sorted((_pattern(n.name) for n in self.names.values()), key=len, reverse=True)
        self._search = (re.compile(r"(?<!\w)(" + "|".join(alternatives) + ")" + _ENDING + r"(?!\w)")
                        if alternatives else None)
        #: text -> what it holds: the CSV stage asks about the same title for every agency.
        self._seen: dict[str, list[ProtectedName]] = {}

    @classmethod
    def of(cls, rules: KeywordSettings) -> "ProtectedNames":
        """The shipped list with the contributor's own names added and their allowed names taken off."""
        allowed = {_key(a) for a in rules.allowed_names}
        own = [ProtectedName(n, YOURS) for n in rules.protected_names]
        return cls(n for n in [*own, *shipped_names()] if _key(n.name) not in allowed)

    def found_in(self, text: str) -> list[ProtectedName]:
        """The protected names ``text`` holds, in the order they first appear, each once: found in its
        :func:`skeleton`, so the same answer for the text and for anything the cleaning makes of it."""
        if self._search is None or not text:
            return []
        if text in self._seen:
            return list(self._seen[text])
        found: dict[str, ProtectedName] = {}
        for match in self._search.finditer(skeleton(text)):
            name = self.names.get(re.sub(r"[ ']+", "", match.group(1)))
            if name is not None:
                found.setdefault(_key(name.name), name)
        if len(self._seen) > 100_000:  # a bound, not a policy: a long run's texts are asked about once per agency
            self._seen.clear()
        self._seen[text] = list(found.values())
        return list(found.values())

    def in_any(self, texts: list[str]) -> bool:
        """Does any of ``texts`` hold a protected name? Each is searched alone: no separator could keep two
        texts from making one name, as every separator is a space in a skeleton."""
        return any(self.found_in(t) for t in texts)

    def keywords_without(self, keywords: list[str], editorial: bool = False) -> tuple[list[str], list[str]]:
        """(the keywords that name no protected name, the ones that do), order kept: the one check of what an
        agency receives, in its CSV row (:func:`tasks.agencies.rows.build_row`) and in the upload-ready JPEG's
        XMP/IPTC (:func:`tasks.agencies.embedded.embedded_fields`) alike. An editorial asset keeps them all, as the
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
