"""Captions a camera or phone writes on its own ("OLYMPUS DIGITAL CAMERA"): no caption at all.

The list is data, each entry with where it was found: ``camera_boilerplate.toml``
next to this module. A caption is boilerplate when it is one of them as a
whole, case and runs of spaces ignored (cameras pad the field with spaces).
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

LIST = Path(__file__).with_name("camera_boilerplate.toml")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


@cache
def _captions() -> frozenset[str]:
    return frozenset(_key(entry["text"]) for entry in tomllib.loads(LIST.read_text(encoding="utf-8"))["caption"])


def is_boilerplate(text: str) -> bool:
    """True when ``text`` is a caption a camera writes by default (see the module)."""
    return bool(text.strip()) and _key(text) in _captions()
