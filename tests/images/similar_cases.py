"""A labelled set for the similarity check: versions of one scene (similar) and other scenes (not).

Made from the offline generator (``tasks.images.demo``) so it needs no files:
each of the eight demo prompts is drawn once (a seed of its own), then varied the way a
contributor's batch varies — a 4 % and an 8 % crop, a colour shift, a
brighter copy, a blur, two re-renders with other seeds (the prompt drawn
again: the shapes move, the palette stays), and a re-titled copy (same
picture, another title and keyword order). Each gets the title and first
keywords the offline describer would give (the prompt and its keywords).
Two cases are "similar" when they come from one prompt. Prompts of one style
(two horizons, two skylines, …) are the hard negatives.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from io import BytesIO

from PIL import Image, ImageEnhance, ImageFilter

from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.images.likeness import Signature
from tasks.images.similar import looks

SIZE = (600, 450)
VARIANTS = ("original", "crop 4%", "crop 8%", "colour shift", "brighter", "blur", "seed 2", "seed 3", "re-titled")


@dataclass(frozen=True)
class Case:
    scene: int
    variant: str
    signature: Signature


def _crop(im: Image.Image, fraction: float) -> Image.Image:
    d = int(im.width * fraction)
    return im.crop((d, d, im.width - d, im.height - d)).resize(im.size)


def _colour_shift(im: Image.Image) -> Image.Image:
    r, g, b = im.split()
    return Image.merge("RGB", (r.point(lambda v: min(255, v + 25)), g, b.point(lambda v: max(0, v - 15))))


def _jpeg(im: Image.Image) -> Image.Image:
    buf = BytesIO()
    im.save(buf, "JPEG", quality=85)
    return Image.open(BytesIO(buf.getvalue())).convert("RGB")


def variant_image(scene: int, variant: str, size: tuple[int, int] = SIZE) -> Image.Image:
    prompt = DEMO_PROMPTS[scene]
    # Each scene its own seeds: one seed draws the same shapes for two prompts of one style.
    seed = 10 * scene + (int(variant[-1]) if variant.startswith("seed") else 1)
    base = render_demo_image(prompt, random.Random(seed), size=size)
    made = {"crop 4%": lambda: _crop(base, 0.04), "crop 8%": lambda: _crop(base, 0.08),
            "colour shift": lambda: _colour_shift(base), "brighter": lambda: ImageEnhance.Brightness(base).enhance(1.2),
            "blur": lambda: base.filter(ImageFilter.GaussianBlur(3))}.get(variant, lambda: base)()
    return _jpeg(made)


def labelled_cases(scenes: range = range(len(DEMO_PROMPTS)), variants: tuple[str, ...] = VARIANTS) -> list[Case]:
    cases = []
    for s in scenes:
        prompt = DEMO_PROMPTS[s]
        for v in variants:
            title, keywords = prompt.prompt, prompt.keywords
            if v == "re-titled":  # the same picture, described again: other words, another order
                title = f"{prompt.keywords[3].capitalize()} and {prompt.keywords[1]} scene, {prompt.keywords[5]} mood"
                keywords = tuple(reversed(prompt.keywords))
            name = f"{prompt.slug}_{v.replace(' ', '_').replace('%', '')}.jpg"
            cases.append(Case(s, v, Signature(name, name, looks(variant_image(s, v)), title, keywords)))
    return cases
