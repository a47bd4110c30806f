"""The offline demo generator: varied, deterministic pictures for the built-in prompts.

The same seed and index give the same bytes, so re-running makes nothing
new. Each JPEG carries its prompt in EXIF ``ImageDescription`` and names
this generator in ``Software`` (it is not a photograph), so the offline
describer can say honestly what it shows.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from io import BytesIO

from PIL import Image, ImageDraw

from tasks.agencies.catalog import shortest_file_name

DEMO_SOFTWARE = "prefect-microstock offline demo generator (not a photograph)"
DEMO_SIZE = (2400, 1800)  # 4.32 MP: above Adobe's and Vecteezy's 4 MP minimum


@dataclass(frozen=True)
class DemoPrompt:
    """A built-in prompt with what the offline describer may honestly say about its image."""

    prompt: str
    slug: str
    style: str
    palette: tuple[tuple[int, int, int], ...]
    keywords: tuple[str, ...]
    adobe_category: int
    #: Ids from Dreamstime's template legend (``tasks/agencies/dreamstime.toml``).
    dreamstime_categories: tuple[int, ...]
    category_hints: tuple[str, ...]


DEMO_PROMPTS: tuple[DemoPrompt, ...] = (
    DemoPrompt("Sunset over a calm sea with a glowing sun", "sunset_sea", "horizon",
               ((255, 120, 60), (250, 200, 120), (40, 60, 120)),
               ("sunset", "sea", "sun", "horizon", "ocean", "evening", "calm", "orange sky", "water", "dusk"),
               11, (23, 19), ("landscape", "nature")),
    DemoPrompt("Snowy mountain range at dawn", "mountains_dawn", "mountains",
               ((160, 190, 240), (240, 210, 220), (70, 80, 110)),
               ("mountains", "snow", "dawn", "peak", "range", "winter", "landscape", "morning", "cold", "alpine"),
               11, (15, 146), ("landscape", "nature")),
    DemoPrompt("City skyline at night with lit windows", "city_night", "skyline",
               ((10, 15, 40), (40, 40, 90), (255, 220, 120)),
               ("city", "skyline", "night", "buildings", "urban", "windows", "lights", "architecture", "downtown",
                "evening"),
               2, (130, 131), ("architecture", "city")),
    DemoPrompt("Abstract pastel circles background", "pastel_circles", "shapes",
               ((250, 240, 230), (240, 170, 180), (150, 200, 230)),
               ("abstract", "background", "circles", "pastel", "pattern", "design", "colorful", "shapes", "soft",
                "wallpaper"),
               8, (112, 164), ("graphic", "abstract")),
    DemoPrompt("Green forest hills under a clear sky", "forest_hills", "mountains",
               ((150, 210, 250), (230, 245, 255), (40, 110, 60)),
               ("forest", "hills", "green", "nature", "landscape", "sky", "trees", "countryside", "summer", "valley"),
               11, (18, 146), ("landscape", "nature")),
    DemoPrompt("Desert dunes under a deep blue sky", "desert_dunes", "horizon",
               ((30, 90, 200), (120, 180, 240), (220, 170, 100)),
               ("desert", "dunes", "sand", "sky", "dry", "landscape", "travel", "hot", "arid", "nature"),
               11, (17, 146), ("landscape", "travel")),
    DemoPrompt("Geometric pattern of colorful triangles", "triangles", "shapes",
               ((30, 30, 50), (240, 90, 80), (250, 200, 60)),
               ("geometric", "pattern", "triangles", "abstract", "background", "colorful", "modern", "design", "shapes",
                "mosaic"),
               8, (112, 141), ("graphic", "abstract")),
    DemoPrompt("Skyscrapers at dusk in warm light", "towers_dusk", "skyline",
               ((250, 150, 90), (120, 80, 140), (255, 230, 160)),
               ("skyscrapers", "dusk", "city", "towers", "urban", "sunset", "architecture", "business", "skyline",
                "modern"),
               2, (131, 71), ("architecture", "city")),
)


def demo_prompt_for(text: str) -> DemoPrompt | None:
    """The built-in prompt with exactly this text, if any."""
    return next((p for p in DEMO_PROMPTS if p.prompt == text), None)


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "_".join(words)[:16].strip("_") or "image"


def prompts_from(configured: list[str]) -> list[DemoPrompt]:
    """The configured prompts (plain text, drawn in a style chosen by their index), else the demo list."""
    if not configured:
        return list(DEMO_PROMPTS)
    return [
        demo_prompt_for(text)
        or DemoPrompt(text, _slug(text), DEMO_PROMPTS[i % len(DEMO_PROMPTS)].style,
                      DEMO_PROMPTS[i % len(DEMO_PROMPTS)].palette, (), 0, (), ())
        for i, text in enumerate(configured)
    ]


# --- the offline generator --------------------------------------------------------


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> tuple[int, int, int]:
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


#: The picture is drawn at 1/_DRAW_SCALE of its size and enlarged bilinearly: the enlargement softens its edges as
#: the Gaussian blur of the full-size picture did, at a fraction of the cost (the blur was most of an image's time).
_DRAW_SCALE = 2


def _gradient(size: tuple[int, int], top, bottom) -> Image.Image:
    strip = Image.new("RGB", (1, 256))
    strip.putdata([_mix(top, bottom, y / 255) for y in range(256)])
    # Down the strip bilinearly, then across by copying: the same pixels as one bilinear resize, a fifth of the time.
    return strip.resize((1, size[1]), Image.Resampling.BILINEAR).resize(size, Image.Resampling.NEAREST)


def _px(n: int) -> int:
    """``n`` pixels of the full-size picture on the drawing (at least one)."""
    return max(1, round(n / _DRAW_SCALE))


def render_demo_image(prompt: DemoPrompt, rng: random.Random, size: tuple[int, int] = DEMO_SIZE) -> Image.Image:
    """Draw a varied, deterministic picture for ``prompt`` (every random choice comes from ``rng``)."""
    w, h = max(1, size[0] // _DRAW_SCALE), max(1, size[1] // _DRAW_SCALE)
    a, b, c = prompt.palette
    im = _gradient((w, h), a, b)
    d = ImageDraw.Draw(im)
    if prompt.style == "horizon":
        horizon = int(h * rng.uniform(0.55, 0.7))
        r = int(h * rng.uniform(0.08, 0.14))
        cx = int(w * rng.uniform(0.25, 0.75))
        d.ellipse((cx - r, horizon - r * 1.3, cx + r, horizon + r * 0.7), fill=_mix(a, (255, 255, 200), 0.6))
        d.rectangle((0, horizon, w, h), fill=c)
        for _ in range(140):
            y = rng.randint(horizon, h)
            x = rng.randint(0, w)
            d.line((x, y, x + _px(rng.randint(40, 260)), y), fill=_mix(c, b, rng.uniform(0.1, 0.5)),
                   width=_px(rng.randint(2, 6)))
    elif prompt.style == "mountains":
        for layer in range(4):
            base = int(h * (0.45 + layer * 0.13))
            pts = [(0, h)]
            x = 0
            while x < w:
                pts.append((x, base - rng.randint(0, int(h * 0.22))))
                x += rng.randint(w // 14, w // 6)
            pts += [(w, base), (w, h)]
            d.polygon(pts, fill=_mix(c, b, 0.5 - layer * 0.15))
    elif prompt.style == "skyline":
        x = 0
        while x < w:
            bw = rng.randint(w // 30, w // 10)
            top = int(h * rng.uniform(0.2, 0.65))
            d.rectangle((x, top, x + bw, h), fill=_mix(a, (0, 0, 0), 0.4))
            for wy in range(top + _px(20), h - _px(20), _px(36)):
                for wx in range(x + _px(10), x + bw - _px(14), _px(28)):
                    if rng.random() < 0.45:
                        d.rectangle((wx, wy, wx + _px(12), wy + _px(18)), fill=c)
            x += bw + _px(rng.randint(4, 30))
    else:  # shapes
        for _ in range(90):
            r = rng.randint(h // 40, h // 6)
            cx, cy = rng.randint(0, w), rng.randint(0, h)
            colour = _mix(rng.choice((b, c)), a, rng.uniform(0, 0.5))
            if rng.random() < 0.5:
                d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
            else:
                d.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=colour)
    return im.resize(size, Image.Resampling.BILINEAR)


def demo_jpeg_bytes(prompt: DemoPrompt, seed: int, index: int) -> bytes:
    """The JPEG of generated image ``index``: same inputs, same bytes; the prompt is in its EXIF."""
    rng = random.Random(hashlib.sha256(f"{seed}:{index}:{prompt.prompt}".encode()).digest())
    im = render_demo_image(prompt, rng)
    exif = Image.Exif()
    exif[0x010E] = prompt.prompt  # ImageDescription
    exif[0x0131] = DEMO_SOFTWARE  # Software
    buf = BytesIO()
    im.save(buf, "JPEG", quality=90, exif=exif)
    return buf.getvalue()


def generated_name(prompt: DemoPrompt, seed: int, index: int, *, clip: bool = False) -> str:
    """``<slug>_<index>.jpg`` (with ``_s<seed>`` for a non-default seed), within every agency's file-name limit;
    a generated clip's is ``<slug>_c<index>.mp4`` (its own stem: an image and a clip of one prompt and index are
    two assets, each with its sidecar).

    The limit is the shortest any agency spec sets (Adobe's 30 characters
    today); a spec with a shorter one would shorten the names of images
    generated after it, never rename those already made.
    """
    tail = (f"_s{seed}" if seed else "") + (f"_c{index:03d}.mp4" if clip else f"_{index:03d}.jpg")
    limit = shortest_file_name() or len(prompt.slug) + len(tail)
    return prompt.slug[: max(1, limit - len(tail))].rstrip("_") + tail
