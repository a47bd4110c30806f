"""Sample files for the inspect and pack tests, each made here in a few milliseconds.

Good, repairable and bad images, plus two small hand-built ICC profiles
(Adobe RGB as a matrix/TRC profile, and a CMYK press profile as an 8-bit
LUT) so colour conversion can be checked against known numbers without any
profile file from the system.
"""

from __future__ import annotations

import struct
import zlib
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageCms

MAKE, MODEL = 0x010F, 0x0110
ORIENTATION = 0x0112
EXIF_IFD, GPS_IFD = 0x8769, 0x8825
EXPOSURE_TIME, ISO, MAKER_NOTE = 0x829A, 0x8827, 0x927C


def camera_exif(orientation: int = 1, gps: bool = True) -> Image.Exif:
    """EXIF as a phone writes it: camera data, exposure, a maker note and (optionally) GPS."""
    exif = Image.Exif()
    exif[MAKE] = "Canon"
    exif[MODEL] = "EOS R5"
    exif[ORIENTATION] = orientation
    exif[EXIF_IFD] = {EXPOSURE_TIME: 0.004, ISO: 200, MAKER_NOTE: b"vendor blob"}
    if gps:
        exif[GPS_IFD] = {1: "N", 2: (35.0, 39.0, 31.0), 3: "E", 4: (139.0, 44.0, 28.0)}
    return exif


def jpeg(path: Path, size=(64, 48), colour=(200, 40, 40), *, exif: Image.Exif | None = None,
         icc: bytes | None = None, mode: str = "RGB", quality: int = 90) -> Path:
    im = Image.new(mode, size, colour)
    kwargs = {"quality": quality}
    if exif is not None:
        kwargs["exif"] = exif
    if icc is not None:
        kwargs["icc_profile"] = icc
    im.save(path, "JPEG", **kwargs)
    return path


def quadrant_jpeg(path: Path, size=(80, 40), *, orientation: int) -> Path:
    """Left half red, right half blue, stored with an EXIF orientation tag."""
    w, h = size
    im = Image.new("RGB", size, (220, 0, 0))
    im.paste((0, 0, 220), (w // 2, 0, w, h))
    im.save(path, "JPEG", quality=95, exif=camera_exif(orientation))
    return path


def png(path: Path, im: Image.Image, **kwargs) -> Path:
    im.save(path, "PNG", **kwargs)
    return path


def _png_bytes(w: int, h: int, bit_depth: int, colour_type: int, raw: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


def png_rgb16(path: Path, size=(8, 6), colour16=(65535, 32768, 0)) -> Path:
    """A 16-bit-per-channel RGB PNG (Pillow cannot write one, so the chunks are built here)."""
    w, h = size
    path.write_bytes(_png_bytes(w, h, 16, 2, (b"\x00" + struct.pack(">3H", *colour16) * w) * h))
    return path


def truncated_jpeg(path: Path, size=(64, 48)) -> Path:
    """A JPEG cut off in the middle of its scan data (header intact)."""
    im = Image.effect_noise(size, 60).convert("RGB")
    buf = BytesIO()
    im.save(buf, "JPEG", quality=95)
    data = buf.getvalue()
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


def bomb_png(path: Path, side: int = 16000) -> Path:
    """A bilevel PNG of side × side blank pixels: a few kB on disk, that Pillow refuses to open at 16000²
    (DecompressionBombError)."""
    row = bytes(1 + (side + 7) // 8)
    path.write_bytes(_png_bytes(side, side, 1, 0, row * side))
    return path


# --- ICC profiles ------------------------------------------------------------------


def _s15(v: float) -> bytes:
    return struct.pack(">i", round(v * 65536))


def _xyz(x: float, y: float, z: float) -> bytes:
    return b"XYZ \0\0\0\0" + _s15(x) + _s15(y) + _s15(z)


def _desc(text: str) -> bytes:
    ascii_ = text.encode("ascii") + b"\0"
    return b"desc\0\0\0\0" + struct.pack(">I", len(ascii_)) + ascii_ + b"\0" * 8 + b"\0\0\0" + b"\0" * 67


def _profile(device_class: bytes, space: bytes, pcs: bytes, tags: list[tuple[bytes, bytes]]) -> bytes:
    table_len = 4 + 12 * len(tags)
    offset = 128 + table_len
    entries, blobs = [], []
    for sig, data in tags:
        data += b"\0" * (-len(data) % 4)
        entries.append(sig + struct.pack(">II", offset, len(data)))
        blobs.append(data)
        offset += len(data)
    header = (struct.pack(">I", offset) + b"\0\0\0\0" + b"\x02\x10\x00\x00" + device_class + space + pcs
              + struct.pack(">6H", 2000, 1, 1, 0, 0, 0) + b"acsp" + b"\0" * 24
              + b"\0\0\0\0" + _s15(0.9642) + _s15(1.0) + _s15(0.8249) + b"\0" * 48)
    assert len(header) == 128
    return header + struct.pack(">I", len(tags)) + b"".join(entries) + b"".join(blobs)


def adobe_rgb_icc() -> bytes:
    """Adobe RGB (1998) as a matrix/TRC profile: D50-adapted primaries, gamma 563/256."""
    gamma = b"curv\0\0\0\0" + struct.pack(">IH", 1, 563)
    return _profile(b"mntr", b"RGB ", b"XYZ ", [
        (b"desc", _desc("Adobe RGB (1998) test profile")),
        (b"wtpt", _xyz(0.9642, 1.0, 0.8249)),
        (b"rXYZ", _xyz(0.60974, 0.31111, 0.01947)),
        (b"gXYZ", _xyz(0.20528, 0.62567, 0.06087)),
        (b"bXYZ", _xyz(0.14919, 0.06322, 0.74457)),
        (b"rTRC", gamma), (b"gTRC", gamma), (b"bTRC", gamma),
    ])


def adobe_rgb_to_srgb(rgb: tuple[int, int, int]) -> tuple[float, float, float]:
    """The reference conversion by the published formulas (D65 matrices), for checking."""
    lin = [(c / 255) ** (563 / 256) for c in rgb]
    m_adobe = ((0.5767, 0.1856, 0.1882), (0.2974, 0.6273, 0.0753), (0.0270, 0.0707, 0.9911))
    m_srgb_inv = ((3.2406, -1.5372, -0.4986), (-0.9689, 1.8758, 0.0415), (0.0557, -0.2040, 1.0570))
    xyz = [sum(m * c for m, c in zip(row, lin, strict=True)) for row in m_adobe]
    out = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, xyz, strict=True)))) for row in m_srgb_inv]
    return tuple(255 * (12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055) for c in out)


#: What the test press profile prints for each corner of CMYK (0 or 100 % ink), in sRGB.
#: Realistic inks, far from Pillow's plain conversion (pure cyan would be 0,255,255).
PRESS_CORNERS = {
    (0, 0, 0): (255, 255, 255), (1, 0, 0): (0, 160, 230), (0, 1, 0): (230, 0, 125),
    (0, 0, 1): (255, 240, 0), (1, 1, 0): (46, 49, 146), (1, 0, 1): (0, 166, 80),
    (0, 1, 1): (237, 28, 36), (1, 1, 1): (40, 40, 40),
}
BLACK_INK = (35, 31, 32)


def cmyk_press_icc() -> bytes:
    """A CMYK output profile whose A2B0 is an 8-bit LUT (2 grid points per ink) to Lab."""
    corners = []
    for c in (0, 1):
        for m in (0, 1):
            for y in (0, 1):
                for k in (0, 1):
                    corners.append(BLACK_INK if k else PRESS_CORNERS[(c, m, y)])
    strip = Image.new("RGB", (len(corners), 1))
    strip.putdata(corners)
    to_lab = ImageCms.buildTransform(ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB")
    lab = ImageCms.applyTransform(strip, to_lab)
    clut = b"".join(bytes(lab.getpixel((i, 0))) for i in range(len(corners)))
    ramp = bytes(range(256))
    identity = b"".join(_s15(v) for v in (1, 0, 0, 0, 1, 0, 0, 0, 1))
    lut = b"mft1\0\0\0\0" + bytes((4, 3, 2, 0)) + identity + ramp * 4 + clut + ramp * 3
    return _profile(b"prtr", b"CMYK", b"Lab ", [
        (b"desc", _desc("Test press CMYK")),
        (b"wtpt", _xyz(0.9642, 1.0, 0.8249)),
        (b"A2B0", lut),
    ])


def accepted_everywhere(report, agencies=("adobe",)):
    """A CSV report whose ``agencies`` accepted every asset ``report`` packed: what the flow's CSV stage says of a
    batch whose rows all pass (the ZIP then holds every packed file)."""
    from tasks.core.reports import AgencyCsv, CsvReport

    return CsvReport(agencies={a: AgencyCsv(agency=a, display_name=a, accepted=sorted(report.ready)) for a in agencies})
