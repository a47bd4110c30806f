"""Pixel facts every image path shares: is there transparency, and flattening it onto white.

Agencies take no transparency, and Gemini is sent a plain JPEG: the one
rule for both is to paint transparent pixels on white.
"""

from __future__ import annotations

from PIL import Image

#: Modes that carry an alpha channel.
ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})


def has_alpha(im: Image.Image) -> bool:
    """True when ``im`` has transparent pixels to flatten (an alpha channel or a transparency key)."""
    return im.mode in ALPHA_MODES or (im.mode in ("P", "L", "RGB") and "transparency" in im.info)


def flatten_on_white(im: Image.Image) -> Image.Image:
    """``im`` with its transparency painted onto white: ``L`` for grey images, ``RGB`` otherwise."""
    grey = im.mode in ("L", "LA", "La")
    src = im.convert("LA" if grey else "RGBA")
    out = Image.new("L" if grey else "RGB", im.size, "white")
    out.paste(src.convert(out.mode), mask=src.getchannel("A"))
    return out


def rgb_on_white(im: Image.Image) -> Image.Image:
    """``im`` as 8-bit RGB, transparency flattened onto white."""
    if has_alpha(im):
        im = flatten_on_white(im)
    return im if im.mode == "RGB" else im.convert("RGB")
