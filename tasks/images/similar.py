"""Near-duplicates: what an image looks like, as two perceptual hashes and a colour layout.

Agencies refuse a flood of near-identical submissions (Adobe: "don't submit
more than three significant versions of a single motif"), which is what a
batch generated from a few prompts produces. :func:`dhash` is the difference
hash of an image's brightness gradients: 64 bits that stay nearly the same
under noise, recompression, a small crop or a colour shift, and differ for
another scene. Two images whose hashes differ in at most ``pack.similar_max_distance``
bits are versions of one motif whatever else differs.

:func:`phash` (a DCT hash of the 32×32 brightness: the sign of its lowest
8×8 frequencies against their median) keeps the coarse shape of the picture:
on the labelled set (docs/BENCHMARKS.md) a crop moves it more than dHash
(12–17 bits against 6–13), but two different scenes stay further apart
(20 bits and more, dHash 9), so it separates better between. :func:`colour_layout`
is the mean colour of a 4×4 grid: it is what stays when a generator draws the
same prompt again with another seed (the shapes move, the palette and where
it sits do not), and what a colour or brightness shift changes (the hashes
keep those). :func:`looks` takes all
three from one image; ``tasks.images.likeness`` turns two of them (and the
assets' titles and keywords) into one score. :func:`same_picture` tells one
picture saved twice (re-encoded, another format, scaled) from a version of it
(a crop, a retouch, another frame), on the portfolio's small thumbnails.

The pack stage computes them from the preview it decodes anyway (a few
hundred pixels), so hashing adds no decode of its own.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageChops, ImageStat, UnidentifiedImageError

#: 9×8 brightness samples give 8×8 = 64 left-to-right gradients.
_W, _H = 9, 8
#: pHash: a 32×32 brightness grid, its 8×8 lowest DCT frequencies.
_N, _K = 32, 8
_COS = [[math.cos(math.pi * (2 * x + 1) * u / (2 * _N)) for x in range(_N)] for u in range(_K)]
#: The colour layout's grid (4×4 cells, RGB: 48 bytes).
_GRID = 4


def dhash(im: Image.Image) -> int:
    """The 64-bit difference hash of ``im`` (any mode, any size)."""
    grey = im.convert("L").resize((_W, _H), Image.Resampling.BOX)
    px = grey.tobytes()
    bits = 0
    for y in range(_H):
        row = px[y * _W:(y + 1) * _W]
        for x in range(_W - 1):
            bits = (bits << 1) | (row[x] > row[x + 1])
    return bits


def phash(im: Image.Image) -> int:
    """The 64-bit DCT hash of ``im``: bit set where a low frequency is above the median of the 64.

    Pure Python (no numpy among the project's dependencies): only the 8 lowest
    frequencies of each row and column are computed, about 10,000 products.
    The DC term (the mean brightness) is replaced by 0 before the median, so a
    brightness shift alone does not move the hash.
    """
    px = im.convert("L").resize((_N, _N), Image.Resampling.BOX).tobytes()
    rows = [[sum(c * v for c, v in zip(cos, px[y * _N:(y + 1) * _N], strict=True)) for cos in _COS]
            for y in range(_N)]  # rows[y][u]
    coeffs = [sum(c * rows[y][u] for y, c in enumerate(cos)) for cos in _COS for u in range(_K)]  # [v*8 + u]
    coeffs[0] = 0.0
    median = sorted(coeffs)[len(coeffs) // 2]
    bits = 0
    for c in coeffs:
        bits = (bits << 1) | (c > median)
    return bits


def colour_layout(im: Image.Image) -> bytes:
    """The mean RGB colour of each cell of a 4×4 grid over ``im``, row by row (48 bytes)."""
    return im.convert("RGB").resize((_GRID, _GRID), Image.Resampling.BOX).tobytes()


def colour_difference(a: bytes, b: bytes) -> float:
    """How far two colour layouts are apart: the mean absolute difference of their 48 values, 0–255."""
    if len(a) != len(b):
        raise ValueError(f"colour layouts of {len(a)} and {len(b)} values")
    return sum(map(abs, map(operator.sub, a, b))) / max(1, len(a))  # C loops: a third of a generator's time


@dataclass(frozen=True)
class Looks:
    """What one image looks like, from its preview: two hashes and a colour layout."""

    dhash: int
    phash: int
    colour: bytes

    def as_manifest(self) -> dict[str, str]:
        """The pack manifest's fields (hex), next to the ``dhash`` it always had."""
        return {"dhash": f"{self.dhash:016x}", "phash": f"{self.phash:016x}", "colour": self.colour.hex()}

    @classmethod
    def from_manifest(cls, entry: Mapping) -> "Looks | None":
        """The looks kept in a manifest entry (or a portfolio line); None when any field is missing."""
        try:
            return cls(int(entry["dhash"], 16), int(entry["phash"], 16), bytes.fromhex(entry["colour"]))
        except (KeyError, TypeError, ValueError):
            return None


def looks(im: Image.Image) -> Looks:
    """dHash, pHash and colour layout of ``im`` (the pack stage passes the preview)."""
    return Looks(dhash(im), phash(im), colour_layout(im))


#: Two kept thumbnails (:func:`small_thumbnail`) show the same picture when their pixels, scaled to one size,
#: are this close: a PSNR of at least ``SAME_PICTURE_PSNR`` dB over the whole and no 8 × 8 block whose mean
#: difference is over ``SAME_PICTURE_BLOCK`` (0–255). Chosen on the labelled set of ``bench.duplicate_bench``
#: (docs/BENCHMARKS.md, "One picture however it was saved"): re-encodings, PNG and WebP copies and scalings
#: above, crops of 5 % and more, retouches and other frames below.
SAME_PICTURE_PSNR = 35.0
SAME_PICTURE_BLOCK = 10.0
#: Aspect ratios further apart than this are two framings, never one picture (a crop of one side).
_SAME_ASPECT = 0.02
_BLOCK = 8


def picture_difference(a: Image.Image, b: Image.Image) -> tuple[float, float]:
    """How far two small copies of pictures are apart: (PSNR in dB, the largest mean difference of an 8 × 8 block,
    0–255), ``b`` scaled to ``a``'s size; (0, 255) when their aspect ratios differ (another framing)."""
    ra, rb = a.width / a.height, b.width / b.height
    if abs(ra - rb) > _SAME_ASPECT * ra:
        return 0.0, 255.0
    a, b = a.convert("RGB"), b.convert("RGB").resize(a.size, Image.Resampling.BOX)
    diff = ImageChops.difference(a, b)
    mse = sum(r * r for r in ImageStat.Stat(diff).rms) / 3
    psnr = 99.0 if mse == 0 else 10 * math.log10(255 * 255 / mse)
    blocks = diff.resize((max(1, a.width // _BLOCK), max(1, a.height // _BLOCK)), Image.Resampling.BOX)
    worst = max(high for _low, high in blocks.getextrema())
    return psnr, float(worst)


def same_picture(a: Image.Image, b: Image.Image) -> bool:
    """Whether two kept thumbnails show the same picture however it was saved (re-encoded, another format,
    scaled, other metadata), not a crop, a retouch or another frame of it (:data:`SAME_PICTURE_PSNR`)."""
    psnr, worst = picture_difference(a, b)
    return psnr >= SAME_PICTURE_PSNR and worst <= SAME_PICTURE_BLOCK


def distance(a: int, b: int) -> int:
    """How many of the 64 bits differ."""
    return (a ^ b).bit_count()


#: Long side of the small copy of a thumbnail the portfolio keeps (≈ 3 KB: 60 MB for 20,000 assets); what
#: :func:`same_picture` compares, so a change of size or quality moves its measured line.
KEPT_THUMB_PX = 96


def small_thumbnail(path: Path) -> bytes | None:
    """A 96 px JPEG of the image at ``path`` (a packed thumbnail), or None when it cannot be read."""
    try:
        with Image.open(path) as im:
            im.thumbnail((KEPT_THUMB_PX, KEPT_THUMB_PX))
            buf = BytesIO()
            im.convert("RGB").save(buf, "JPEG", quality=75)
    except (OSError, UnidentifiedImageError):
        return None
    return buf.getvalue()
