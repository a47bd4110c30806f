"""Text fixes every agency needs, each deterministic: same input, same output.

- :func:`clean_cell` makes a value safe in any CSV cell: one line, no control
  characters, whitespace collapsed, no leading ``= + - @`` (so no spreadsheet
  runs it as a formula).
- :func:`shorten` cuts at a word boundary, never inside a word.
- :func:`first_non_latin` finds a letter outside the Latin script (Vecteezy takes English only).
- :func:`remove_terms` takes words an agency forbids out of a text (Adobe: "generative AI" in titles).
- :func:`prepare` rewrites a title or description by its rule (:class:`tasks.agencies.spec.TextRule`).
"""

from __future__ import annotations

import re
import unicodedata

from tasks.agencies.spec import TextRule

#: A cell starting with one of these is run as a formula by spreadsheets.
FORMULA_CHARS = "=+-@"
#: Joiners that scripts need (Persian, Indic, emoji sequences); other format characters are dropped.
_KEPT_FORMAT = {"\u200c", "\u200d"}
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_STOP = re.compile(r" ([.,])")
#: Trailing characters removed after a cut, so a shortened text never ends in a dangling separator.
_CUT_TRAIL = " ,;:-–—/&"


def _dropped(ch: str) -> bool:
    """Control, format (but the joiners), surrogate and non-characters: invisible, or invalid in XML."""
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Cs") or (cat == "Cf" and ch not in _KEPT_FORMAT):
        return True
    code = ord(ch)
    return cat == "Cn" and (0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE)


def clean_cell(value: str) -> str:
    """One clean line: NFC, line breaks and whitespace runs → one space, control, format and
    non-characters dropped, ends stripped, leading formula characters removed. Idempotent."""
    text = _SPACES.sub(" ", value)
    if any(_dropped(ch) for ch in text):
        text = "".join(ch for ch in text if not _dropped(ch))
    text = _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()
    while text and text[0] in FORMULA_CHARS:
        text = text[1:].lstrip()
    return text


def is_wide(ch: str) -> bool:
    """East Asian wide characters (CJK, kana, hangul, most emoji): text in these scripts may break between any two."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _boundary(text: str, i: int) -> bool:
    """Is there a word boundary between ``text[i-1]`` and ``text[i]``? Never before a combining
    mark or around a joiner (that would split one visible character)."""
    if unicodedata.category(text[i]).startswith("M") or text[i] in _KEPT_FORMAT or text[i - 1] in _KEPT_FORMAT:
        return False
    return text[i] == " " or text[i - 1] == " " or is_wide(text[i - 1]) or is_wide(text[i])


def shorten(text: str, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters at a word boundary (trailing separators
    dropped), or None when no boundary leaves a non-empty text. Text within the limit is returned as is."""
    if len(text) <= limit:
        return text
    for i in range(limit, 0, -1):
        if _boundary(text, i):
            cut = text[:i].rstrip(_CUT_TRAIL)
            if cut:
                return cut
    return None


def first_non_latin(text: str) -> str:
    """The first letter outside the Latin script, or "" (digits and punctuation do not count)."""
    return next(
        (ch for ch in text if unicodedata.category(ch).startswith("L") and "LATIN" not in unicodedata.name(ch, "")),
        "",
    )


def keep_punctuation(text: str, allowed: str) -> str:
    """Punctuation and symbols other than ``allowed`` become spaces (typographic apostrophes become ``'``);
    no space is left before a kept ``.`` or ``,``."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        out.append(" " if cat[0] in "PS" and ch not in allowed else ch)
    return _SPACE_BEFORE_STOP.sub(r"\1", _SPACES.sub(" ", "".join(out)))


def capitalize_first(text: str) -> str:
    """The first character upper-cased (``ß`` becomes ``SS``; run before shortening)."""
    return text[:1].upper() + text[1:]


def remove_terms(text: str, terms: tuple[str, ...]) -> str:
    """``text`` without any of ``terms`` (whole words, case-insensitive; a space in a term also matches a
    hyphen, so "AI generated" takes "AI-generated"), the gaps and separators left behind tidied."""
    patterns = [re.compile(r"(?<!\w)" + r"[\s\-]+".join(words) + r"(?!\w)", re.IGNORECASE)
                for words in ([re.escape(w) for w in re.split(r"[\s\-]+", t.strip()) if w] for t in terms) if words]
    out, before = text, None
    while out != before:  # until none is left: removing one can join the halves of another
        before = out
        for pattern in patterns:
            out = pattern.sub(" ", out)
    if out == text:
        return text
    out = re.sub(r"\s+([,;:.!?])", r"\1", _SPACES.sub(" ", out))  # "sea , city" → "sea, city"
    out = re.sub(r"([,;:])(\s*[,;:])+", r"\1", out)  # separators left side by side → one
    return out.strip().strip(_CUT_TRAIL).strip()


def prepare(rule: TextRule, raw: str) -> str:
    """``raw`` cleaned (:func:`clean_cell`), the rule's removed characters and disallowed punctuation spaces, the
    first letter upper-cased when the rule says so; limits and rejections are the caller's."""
    text = clean_cell(raw)
    for ch in rule.remove_chars:
        text = text.replace(ch, " ")
    if rule.allowed_punctuation is not None:
        text = keep_punctuation(text, rule.allowed_punctuation)
    text = clean_cell(text)
    return capitalize_first(text) if rule.capitalize_first else text
