"""Is this file an image we can use? One clear reason when it is not.

Runs before anything is spent on a file (a Gemini call, a pack, an upload),
so a bad file is named once and never reaches a CSV or an outbox. This module
is the one boundary where Pillow's exceptions become
:class:`~tasks.core.errors.BadInput` (:func:`pillow_errors`).

Pillow's ``MAX_IMAGE_PIXELS`` guard stays on: :func:`open_image` refuses a
decompression bomb from its header, before a pixel is decoded. Pillow itself
refuses anything over twice its limit; between its limit (≈ 89 MP) and the
largest agency maximum (Adobe's 100 MP) the image is accepted, because an
agency takes it, and above that it is refused.
"""

from __future__ import annotations

import logging
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from PIL import Image, PngImagePlugin, UnidentifiedImageError

from tasks.agencies.catalog import Catalog, catalog
from tasks.core.errors import BadInput
from tasks.core.printable import printable
from tasks.core.records import Asset
from tasks.core.workdir import Workdir
from tasks.images.formats import SUPPORTED_FORMATS, more_than_one_picture, unreadable_without_extra

log = logging.getLogger(__name__)

#: Pillow's names for a JPEG: "MPO" when its MPF index lists more images (:mod:`tasks.images.mpf`); its
#: primary image is an ordinary JPEG, and only that one is read.
JPEG_FORMATS = {"JPEG", "MPO"}
#: Extensions that look like images; anything else in a source folder is ignored.
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".gif", ".bmp", ".heic", ".heif", ".hif",
                    ".avif"}


# --- what the agencies take ------------------------------------------------------


@dataclass(frozen=True)
class ImageRules:
    """One agency's pixel and file-size rules for an upload-ready image."""

    agency: str
    min_pixels: int
    max_pixels: int | None = None
    max_bytes: int | None = None
    min_side: int | None = None
    max_side: int | None = None
    #: Versions of one motif (near-identical images) the agency takes; None: no cap.
    max_versions: int | None = None

    def broken_rule(self, width: int, height: int, size_bytes: int) -> str | None:
        """The rule an image of this size breaks, in words, or None when it passes."""
        px = width * height
        if px < self.min_pixels:
            return f"{width}×{height} = {px / 1e6:.1f} MP is below {self.agency}'s minimum of {_mp(self.min_pixels)}"
        if self.max_pixels is not None and px > self.max_pixels:
            return f"{width}×{height} = {px / 1e6:.1f} MP is above {self.agency}'s maximum of {_mp(self.max_pixels)}"
        if self.min_side is not None and min(width, height) < self.min_side:
            return f"{width}×{height}: the shorter side is below {self.agency}'s minimum of {self.min_side} px"
        if self.max_side is not None and max(width, height) > self.max_side:
            return f"{width}×{height}: the longer side is above {self.agency}'s maximum of {self.max_side} px"
        if self.max_bytes is not None and size_bytes > self.max_bytes:
            return (f"file is {size_bytes / 1e6:.1f} MB, above {self.agency}'s maximum of "
                    f"{self.max_bytes / 1e6:g} MB")
        return None


def _mp(pixels: int) -> str:
    return f"{pixels / 1e6:g} MP"


def image_rules(agency: str, wd: Workdir | None = None, known: Catalog | None = None) -> ImageRules:
    """The pixel, side and size rules of ``agency``, from its spec's ``[image]`` in ``known`` (a run's catalog),
    else in the workdir's (its own spec when it has one)."""
    limits = (known or catalog(wd)).spec(agency).image
    return ImageRules(agency, limits.min_pixels or 0, limits.max_pixels, limits.max_bytes,
                      limits.min_side, limits.max_side, max_versions=limits.max_versions_per_motif)


def all_rules() -> list[ImageRules]:
    """The rules of every shipped agency."""
    return [image_rules(name) for name in catalog().names]


def pixel_range() -> tuple[int, int]:
    """(smallest minimum, largest maximum) over every agency: outside it no agency takes the image."""
    rules = all_rules()
    return min(r.min_pixels for r in rules), max(r.max_pixels or 0 for r in rules)


# --- opening safely ---------------------------------------------------------------


@dataclass(frozen=True)
class ImageFacts:
    width: int
    height: int
    format: str
    mode: str


@contextmanager
def pillow_errors(name: str) -> Iterator[None]:
    """Turn what Pillow raises while reading ``name`` into BadInput with a plain reason."""
    try:
        yield
    except BadInput:
        raise
    except Image.DecompressionBombError as exc:
        raise BadInput(name, f"decompression bomb refused ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise BadInput(name, "not an image (the content is no JPEG, PNG, TIFF, WebP, AVIF or HEIC, whatever the "
                             "extension says)") from exc
    except MemoryError as exc:
        raise BadInput(name, "too large to decode in the memory available") from exc
    except ValueError as exc:
        if str(exc).startswith("Decompressed data too large"):  # Pillow's guard on PNG text and ICC chunks
            raise BadInput(name, f"decompression bomb refused: a PNG chunk inflates past Pillow's limit "
                                 f"({exc})") from exc
        raise BadInput(name, f"truncated or corrupt image data ({exc})") from exc
    except (OSError, SyntaxError, EOFError, IndexError, KeyError, TypeError) as exc:
        # Pillow reports truncated and corrupt streams with any of these.
        raise BadInput(name, f"truncated or corrupt image data ({exc})") from exc


#: ``warnings.catch_warnings`` swaps process-wide state: whoever swaps it holds this (one at a time).
#: Only the header is read under the lock, which takes microseconds.
WARNINGS_LOCK = threading.Lock()


def open_image(path: Path, *, max_pixels: int | None = None) -> Image.Image:
    """Open ``path`` lazily (header only) and check it before any pixel is decoded.

    Raises BadInput when the file is missing, empty, not an image, not of a
    format read (``tasks.images.formats``; HEIC without its optional reader),
    more than one picture (a multi-page TIFF), or a decompression bomb (over ``max_pixels``, by default the
    largest agency maximum, or over Pillow's own hard limit). The caller
    closes the returned image.
    """
    name = path.name
    if max_pixels is None:
        max_pixels = pixel_range()[1]
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BadInput(name, f"cannot read file ({exc.strerror})") from exc
    if size == 0:
        raise BadInput(name, "empty file (0 bytes)")
    with pillow_errors(name), WARNINGS_LOCK, warnings.catch_warnings():
        # Pillow warns (not raises) between its limit and twice its limit;
        # we decide with our own limit below, so the warning is not shown.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(path)
        except UnidentifiedImageError:
            _png_reason(path)
            if (missing := unreadable_without_extra(path)) is not None:
                raise missing from None
            raise
    fmt = im.format or "?"
    if fmt not in SUPPORTED_FORMATS:
        im.close()
        raise BadInput(name, f"unsupported format {fmt} (JPEG, PNG, TIFF, WebP, AVIF and HEIC are accepted)")
    if (several := more_than_one_picture(im, name)) is not None:
        im.close()
        raise several
    if im.width * im.height > max_pixels:
        w, h = im.size
        im.close()
        raise BadInput(name, f"decompression bomb refused: {w}×{h} = {w * h / 1e6:.0f} MP, "
                             f"above every agency's maximum ({_mp(max_pixels)})")
    return im


def _png_reason(path: Path) -> None:
    """Raise the reason Pillow's PNG reader gives for ``path`` when it is a PNG (``Image.open`` only says it
    cannot identify it); nothing when it is no PNG."""
    with open(path, "rb") as fp:
        if fp.read(8) != b"\x89PNG\r\n\x1a\n":
            return
        fp.seek(0)
        try:
            PngImagePlugin.PngImageFile(fp).close()
        except SyntaxError as exc:
            if "compression method" in str(exc):  # PNG defines one method, 0 (deflate)
                raise BadInput(path.name, f"PNG uses an unknown compression method ({exc}): re-save it "
                                          f"as PNG or JPEG from an image editor") from exc
            raise BadInput(path.name, f"a damaged PNG ({exc})") from exc


def inspect_image(path: Path, *, min_pixels: int | None = None, max_pixels: int | None = None) -> ImageFacts:
    """Open, decode and size-check ``path``; raise BadInput naming the reason.

    A JPEG is decoded at 1/8 scale (draft mode): every compressed byte is
    still read, so truncation is caught, without the full-size pixels in
    memory. The limits default to the agencies' (tests pass smaller ones).
    """
    name = path.name
    if min_pixels is None:
        min_pixels = pixel_range()[0]
    with open_image(path, max_pixels=max_pixels) as im:
        facts = ImageFacts(im.width, im.height, im.format or "?", im.mode)
        try:
            with pillow_errors(name):
                if facts.format in JPEG_FORMATS:
                    im.draft(None, (max(1, im.width // 8), max(1, im.height // 8)))
                im.load()
        except BadInput as exc:
            if "mp" in im.info:  # Pillow's copy of the MPF index: the other images are no stand-in for the first
                raise BadInput(name, f"its primary image is unusable, so there is nothing to deliver (the other "
                                     f"images its MPF index lists are never delivered): {exc.reason}") from exc
            raise
    if facts.width * facts.height < min_pixels:
        raise too_small(name, facts.width, facts.height, min_pixels)
    return facts


def too_small(name: str, width: int, height: int, min_pixels: int) -> BadInput:
    """The rejection of an image no agency takes because it has too few pixels."""
    return BadInput(name, f"too small: {width}×{height} = {width * height / 1e6:.1f} MP, "
                          f"below every agency's minimum ({_mp(min_pixels)})")


def too_small_for_all(assets: list[Asset], rules: list[ImageRules]) -> dict[str, str]:
    """asset name -> why no agency of ``rules`` takes it: fewer pixels than every one's minimum."""
    floor = min((r.min_pixels for r in rules), default=0)
    small = {}
    for asset in assets:
        try:
            with open_image(asset.path) as im:
                width, height = im.size
        except BadInput as exc:
            small[asset.name] = exc.reason
            continue
        except Exception as exc:  # one file never stops the others
            log.exception("reading %s failed", printable(asset.name))
            small[asset.name] = f"unexpected error reading it ({type(exc).__name__}: {exc}); not described"
            continue
        if width * height < floor:
            small[asset.name] = (f"too small for {', '.join(r.agency for r in rules)}: {width}×{height} = "
                                 f"{width * height / 1e6:.1f} MP, below the smallest of their minimums "
                                 f"({floor / 1e6:g} MP); not described")
    return small
