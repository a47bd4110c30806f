"""The one orientation a photo records, and its pixels turned upright by it.

A file may record its orientation in three places; the first found decides (EXIF before XMP, as the Metadata
Working Group's guidelines read them, and Pillow's ``getexif`` does for the first two):

1. EXIF ``Orientation``;
2. XMP ``tiff:Orientation`` in the main packet (Bridge, digiKam, Lightroom, a PNG's XMP);
3. ``tiff:Orientation`` in extended XMP (:mod:`tasks.images.xmp_extension`: a packet over 64 KB continues
   there, and a tool may move the orientation with the rest), which Pillow does not read.

The upload-ready copy, its preview and the pixel digest are all made upright here;
:mod:`tasks.images.contributor_meta` then removes every XMP copy and :func:`tasks.images.ready.clean_exif` the EXIF
one, so no reader turns the pixels a second time.
"""

from __future__ import annotations

import re
from pathlib import Path

from PIL import Image, ImageOps

from tasks.images.jpeg_segments import metadata_segments
from tasks.images.xmp_extension import pointer, read_extension

ORIENTATION = 0x0112
#: ``tiff:Orientation`` as an attribute or an element, and its value.
_XMP_ORIENTATION = re.compile(rb"""tiff:Orientation\s*(?:=\s*["']|>)\s*([1-8])\s*["'<]""")


def recorded_orientation(im: Image.Image, source: Path | bytes) -> int:
    """The orientation ``im`` (opened from ``source``, its path or its bytes) records: 1–8, 1 when none.

    The file is read again only when EXIF and the main XMP packet say nothing and the main packet names an
    extension."""
    found = im.getexif().get(ORIENTATION)
    if found is not None:
        return found if found in range(1, 9) else 1
    main = im.info.get("xmp") or b""
    if isinstance(main, str):
        main = main.encode("utf-8")
    if not pointer(main):
        return 1
    data = source.read_bytes() if isinstance(source, Path) else source
    extension = read_extension(metadata_segments(data), main).packet
    match = _XMP_ORIENTATION.search(extension)
    return int(match.group(1)) if match else 1


def make_upright(im: Image.Image, orientation: int) -> None:
    """Turn ``im``'s loaded pixels upright by ``orientation`` (:func:`recorded_orientation`), in place; the EXIF
    orientation it carried goes with it."""
    if orientation in range(2, 9):
        im.getexif()[ORIENTATION] = orientation  # what exif_transpose applies (the extension's, when it decided)
    ImageOps.exif_transpose(im, in_place=True)
