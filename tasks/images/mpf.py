"""JPEGs with more than one image: what their MPF index lists beyond the primary image.

A camera or phone may store more images in one ``.jpg``/``.mpo`` file and list
them in an APP2 ``MPF`` segment (CIPA DC-007, the Multi-Picture Format): the
second view of a 3D camera (Fujifilm FinePix REAL 3D, Nintendo 3DS), a depth
map, an HDR gain map, a large preview. The extra images follow the primary
image's end-of-image marker (exiftool's MPF tag notes:
https://exiftool.sourceforge.net/TagNames/MPF.html, checked 2026-12-03). The
primary image is an ordinary JPEG: it is what the upload-ready copy holds; the
others are left out, and :func:`left_out` says so in words.
"""

from __future__ import annotations

import struct
from pathlib import Path

from PIL import Image

from tasks.images.jpeg_segments import metadata_segments

MPF_HEADER = b"MPF\x00"
_APP2 = 0xE2
_NUMBER_OF_IMAGES = 0xB001
#: The metadata segments (MPF among them) come before the first scan: this much of the file holds them.
_HEAD_BYTES = 1 << 20


def listed_images(data: bytes) -> int | None:
    """How many images the MPF index of the JPEG ``data`` lists: 0 without an index, None when it is damaged."""
    for marker, payload in metadata_segments(data):
        if marker == _APP2 and payload.startswith(MPF_HEADER):
            index = Image.Exif()
            try:
                index.load(payload[len(MPF_HEADER):])
                count = index.get(_NUMBER_OF_IMAGES)
            except (SyntaxError, OSError, ValueError, KeyError, TypeError, struct.error):
                return None
            return count if isinstance(count, int) and count > 0 else None
    return 0


def left_out(path: Path) -> str | None:
    """What the upload-ready copy of the JPEG ``path`` leaves out of its MPF images, in words; None: nothing."""
    with open(path, "rb") as fp:
        count = listed_images(fp.read(_HEAD_BYTES))
    if count is None:
        return ("its MPF index (the list of the images in the file) cannot be read: only the primary image "
                "is delivered, anything stored after it is left out")
    if count > 1:
        others = count - 1
        return (f"its MPF index lists {count} images: the primary image is delivered as an ordinary JPEG, "
                f"the {others} other{'s' if others > 1 else ''} (a second view, a depth or gain map, a preview) "
                f"{'are' if others > 1 else 'is'} left out")
    return None
