"""One source image → the upload-ready JPEG, its preview and its thumbnail.

Upload-ready means what every agency accepts: an upright, 8-bit RGB JPEG in
sRGB with the sRGB profile embedded, alpha flattened onto white, location
EXIF removed (by default) and camera EXIF kept, the contributor's XMP and IPTC
kept (:mod:`tasks.images.contributor_meta`), never upsampled. A JPEG that
needs no pixel change keeps its compressed data byte for byte (only the
metadata segments are replaced); anything else is decoded, repaired and
encoded once.

Everything here is a pure function of the input bytes and the settings: the
same input gives the same output bytes (no dates, no random ids; the sRGB
profile's creation date is fixed). Pillow errors become BadInput through
:func:`tasks.images.inspect.pillow_errors`.
"""

from __future__ import annotations

import math
import struct
import threading
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import NamedTuple

from PIL import Image, ImageCms

from tasks.core.settings import PackSettings
from tasks.images.camera_colour import assumed_profile
from tasks.images.contributor_meta import kept_segments
from tasks.images.inspect import JPEG_FORMATS, open_image, pillow_errors
from tasks.images.jpeg_segments import exif_segment, icc_segment, replace_metadata
from tasks.images.pixels import flatten_on_white, has_alpha
from tasks.images.similar import Looks, looks
from tasks.images.upright import ORIENTATION, make_upright, recorded_orientation


def _fixed_date(icc: bytes) -> bytes:
    # ICC header bytes 24–35 hold the creation date and time; LittleCMS stamps
    # "now". A fixed date keeps every file we write byte-identical across runs.
    return icc[:24] + struct.pack(">6H", 2000, 1, 1, 0, 0, 0) + icc[36:]


#: The sRGB profile embedded in every file we write.
SRGB_ICC = _fixed_date(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())

PREVIEW_QUALITY = 85

_EXIF_IFD, _GPS_IFD, _INTEROP_IFD = 0x8769, 0x8825, 0xA005
_MAKER_NOTE = 0x927C
_PIXEL_X, _PIXEL_Y = 0xA002, 0xA003
_COLOR_SPACE, _SRGB = 0xA001, 1
#: IFD0 tags never copied: TIFF layout, the orientation (applied to the
#: pixels), and other metadata blocks (XMP, IPTC, Photoshop, ICC) that can
#: hold a location and are replaced by our own anyway.
_IFD0_DROP = {0x0100, 0x0101, 0x0102, 0x0103, 0x0106, 0x0111, ORIENTATION, 0x0115, 0x0116, 0x0117, 0x011C,
              0x0201, 0x0202, 0x02BC, 0x83BB, 0x8649, 0x8773, _EXIF_IFD, _GPS_IFD, _INTEROP_IFD}
_ICC_SPACE = {"RGB": "RGB ", "CMYK": "CMYK", "L": "GRAY"}
_MAX_EXIF = 65533  # what one JPEG APP1 segment holds
#: One full-size image decoded at a time in this process (≈ 150 MB for 24 MP
#: while it is rotated and encoded); previews and kept-pixel files, which
#: need a few MB, go on in parallel. Keeps packing under 300 MB (docs/BENCHMARKS.md).
_FULL_SIZE = threading.BoundedSemaphore(1)


# --- colour --------------------------------------------------------------------------


def _profile(icc: bytes | None) -> ImageCms.ImageCmsProfile | None:
    """The embedded profile, or None when absent or unreadable (then the pixels count as sRGB)."""
    if not icc:
        return None
    try:
        return ImageCms.ImageCmsProfile(BytesIO(icc))
    except (OSError, ImageCms.PyCMSError, ValueError, TypeError):
        return None


def _is_srgb(profile: ImageCms.ImageCmsProfile) -> bool:
    return "srgb" in (profile.profile.profile_description or "").lower()


def to_srgb(im: Image.Image, assumed_icc: bytes | None = None) -> Image.Image:
    """8-bit RGB in sRGB: 16-bit scaled down, palette expanded, alpha on white, ICC converted.

    An embedded profile other than sRGB (Adobe RGB, a CMYK press profile, a
    grey gamma) is converted to sRGB with LittleCMS; CMYK without a profile
    gets Pillow's plain conversion. ``assumed_icc``: the profile the pixels are
    in when none is embedded (:func:`tasks.images.camera_colour.assumed_profile`).
    """
    icc = im.info.get("icc_profile") or assumed_icc
    if im.mode.startswith("I;16") or im.mode == "I":
        im = im.convert("I").point(lambda v: v / 257).convert("L")
    if has_alpha(im):
        im = flatten_on_white(im)
    elif im.mode not in _ICC_SPACE:
        im = im.convert("RGB")
    profile = _profile(icc)
    if profile is not None and profile.profile.xcolor_space == _ICC_SPACE[im.mode] and not _is_srgb(profile):
        srgb = ImageCms.ImageCmsProfile(BytesIO(SRGB_ICC))
        return ImageCms.profileToProfile(im, profile, srgb, outputMode="RGB")
    return im if im.mode == "RGB" else im.convert("RGB")


# --- EXIF ------------------------------------------------------------------------------


def _read_ifd(exif: Image.Exif, tag: int) -> dict:
    try:
        return dict(exif.get_ifd(tag))
    except (OSError, ValueError, KeyError, TypeError, struct.error):  # a corrupt pointer: nothing to keep
        return {}


class _AsRead(str):
    """EXIF text that Pillow writes back as the bytes it was read from.

    Pillow reads an ASCII-typed value (Artist, Copyright, Make, LensModel …)
    as Latin-1, one character per byte, and writes it back with
    ``encode("ascii", "replace")``: every byte above 127 becomes ``?``. Tools
    write UTF-8 there (exiftool by default; docs/INTERFACE.md, "Your own photo
    library"), so the bytes are kept as they were and a reader reads back the
    same characters.
    """

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:  # the bytes read, whatever is asked
        return str.encode(self, "latin-1", "replace")


def _as_read(tags: dict) -> dict:
    return {tag: _AsRead(value) if isinstance(value, str) else value for tag, value in tags.items()}


def _writable(tags: dict) -> dict:
    """The tags whose values Pillow can write back (odd camera values are dropped, not fatal), text as read."""
    kept = {}
    for tag, value in _as_read(tags).items():
        probe = Image.Exif()
        probe[tag] = value
        try:
            probe.tobytes()
        except (OSError, ValueError, KeyError, TypeError, OverflowError, struct.error):
            continue
        kept[tag] = value
    return kept


def clean_exif(exif: Image.Exif, size: tuple[int, int], strip_location: bool) -> bytes:
    """The EXIF block for the upload-ready file (``Exif\\0\\0`` + TIFF), or b"" when nothing is left.

    Keeps camera data (Make, Model, exposure, lens, dates) from IFD0 and the
    Exif IFD; drops the orientation (the pixels are upright), the maker note
    (vendor blob with offsets that break on rewrite), the Interop IFD (its
    InteropIndex names the camera's colour space, no longer the file's), the
    embedded thumbnail, and — when ``strip_location`` — the GPS IFD. Pixel
    dimensions are set to ``size`` and ColorSpace to sRGB.
    """
    out = Image.Exif()
    for tag, value in _writable({t: v for t, v in exif.items() if t not in _IFD0_DROP}).items():
        out[tag] = value
    sub = {t: v for t, v in _read_ifd(exif, _EXIF_IFD).items() if t not in (_MAKER_NOTE, _INTEROP_IFD)}
    if sub:
        sub[_PIXEL_X], sub[_PIXEL_Y] = size
        sub[_COLOR_SPACE] = _SRGB  # what every upload-ready file is (a camera's "Uncalibrated" was converted)
        out[_EXIF_IFD] = _writable(sub)
    if not strip_location:
        gps = _writable(_read_ifd(exif, _GPS_IFD))
        if gps:
            out[_GPS_IFD] = gps
    if not len(out):
        return b""
    data = out.tobytes()
    return data if len(data) <= _MAX_EXIF else b""


# --- the three files ------------------------------------------------------------------


@dataclass(frozen=True)
class ReadyImage:
    """The upload-ready JPEG (before the embedded XMP/IPTC) and its size."""

    jpeg: bytes
    width: int
    height: int
    #: False when the source's compressed data was kept byte for byte.
    reencoded: bool
    #: The size before enlarging, when the image was upscaled to a minimum.
    upscaled_from: tuple[int, int] | None = None


def _keeps_pixels(im: Image.Image, orientation: int, assumed_icc: bytes | None) -> bool:
    """A JPEG that is already upright RGB in sRGB (or untagged, with no camera saying otherwise) needs no new
    encode."""
    if im.format not in JPEG_FORMATS or im.mode != "RGB" or orientation in range(2, 9) or assumed_icc:
        return False
    profile = _profile(im.info.get("icc_profile"))
    return profile is None or _is_srgb(profile)


def _encode(im: Image.Image, quality: int, exif: bytes = b"", *, full: bool = False) -> bytes:
    buf = BytesIO()
    # Upload-ready files keep full chroma (4:4:4); previews use the default 4:2:0.
    # No optimize=True: libjpeg would then hold every DCT coefficient (≈ 144 MB at 24 MP).
    extra = {"subsampling": 0} if full else {}
    im.save(buf, "JPEG", quality=quality, icc_profile=SRGB_ICC, exif=exif, **extra)
    return buf.getvalue()


def ready_jpeg(path: Path, settings: PackSettings, min_pixels: int = 0) -> ReadyImage:
    """The upload-ready JPEG of ``path``; BadInput when the file cannot be read whole.

    With ``min_pixels``, an image with fewer pixels is enlarged (LANCZOS,
    aspect kept) to at least that many: only when the contributor chose
    ``pack.upscale_to_minimum`` (docs/AGENCIES.md says what agencies think of it).
    """
    with open_image(path) as im, pillow_errors(path.name):
        exif = im.getexif()
        source = path.read_bytes()
        # the contributor's XMP and IIM
        kept = kept_segments(source, im.info.get("xmp"), settings.strip_location, path.name)
        assumed = assumed_profile(im, exif)
        orientation = recorded_orientation(im, source)
        if _keeps_pixels(im, orientation, assumed) and im.width * im.height >= min_pixels:
            meta = [icc_segment(SRGB_ICC), *kept]
            exif_bytes = clean_exif(exif, im.size, settings.strip_location)
            if exif_bytes:
                meta.insert(0, exif_segment(exif_bytes))
            return ReadyImage(replace_metadata(source, meta), im.width, im.height, reencoded=False)
        del source
        with _FULL_SIZE:
            im.load()
            make_upright(im, orientation)
            upright_exif = im.getexif()
            rgb = to_srgb(im, assumed)
            if rgb is not im:
                im.close()  # frees the source pixels before the encode
            before = rgb.size
            if rgb.width * rgb.height < min_pixels:
                rgb = rgb.resize(enlarged(rgb.size, min_pixels), Image.Resampling.LANCZOS)
            exif_bytes = clean_exif(upright_exif, rgb.size, settings.strip_location)
            jpeg = _encode(rgb, settings.jpeg_quality, exif_bytes, full=True)
            if kept:
                meta = [icc_segment(SRGB_ICC), *kept]
                jpeg = replace_metadata(jpeg, [exif_segment(exif_bytes), *meta] if exif_bytes else meta)
            return ReadyImage(jpeg, rgb.width, rgb.height, reencoded=True,
                              upscaled_from=before if rgb.size != before else None)


def enlarged(size: tuple[int, int], min_pixels: int) -> tuple[int, int]:
    """``size`` scaled up, aspect kept, to the smallest size with at least ``min_pixels`` pixels."""
    w, h = size
    scale = math.sqrt(min_pixels / (w * h))
    return math.ceil(w * scale), math.ceil(h * scale)


def fit(size: tuple[int, int], long_side: int) -> tuple[int, int]:
    """``size`` scaled so its long side is ``long_side``; never larger than ``size``."""
    w, h = size
    scale = min(1.0, long_side / max(w, h))
    return max(1, round(w * scale)), max(1, round(h * scale))


class Previews(NamedTuple):
    """A preview and a thumbnail JPEG, and what the image looks like (:func:`tasks.images.similar.looks`)."""

    preview: bytes
    thumb: bytes
    looks: Looks


def preview_jpegs(path: Path, preview_px: int, thumbnail_px: int) -> Previews:
    """Preview and thumbnail JPEGs of ``path`` (upright, sRGB), and its perceptual hash.

    A JPEG is decoded at reduced scale (``Image.draft``: the smallest 1/2,
    1/4 or 1/8 that is still at least the preview size), so the full-size
    pixels are never in memory. Every compressed byte is still read, so a
    truncated file fails here with BadInput. The hashes are taken from the
    preview, so they cost no decode of their own.
    """
    with open_image(path) as im, pillow_errors(path.name):
        if im.format in JPEG_FORMATS:
            im.draft("RGB", fit(im.size, preview_px))
        assumed = assumed_profile(im, im.getexif())
        orientation = recorded_orientation(im, path)
        im.load()
        make_upright(im, orientation)
        rgb = to_srgb(im, assumed)
    preview = rgb.resize(fit(rgb.size, preview_px), Image.Resampling.LANCZOS) if max(rgb.size) > preview_px else rgb
    thumb = preview.resize(fit(preview.size, thumbnail_px), Image.Resampling.LANCZOS)
    return Previews(_encode(preview, PREVIEW_QUALITY), _encode(thumb, PREVIEW_QUALITY), looks(preview))
