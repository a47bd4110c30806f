"""inspect_image: every bad kind named with its reason; repairable kinds pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tasks.core.errors import BadInput
from tasks.images.inspect import image_rules, inspect_image, open_image, pixel_range
from tests.fakes import pack_samples as s

SMALL = 100  # pixels: lets the tests use tiny images; the real limits are covered below


def rejected(path: Path, **limits) -> BadInput:
    with pytest.raises(BadInput) as info:
        inspect_image(path, **limits)
    assert info.value.path == path.name
    assert str(info.value).startswith(f"{path.name}: ")
    return info.value


def test_zero_bytes(tmp_path):
    p = tmp_path / "empty.jpg"
    p.write_bytes(b"")
    assert rejected(p).reason == "empty file (0 bytes)"


def test_missing_file(tmp_path):
    assert "cannot read file" in rejected(tmp_path / "gone.jpg").reason


def test_not_an_image_with_image_extension(tmp_path):
    p = tmp_path / "notes.jpg"
    p.write_text("shopping list: eggs, milk\n")
    assert rejected(p).reason.startswith("not an image")


def test_truncated_jpeg(tmp_path):
    p = s.truncated_jpeg(tmp_path / "cut.jpg")
    assert rejected(p, min_pixels=SMALL).reason.startswith("truncated or corrupt image data")


def test_decompression_bomb_refused_by_pillow(tmp_path):
    p = s.bomb_png(tmp_path / "bomb.png")  # 256 MP in a few kB: over Pillow's hard limit
    assert p.stat().st_size < 100_000
    reason = rejected(p).reason
    assert reason.startswith("decompression bomb refused")


def test_image_above_every_agency_maximum_is_refused_from_its_header(tmp_path):
    p = s.bomb_png(tmp_path / "huge.png", side=11000)  # 121 MP: under Pillow's hard limit, over Adobe's 100 MP
    reason = rejected(p).reason
    assert reason.startswith("decompression bomb refused") and "100 MP" in reason


def test_limit_can_be_lowered(tmp_path):
    p = s.jpeg(tmp_path / "a.jpg", size=(40, 30))
    assert "decompression bomb" in rejected(p, min_pixels=SMALL, max_pixels=1000).reason


def test_unsupported_format(tmp_path):
    p = tmp_path / "photo.jpg"  # a GIF that claims to be a JPEG
    Image.new("P", (40, 30)).save(p, "GIF")
    assert rejected(p, min_pixels=SMALL).reason.startswith("unsupported format GIF")


def test_too_small_for_every_agency(tmp_path):
    p = s.jpeg(tmp_path / "small.jpg", size=(1600, 1200))  # 1.9 MP, real limits
    reason = rejected(p).reason
    assert reason == "too small: 1600×1200 = 1.9 MP, below every agency's minimum (2 MP)"  # Pond5's


def test_real_limits_accept_a_demo_sized_jpeg(tmp_path):
    p = s.jpeg(tmp_path / "ok.jpg", size=(2400, 1800))  # 4.32 MP flat colour: cheap
    facts = inspect_image(p)
    assert (facts.width, facts.height, facts.format) == (2400, 1800, "JPEG")
    assert pixel_range() == (2_000_000, 100_000_000)  # Pond5's minimum, Adobe's maximum


@pytest.mark.parametrize("make", [
    lambda d: s.jpeg(d / "cmyk.jpg", mode="CMYK", colour=(0, 255, 0, 0), icc=s.cmyk_press_icc()),
    lambda d: s.quadrant_jpeg(d / "rotated.jpg", orientation=6),
    lambda d: s.png(d / "alpha.png", Image.new("RGBA", (40, 30), (0, 0, 0, 0))),
    lambda d: s.png_rgb16(d / "deep.png", size=(20, 10)),
    lambda d: s.png(d / "palette.png", Image.new("P", (40, 30))),
    lambda d: s.png(d / "grey.png", Image.new("LA", (40, 30))),
], ids=["cmyk", "rotated", "alpha", "16-bit", "palette", "grey-alpha"])
def test_repairable_kinds_pass(tmp_path, make):
    p = make(tmp_path)
    assert inspect_image(p, min_pixels=SMALL).format in {"JPEG", "PNG"}


def test_open_image_reads_only_the_header(tmp_path):
    p = s.truncated_jpeg(tmp_path / "cut.jpg")
    with open_image(p) as im:  # the truncation shows only when decoding
        assert im.size == (64, 48)
        with pytest.raises(OSError):
            im.load()  # so opening did not decode the pixels


def test_agency_limits_name_the_rule():
    adobe = image_rules("adobe")
    assert adobe.broken_rule(2400, 1800, 1_000_000) is None
    assert adobe.broken_rule(2000, 1500, 1_000) == "2000×1500 = 3.0 MP is below adobe's minimum of 4 MP"
    assert adobe.broken_rule(2400, 1800, 46_000_000) == "file is 46.0 MB, above adobe's maximum of 45 MB"
    assert image_rules("vecteezy").broken_rule(9000, 6000,
                                               1) == "9000×6000 = 54.0 MP is above vecteezy's maximum of 50 MP"
    assert image_rules("dreamstime").broken_rule(2000, 1500, 10**9) is None
    assert image_rules("freepik").broken_rule(3000, 1999, 1) == (
        "3000×1999: the shorter side is below freepik's minimum of 2000 px")
    assert image_rules("freepik").broken_rule(10001, 5000, 1) == (
        "10001×5000: the longer side is above freepik's maximum of 10000 px")
    assert image_rules("pond5").broken_rule(2000, 1100, 1) == (
        "2000×1100: the shorter side is below pond5's minimum of 1200 px")
