"""One flatten-onto-white for every image path."""

from __future__ import annotations

from PIL import Image

from tasks.images.pixels import flatten_on_white, has_alpha, rgb_on_white


def test_transparent_pixels_become_white_and_opaque_ones_keep_their_colour():
    im = Image.new("RGBA", (2, 1), (0, 0, 0, 0))
    im.putpixel((1, 0), (200, 10, 10, 255))
    flat = rgb_on_white(im)
    assert flat.mode == "RGB" and flat.getpixel((0, 0)) == (255, 255, 255) and flat.getpixel((1, 0)) == (200, 10, 10)


def test_grey_with_alpha_stays_grey_and_a_palette_transparency_key_counts():
    assert flatten_on_white(Image.new("LA", (1, 1), (0, 0))).mode == "L"
    keyed = Image.new("P", (1, 1), 0)
    keyed.info["transparency"] = 0
    assert has_alpha(keyed) and rgb_on_white(keyed).getpixel((0, 0)) == (255, 255, 255)
    assert not has_alpha(Image.new("RGB", (1, 1)))
