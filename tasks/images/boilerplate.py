"""Captions a camera or phone writes on its own ("OLYMPUS DIGITAL CAMERA"): no caption at all.

The list is data, each entry with where it was found: ``camera_boilerplate.toml``
next to this module. A caption is boilerplate when it is one of them as a
whole, case and runs of spaces ignored (cameras pad the field with spaces), or
when it is a path on the camera's card: it starts with one of the list's path
prefixes (``DCIM\\``), case ignored, and has no space.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

LIST = Path(__file__).with_name("camera_boilerplate.toml")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


@cache
def _lists() -> tuple[frozenset[str], tuple[str, ...]]:
    data = tomllib.loads(LIST.read_text(encoding="utf-8"))
    return (frozenset(_key(entry["text"]) for entry in data["caption"]),
            tuple(entry["prefix"].casefold() for entry in data.get("path", [])))


def is_boilerplate(text: str) -> bool:
    """True when ``text`` is a caption a camera writes by default (see the module)."""
    captions, prefixes = _lists()
    key = _key(text)
    return bool(key) and (key in captions or (" " not in key and key.startswith(prefixes)))
