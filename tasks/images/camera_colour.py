"""A camera's own word on its colour space, when the file carries no ICC profile.

A camera set to Adobe RGB embeds no profile. The DCF rule marks such a file
in EXIF instead: ColorSpace ``0xFFFF`` ("Uncalibrated") with the Interop IFD's
InteropIndex ``R03`` ("DCF option file (Adobe RGB)"; ``R98`` is the sRGB basic
file): exiftool's EXIF tag table, https://exiftool.org/TagNames/EXIF.html,
checked 2026-12-03. Read as sRGB, such pixels look about a fifth less
saturated than they were shot.

The profile they are read with is one a package ships, never one made in code:
``compatibleWithAdobeRGB1998.icc`` of Debian's ``icc-profiles-free`` ("Compatible
with Adobe RGB (1998)", zlib licence, by Kai-Uwe Behrmann and others; `make test`
installs it). Where it is not installed the pixels stay as they are (tagged
sRGB, as before) and the log says why.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

from PIL import Image

log = logging.getLogger(__name__)

#: Debian's icc-profiles-free puts it here.
ADOBE_RGB_COMPATIBLE = Path("/usr/share/color/icc/compatibleWithAdobeRGB1998.icc")
_EXIF_IFD, _INTEROP_IFD = 0x8769, 0xA005
_COLOR_SPACE, _INTEROP_INDEX = 0xA001, 0x0001
_UNCALIBRATED = 0xFFFF


def shot_in_adobe_rgb(exif: Image.Exif) -> bool:
    """True when EXIF says the camera recorded Adobe RGB (ColorSpace uncalibrated, InteropIndex R03)."""
    try:
        space = exif.get_ifd(_EXIF_IFD).get(_COLOR_SPACE)
        index = exif.get_ifd(_INTEROP_IFD).get(_INTEROP_INDEX)
    except (OSError, ValueError, KeyError, TypeError):  # a damaged pointer says nothing
        return False
    return space == _UNCALIBRATED and str(index or "").strip("\x00 ") == "R03"


@cache
def adobe_rgb_profile() -> bytes | None:
    """The Adobe RGB–compatible profile's bytes, or None (logged once) when the package is not installed."""
    try:
        return ADOBE_RGB_COMPATIBLE.read_bytes()
    except OSError:
        log.warning("%s is missing (Debian's icc-profiles-free): in-camera Adobe RGB photos are delivered with "
                    "their pixels unconverted, so they look less saturated", ADOBE_RGB_COMPATIBLE)
        return None


def assumed_profile(im: Image.Image, exif: Image.Exif) -> bytes | None:
    """The profile ``im``'s pixels are in when it embeds none but its camera said Adobe RGB; else None."""
    if im.info.get("icc_profile") or not shot_in_adobe_rgb(exif):
        return None
    return adobe_rgb_profile()
