"""Untrusted names made safe to print.

A file name is the contributor's (or whoever made the file): it may hold an
escape sequence (``\\x1b]0;…\\x07`` retitles a terminal, ``\\x1b[2J`` clears
it), a carriage return that overwrites the line, a newline that forges a
log line or breaks a markdown table, or a bidi override that shows
``gpj.exe`` as ``exe.jpg``. :func:`printable` is the one escape, applied
where a name is printed: the terminal's tables, the UI's markdown, log lines
and CLI messages that name a file.
"""

from __future__ import annotations

import os
import unicodedata

#: Invisible characters that reorder the text around them (Unicode bidi embeddings, overrides, isolates, marks).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Characters a terminal or viewer takes as a line break besides the C0 ones.
LINE_BREAKS = frozenset("\u2028\u2029")


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(name: object) -> str:
    """``name`` with every control character written out: C0 (ESC, CR, LF, TAB …), DEL and C1 as ``\\xNN``,
    bidi controls and line separators as ``\\uNNNN``; bytes that are not UTF-8 (a name read from disk as
    surrogate escapes) as ``\\xNN``. Everything else, any script and emoji, is left as it is."""
    text = str(name)
    try:
        text = os.fsencode(text).decode("utf-8", errors="backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        text = text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    if text.isprintable() and not any(ch in BIDI_CONTROLS for ch in text):
        return text
    return "".join(_escaped(ch) if unicodedata.category(ch) == "Cc" or ch in BIDI_CONTROLS or ch in LINE_BREAKS
                   else ch for ch in text)
