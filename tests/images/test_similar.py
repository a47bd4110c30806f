"""Perceptual hashes: look-alikes are a few bits apart, other scenes many."""

from __future__ import annotations

import random

from PIL import Image

from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.images.similar import dhash, distance


def scene(prompt_index: int, seed: int = 1) -> Image.Image:
    return render_demo_image(DEMO_PROMPTS[prompt_index], random.Random(seed), size=(900, 600))


def noisy(im: Image.Image, seed: int) -> Image.Image:
    rng, out = random.Random(seed), im.copy()
    px = out.load()
    for _ in range(4000):
        x, y = rng.randrange(out.width), rng.randrange(out.height)
        px[x, y] = tuple(max(0, min(255, v + rng.randint(-40, 40))) for v in px[x, y])
    return out


def cropped(im: Image.Image, fraction: float) -> Image.Image:
    d = int(im.width * fraction)
    return im.crop((d, d, im.width - d, im.height - d)).resize(im.size)


def test_noise_and_a_small_crop_move_the_hash_a_few_bits_another_scene_many():
    base = scene(0)
    h = dhash(base)
    assert distance(h, dhash(noisy(base, 1))) <= 4
    assert distance(h, dhash(cropped(base, 0.01))) <= 8
    assert distance(h, dhash(base.convert("L"))) == 0  # colour does not matter, brightness does
    assert min(distance(h, dhash(scene(i))) for i in (2, 3, 6, 7)) > 8
