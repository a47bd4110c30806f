"""The upload-ready image, preview and thumbnail of one file: every repair checked on the pixels."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

import pytest
from PIL import Image, ImageCms

from tasks.core.errors import BadInput
from tasks.core.settings import PackSettings
from tasks.images.jpeg_segments import replace_metadata
from tasks.images.ready import SRGB_ICC, ReadyImage, clean_exif, fit, preview_jpegs, ready_jpeg
from tests.fakes import pack_samples as s

SETTINGS = PackSettings()


def opened(data: bytes) -> Image.Image:
    im = Image.open(BytesIO(data))
    im.load()
    return im


def ready(path: Path, settings: PackSettings = SETTINGS) -> tuple[ReadyImage, Image.Image]:
    r = ready_jpeg(path, settings)
    im = opened(r.jpeg)
    assert im.format == "JPEG" and im.mode == "RGB"
    assert im.info["icc_profile"] == SRGB_ICC
    assert im.size == (r.width, r.height)
    return r, im


def close(pixel, expected, tol=6):
    return all(abs(a - b) <= tol for a, b in zip(pixel, expected, strict=True))


# --- orientation ---------------------------------------------------------------------


@pytest.mark.parametrize("orientation,left_top_colour,size", [
    (1, "red", (80, 40)),      # as stored: red left, blue right
    (3, "blue", (80, 40)),     # rotated 180°: blue comes to the left
    (6, "red", (40, 80)),      # rotated 90° clockwise: red on top
    (8, "blue", (40, 80)),     # rotated 90° counter-clockwise: blue on top
])
def test_orientation_is_applied_to_the_pixels_and_reset(tmp_path, orientation, left_top_colour, size):
    r, im = ready(s.quadrant_jpeg(tmp_path / "q.jpg", orientation=orientation))
    assert im.size == size
    first = im.getpixel((5, 5))
    last = im.getpixel((size[0] - 5, size[1] - 5))
    red, blue = (220, 0, 0), (0, 0, 220)
    assert close(first, red if left_top_colour == "red" else blue, 30)
    assert close(last, blue if left_top_colour == "red" else red, 30)
    assert s.ORIENTATION not in im.getexif()
    assert r.reencoded == (orientation != 1)


def test_preview_and_thumbnail_are_upright_too(tmp_path):
    p = s.quadrant_jpeg(tmp_path / "q.jpg", size=(1600, 800), orientation=6)
    preview, thumb = (opened(b) for b in preview_jpegs(p, 100, 40)[:2])
    assert preview.size == (50, 100) and thumb.size == (20, 40)
    assert close(preview.getpixel((25, 10)), (220, 0, 0), 30)   # red on top
    assert close(preview.getpixel((25, 90)), (0, 0, 220), 30)   # blue below


# --- colour ------------------------------------------------------------------------------


def test_cmyk_with_its_profile_is_converted_through_the_profile(tmp_path):
    p = s.jpeg(tmp_path / "cmyk.jpg", mode="CMYK", colour=(255, 0, 0, 0), icc=s.cmyk_press_icc(), quality=100)
    _, im = ready(p)
    # The press profile prints 100 % cyan as (0, 160, 230); Pillow's plain formula would give (0, 255, 255).
    assert close(im.getpixel((10, 10)), s.PRESS_CORNERS[(1, 0, 0)], 8)


def test_cmyk_without_a_profile_gets_the_plain_conversion(tmp_path):
    p = s.jpeg(tmp_path / "cmyk.jpg", mode="CMYK", colour=(0, 255, 255, 0), quality=100)  # magenta + yellow
    _, im = ready(p)
    assert close(im.getpixel((10, 10)), (255, 0, 0), 8)  # red


def test_adobe_rgb_is_converted_to_srgb(tmp_path):
    colour = (200, 60, 60)
    p = s.jpeg(tmp_path / "adobe.jpg", colour=colour, icc=s.adobe_rgb_icc(), quality=100)
    r, im = ready(p)
    expected = s.adobe_rgb_to_srgb(colour)  # ≈ (231, 58, 57): the same red is more saturated in sRGB numbers
    assert close(im.getpixel((10, 10)), expected, 4)
    assert not close(im.getpixel((10, 10)), colour, 20)
    assert r.reencoded


def test_srgb_tagged_jpeg_keeps_its_compressed_data(tmp_path):
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    p = s.jpeg(tmp_path / "photo.jpg", size=(64, 48), icc=srgb, exif=s.camera_exif())
    r, im = ready(p)
    assert not r.reencoded
    original = replace_metadata(p.read_bytes(), [])
    assert replace_metadata(r.jpeg, []) == original  # same scan data byte for byte


@pytest.mark.parametrize("make,expected", [
    (lambda d: s.png(d / "a.png", Image.new("RGBA", (20, 10), (0, 0, 255, 0))), (255, 255, 255)),
    (lambda d: s.png(d / "a.png", Image.new("RGBA", (20, 10), (0, 0, 255, 255))), (0, 0, 255)),
    (lambda d: s.png(d / "a.png", Image.new("LA", (20, 10), (0, 0))), (255, 255, 255)),
    (lambda d: s.png(d / "a.png", Image.new("LA", (20, 10), (90, 255))), (90, 90, 90)),
], ids=["transparent-rgba", "opaque-rgba", "transparent-grey", "opaque-grey"])
def test_alpha_is_flattened_onto_white(tmp_path, make, expected):
    _, im = ready(make(tmp_path))
    assert close(im.getpixel((5, 5)), expected, 3)


def test_half_transparent_black_becomes_mid_grey(tmp_path):
    _, im = ready(s.png(tmp_path / "a.png", Image.new("RGBA", (20, 10), (0, 0, 0, 128))))
    assert close(im.getpixel((5, 5)), (127, 127, 127), 3)


def test_palette_with_transparency(tmp_path):
    pal = Image.new("P", (20, 10), 0)
    pal.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    pal.paste(1, (10, 0, 20, 10))
    _, im = ready(s.png(tmp_path / "p.png", pal, transparency=0))
    assert close(im.getpixel((2, 5)), (255, 255, 255), 3)   # transparent index → white
    assert close(im.getpixel((17, 5)), (10, 200, 30), 6)


def test_sixteen_bit_rgb_is_scaled_not_clipped(tmp_path):
    _, im = ready(s.png_rgb16(tmp_path / "deep.png", size=(16, 8), colour16=(65535, 32768, 0)))
    assert close(im.getpixel((4, 4)), (255, 128, 0), 3)


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path):
    grey = Image.frombytes("I;16", (16, 8), (20000).to_bytes(2, "little") * 128)
    _, im = ready(s.png(tmp_path / "grey16.png", grey))
    assert close(im.getpixel((4, 4)), (78, 78, 78), 2)  # 20000 / 257; a clip would give 255


def test_greyscale_and_bilevel_become_rgb(tmp_path):
    _, im = ready(s.jpeg(tmp_path / "g.jpg", mode="L", colour=77, quality=100))
    assert close(im.getpixel((4, 4)), (77, 77, 77), 2)
    _, im = ready(s.png(tmp_path / "b.png", Image.new("1", (16, 8), 1)))
    assert im.getpixel((4, 4)) == (255, 255, 255)


# --- EXIF ------------------------------------------------------------------------------


def _exif_of(im: Image.Image) -> tuple[Image.Exif, dict, dict]:
    exif = im.getexif()
    return exif, exif.get_ifd(s.EXIF_IFD), exif.get_ifd(s.GPS_IFD)


@pytest.mark.parametrize("orientation", [1, 6], ids=["kept-pixels", "re-encoded"])
def test_gps_removed_camera_data_kept(tmp_path, orientation):
    p = s.quadrant_jpeg(tmp_path / "q.jpg", orientation=orientation)
    assert Image.open(p).getexif().get_ifd(s.GPS_IFD)  # the source has a location
    _, im = ready(p)
    exif, sub, gps = _exif_of(im)
    assert exif[s.MAKE] == "Canon" and exif[s.MODEL] == "EOS R5"
    assert sub[s.ISO] == 200 and float(sub[s.EXPOSURE_TIME]) == pytest.approx(0.004)
    assert s.MAKER_NOTE not in sub
    assert gps == {} and s.GPS_IFD not in exif
    assert (sub[0xA002], sub[0xA003]) == im.size  # pixel dimensions match the upright image


def test_location_kept_when_configured(tmp_path):
    p = s.quadrant_jpeg(tmp_path / "q.jpg", orientation=1)
    _, im = ready(p, PackSettings(strip_location=False))
    _, _, gps = _exif_of(im)
    assert gps[1] == "N" and tuple(float(v) for v in gps[2]) == (35.0, 39.0, 31.0)


def test_a_broken_xmp_packet_comments_and_trailers_of_the_source_are_dropped(tmp_path):
    """A well-formed XMP packet is kept (tests/images/test_contributor_meta.py); this one binds no namespace."""
    p = s.jpeg(tmp_path / "x.jpg", exif=s.camera_exif())
    xmp = b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta><photoshop:City>Kyoto</photoshop:City></x:xmpmeta>"
    data = p.read_bytes()
    data = data[:2] + bytes((0xFF, 0xE1)) + (len(xmp) + 2).to_bytes(2, "big") + xmp + data[2:] + b"TRAILER-GPS"
    p.write_bytes(data)
    r, _ = ready(p)
    assert b"Kyoto" not in r.jpeg and b"TRAILER" not in r.jpeg
    assert r.jpeg.endswith(b"\xff\xd9")


def test_clean_exif_of_nothing_is_empty():
    assert clean_exif(Image.Exif(), (10, 10), strip_location=True) == b""


# --- sizes, determinism, bad data -------------------------------------------------------------


def test_never_upsampled(tmp_path):
    p = s.jpeg(tmp_path / "small.jpg", size=(300, 200))
    r, _ = ready(p)
    assert (r.width, r.height) == (300, 200)
    preview, thumb = (opened(b) for b in preview_jpegs(p, 1000, 400)[:2])
    assert preview.size == (300, 200) and thumb.size == (300, 200)
    assert fit((300, 200), 1000) == (300, 200) and fit((3000, 2000), 1000) == (1000, 667)


def test_preview_sizes_follow_the_settings(tmp_path):
    p = s.jpeg(tmp_path / "wide.jpg", size=(2400, 1800))
    preview, thumb = (opened(b) for b in preview_jpegs(p, 1000, 400)[:2])
    assert preview.size == (1000, 750) and thumb.size == (400, 300)
    assert preview.info["icc_profile"] == SRGB_ICC


@pytest.mark.parametrize("make", [
    lambda d: s.quadrant_jpeg(d / "q.jpg", orientation=6),
    lambda d: s.quadrant_jpeg(d / "q.jpg", orientation=1),
    lambda d: s.jpeg(d / "c.jpg", mode="CMYK", colour=(10, 200, 30, 5), icc=s.cmyk_press_icc()),
    lambda d: s.png(d / "a.png", Image.new("RGBA", (20, 10), (0, 0, 255, 90))),
], ids=["rotated", "kept", "cmyk", "alpha"])
def test_same_input_same_bytes(tmp_path, make):
    p = make(tmp_path)
    assert ready_jpeg(p, SETTINGS) == ready_jpeg(p, SETTINGS)
    assert preview_jpegs(p, 100, 40) == preview_jpegs(p, 100, 40)


def test_truncated_file_is_bad_input_naming_the_file(tmp_path):
    p = s.truncated_jpeg(tmp_path / "cut.jpg")
    with pytest.raises(BadInput, match=r"^cut\.jpg: truncated or corrupt image data"):
        preview_jpegs(p, 100, 40)
    with pytest.raises(BadInput, match=r"^cut\.jpg: truncated or corrupt image data"):
        ready_jpeg(p, SETTINGS)


def test_segment_rewrite_rejects_a_stream_without_end(tmp_path):
    data = s.jpeg(tmp_path / "x.jpg").read_bytes()
    with pytest.raises(ValueError, match="truncated"):
        replace_metadata(data[: len(data) - 40], [])
    with pytest.raises(ValueError, match="start-of-image"):
        replace_metadata(b"GIF89a", [])


@pytest.mark.parametrize("options", [{"progressive": True}, {"restart_marker_blocks": 1},
                                     {"progressive": True, "restart_marker_rows": 2}],
                         ids=["progressive", "restart-markers", "progressive-restarts"])
def test_kept_pixels_survive_every_scan_layout(tmp_path, options):
    p = tmp_path / "layout.jpg"
    Image.effect_noise((96, 64), 50).convert("RGB").save(p, "JPEG", quality=90, exif=s.camera_exif(), **options)
    r, im = ready(p)
    assert not r.reencoded
    with Image.open(p) as original:
        assert im.tobytes() == original.convert("RGB").tobytes()  # the same pixels, decoded from the same scans
    assert im.getexif()[s.MAKE] == "Canon"
