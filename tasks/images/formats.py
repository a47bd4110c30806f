"""The picture formats a contributor's ``--source`` may hold, and the reasons one is refused.

JPEG (and MPO), PNG, TIFF (8 and 16 bit, with or without an ICC profile),
WebP and AVIF are read by Pillow itself. HEIC/HEIF, an iPhone's default, is
read through ``pillow-heif`` when it is installed: an optional extra
(``pip install 'prefect-microstock[heif]'``), because its wheels bundle
libheif with x265 and are GPL-2 licensed (docs/AGENCIES.md, "Formats"). With
the extra missing, a HEIC file is refused naming what to install. Every format
is delivered as an upload-ready sRGB JPEG (``tasks.images.ready``); no agency
takes HEIC, WebP or AVIF.

A file with more than one picture is refused with its reason: which page of a
multi-page TIFF (a scan's pages, a layered export) is the picture cannot be
told, nor which frame of an animation. An MPO's primary image is an ordinary
JPEG and stays accepted (``tasks.images.mpf``), and a HEIF's primary image is
the photo (pillow-heif opens it).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, features

from tasks.core.errors import BadInput

try:  # the optional extra: GPL-2 wheels, never a dependency of the project
    import pillow_heif
except ImportError:  # pragma: no cover - which branch runs depends on the environment
    HEIF_READER = False
else:
    pillow_heif.register_heif_opener()
    HEIF_READER = True

#: Pillow's names of the formats read (``HEIF`` only with the extra).
SUPPORTED_FORMATS = {"JPEG", "MPO", "PNG", "TIFF", "WEBP", "AVIF", "HEIF"}
#: What the contributor installs to read HEIC/HEIF.
HEIF_EXTRA = "pip install 'prefect-microstock[heif]' (pillow-heif; its wheels are GPL-2)"
_HEIF_EXTENSIONS = {".heic", ".heif", ".hif"}


def unreadable_without_extra(path: Path) -> BadInput | None:
    """The refusal of a HEIC/HEIF (or AVIF) file Pillow cannot identify because its reader is not installed,
    naming what to install; None when that is not why."""
    if path.suffix.lower() in _HEIF_EXTENSIONS and not HEIF_READER:
        return BadInput(path.name, f"a HEIC/HEIF picture, and its reader is an optional extra not installed: "
                                   f"{HEIF_EXTRA}")
    if path.suffix.lower() == ".avif" and not features.check("avif"):  # Pillow's wheels read AVIF from 11.3 on
        return BadInput(path.name, "an AVIF picture, and this Pillow reads none: pip install -U 'pillow>=11.3'")
    return None


def more_than_one_picture(im: Image.Image, name: str) -> BadInput | None:
    """The refusal of a file that holds several pictures (a multi-page TIFF, an animated WebP or AVIF), with
    its reason; None for one picture (an MPO's or a HEIF's primary image is the picture: a phone's HEIC may
    hold more images, the primary is the photo shown)."""
    frames = getattr(im, "n_frames", 1)
    if frames <= 1 or im.format in ("MPO", "HEIF"):
        return None
    if im.format == "TIFF":
        return BadInput(name, f"a multi-page TIFF ({frames} pages): which page is the picture cannot be told; "
                              "save the page you mean as a TIFF or JPEG of its own")
    return BadInput(name, f"an animated {im.format} ({frames} frames): a still picture is one frame; "
                          "export the frame you mean as a JPEG")
