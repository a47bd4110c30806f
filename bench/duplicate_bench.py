"""One picture however it was saved: the labelled set that draws the line between a duplicate and a version.

    .venv/bin/python -m bench.duplicate_bench                  # 8 scenes, precision and recall, the margins
    .venv/bin/python -m bench.duplicate_bench --scenes 2 --keep /tmp/set   # keep the files to look at

Each of the eight demo prompts is drawn once (a seed of its own, 1200 × 900)
and saved as a contributor's library holds it. **The same picture** (a
duplicate: one asset for every agency): the original (JPEG q92), re-encoded
at q85, q75 and q60, saved as PNG, TIFF, WebP and AVIF (q90; HEIC too with
the heif extra), scaled to 75 % and 50 %, and a copy with other metadata
(EXIF description and date). **A version** (counted against the agencies'
caps, never a duplicate): crops of 5, 10 and 20 %, a
small retouch (a patch of 8 % × 8 % cloned from elsewhere; a small mark
drawn), 8 % brighter, and the prompt drawn again with two other seeds.
Every file goes through what the pack stage does (``preview_jpegs``, the
96 px thumbnail the portfolio keeps, the looks), and each rule is judged on
every pair of one scene and every pair of two scenes: precision and recall
of "the same picture".
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw, ImageEnhance, ImageStat

from bench.hash_bench import median_ms
from bench.similar_bench import THRESHOLD, precision_recall, synthetic
from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.images.formats import HEIF_READER
from tasks.images.likeness import Signature, likeness, looks_close
from tasks.images.ready import preview_jpegs
from tasks.images.similar import (
    SAME_PICTURE_BLOCK,
    SAME_PICTURE_PSNR,
    Looks,
    picture_difference,
    same_picture,
    small_thumbnail,
)
from tasks.stores.portfolio import SignatureIndex

SIZE = (1200, 900)
#: variant -> whether it is the same picture as the original
VARIANTS = {"original": True, "q85": True, "q75": True, "q60": True, "png": True, "tiff": True, "webp": True,
            "avif": True,
            **({"heic": True} if HEIF_READER else {}),
            "scaled 75%": True, "scaled 50%": True, "other metadata": True,
            "crop 5%": False, "crop 10%": False, "crop 20%": False, "retouch patch": False, "retouch mark": False,
            "brighter 8%": False, "seed 2": False, "seed 3": False}


@dataclass(frozen=True)
class Case:
    scene: int
    variant: str
    looks: Looks
    thumb: Image.Image
    kept: bytes  # the portfolio's 96 px JPEG

    @property
    def same_as_original(self) -> bool:
        return VARIANTS[self.variant]


def _reencoded(im: Image.Image, quality: int) -> Image.Image:
    buf = BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return Image.open(BytesIO(buf.getvalue()))


def _crop(im: Image.Image, fraction: float) -> Image.Image:
    """``fraction`` of the width and height taken off, from the left and the top (a reframing)."""
    return im.crop((int(im.width * fraction), int(im.height * fraction), im.width, im.height))


def _patch(im: Image.Image, rng: random.Random) -> Image.Image:
    """A clone-stamp retouch: an 8 % × 8 % patch copied over another place."""
    out, w, h = im.copy(), im.width * 8 // 100, im.height * 8 // 100
    while True:  # a patch that shows: copied over a place that looks otherwise (sky over sky changes nothing)
        src = (rng.randrange(im.width - w), rng.randrange(im.height - h))
        dst = (rng.randrange(im.width - w), rng.randrange(im.height - h))
        patch, under = im.crop((*src, src[0] + w, src[1] + h)), im.crop((*dst, dst[0] + w, dst[1] + h))
        if ImageStat.Stat(ImageChops.difference(patch, under)).mean[0] >= 30:
            out.paste(patch, dst)
            return out


def _mark(im: Image.Image, rng: random.Random) -> Image.Image:
    """A small mark drawn (a logo, a spot): a disc 4 % of the width across, black on light, white on dark."""
    out = im.copy()
    r = im.width * 2 // 100
    x, y = rng.randrange(r, im.width - r), rng.randrange(r, im.height - r)
    far = (0, 0, 0) if sum(im.getpixel((x, y))) > 3 * 128 else (255, 255, 255)
    ImageDraw.Draw(out).ellipse((x - r, y - r, x + r, y + r), fill=far)
    return out


def save_variant(scene: int, variant: str, folder: Path, size: tuple[int, int] = SIZE) -> Path:
    """The file of one case of the set, written into ``folder``."""
    prompt, rng = DEMO_PROMPTS[scene], random.Random(100 + scene)
    seed = 10 * scene + (int(variant[-1]) if variant.startswith("seed") else 1)
    base = render_demo_image(prompt, random.Random(seed), size=size)
    original = _reencoded(base, 92)
    stem = folder / f"{prompt.slug}_{variant.replace(' ', '_').replace('%', '')}"
    path = stem.with_suffix(".jpg")
    if variant in ("q85", "q75", "q60"):
        original.save(path, quality=int(variant[1:]))
    elif variant == "png":
        original.save(path := stem.with_suffix(".png"))
    elif variant == "tiff":
        original.save(path := stem.with_suffix(".tif"), compression="tiff_lzw")
    elif variant in ("webp", "avif", "heic"):
        original.save(path := stem.with_suffix(f".{variant}"), quality=90)
    elif variant == "webp":
        original.save(path := stem.with_suffix(".webp"), quality=90)
    elif variant.startswith("scaled"):
        scale = int(variant.split()[1][:-1]) / 100
        original.resize((int(size[0] * scale), int(size[1] * scale)), Image.Resampling.LANCZOS).save(path, quality=90)
    elif variant == "other metadata":
        exif = Image.Exif()
        exif[0x010E], exif[0x0132] = "Another description", "2026:01:02 03:04:05"
        original.save(path, quality=92, exif=exif)
    else:
        made = {"crop 5%": lambda: _crop(original, 0.05), "crop 10%": lambda: _crop(original, 0.10),
                "crop 20%": lambda: _crop(original, 0.20), "retouch patch": lambda: _patch(original, rng),
                "retouch mark": lambda: _mark(original, rng),
                "brighter 8%": lambda: ImageEnhance.Brightness(original).enhance(1.08)}.get(variant, lambda: base)()
        made.save(path, quality=92)
    return path


def case_of(path: Path, scene: int, variant: str) -> Case:
    """What the pack stage keeps of the file: its looks and the portfolio's 96 px thumbnail."""
    made = preview_jpegs(path, 1000, 400)
    thumb_file = path.with_name(path.name + ".thumb.jpg")
    thumb_file.write_bytes(made.thumb)
    kept = small_thumbnail(thumb_file)
    assert kept is not None
    return Case(scene, variant, made.looks, Image.open(BytesIO(kept)).convert("RGB"), kept)


def labelled_set(scenes: range, folder: Path) -> list[Case]:
    return [case_of(save_variant(s, v, folder), s, v) for s in scenes for v in VARIANTS]


def _same_looks(a: Case, b: Case) -> bool:
    like = likeness(Signature("a", "a", a.looks), Signature("b", "b", b.looks))
    return all(like.parts[k] == 1.0 for k in ("dhash", "phash", "colour"))


def _close_looks(a: Case, b: Case) -> bool:
    return looks_close(likeness(Signature("a", "a", a.looks), Signature("b", "b", b.looks)))


def report(cases: list[Case]) -> None:
    pairs = list(itertools.combinations(cases, 2))
    truth = [a.scene == b.scene and a.same_as_original and b.same_as_original for a, b in pairs]
    looks_same = [_same_looks(a, b) for a, b in pairs]
    close = [_close_looks(a, b) for a, b in pairs]
    diffs = [picture_difference(a.thumb, b.thumb) for a, b in pairs]
    rules = {
        "the same looks (both hashes ≤ 4 bits, colour layout ≤ 4)": looks_same,
        "the same looks and identical thumbnails (≈ the old rule: identical pixels)":
            [s and d[0] >= 99 for s, d in zip(looks_same, diffs, strict=True)],
        f"looks close and PSNR ≥ {SAME_PICTURE_PSNR:.0f} dB alone":
            [s and d[0] >= SAME_PICTURE_PSNR for s, d in zip(close, diffs, strict=True)],
        f"looks close and worst 8 × 8 block ≤ {SAME_PICTURE_BLOCK:.0f} alone":
            [s and d[1] <= SAME_PICTURE_BLOCK for s, d in zip(close, diffs, strict=True)],
        "**looks close (`looks_close`) and `same_picture`** (both)":
            [s and same_picture(a.thumb, b.thumb) for s, (a, b) in zip(close, pairs, strict=True)],
    }
    print(f"{len(cases)} cases, {len(pairs)} pairs, {sum(truth)} the same picture\n")
    print("| rule | precision | recall |\n|---|---:|---:|")
    for label, found in rules.items():
        p, r = precision_recall(found, truth)
        print(f"| {label} | {p:.2f} | {r:.2f} |")
    print("\nAgainst each scene's original, by variant: PSNR dB (lowest–highest), worst block (lowest–highest), "
          "same looks, `same_picture`\n")
    print("| variant | PSNR | worst block | same looks | found the same |\n|---|---:|---:|---:|---:|")
    for v in VARIANTS:
        if v == "original":
            continue
        rows = [(d, s, a, b) for (a, b), d, s in zip(pairs, diffs, looks_same, strict=True)
                if a.scene == b.scene and a.variant == "original" and b.variant == v]
        ps, ws = [r[0][0] for r in rows], [r[0][1] for r in rows]
        found = sum(_close_looks(r[2], r[3]) and same_picture(r[2].thumb, r[3].thumb) for r in rows)
        print(f"| {v} | {min(ps):.1f}–{max(ps):.1f} | {min(ws):.1f}–{max(ws):.1f} | "
              f"{sum(r[1] for r in rows)}/{len(rows)} | {found}/{len(rows)} |")
    dup = [d for d, t in zip(diffs, truth, strict=True) if t]
    ver = [d for (a, b), d, t in zip(pairs, diffs, truth, strict=True) if not t and a.scene == b.scene]
    hard = [d[1] for d in ver if d[0] >= SAME_PICTURE_PSNR]
    print(f"\nthe same picture: PSNR ≥ {min(d[0] for d in dup):.1f} dB, worst block ≤ {max(d[1] for d in dup):.1f}; "
          f"versions of one scene with PSNR ≥ {SAME_PICTURE_PSNR:.0f}: worst block ≥ {min(hard, default=255):.1f}")


def cost_at(cases: list[Case], earlier: int) -> None:
    """What the duplicate check adds per asset against ``earlier`` assets and the set: the pairs whose looks are
    close (only they are compared) and one comparison, both thumbnails decoded from the portfolio's JPEGs."""
    sigs = [Signature(f"{c.scene}_{c.variant}", f"{c.scene}_{c.variant}", c.looks) for c in cases]
    index = SignatureIndex(synthetic(earlier, random.Random(7)) + sigs)
    close = [sum(looks_close(like) for _o, like in index.nearest(s, THRESHOLD)) for s in sigs]
    a, b = cases[0], cases[1]

    def compare() -> bool:
        return same_picture(Image.open(BytesIO(a.kept)).convert("RGB"), Image.open(BytesIO(b.kept)).convert("RGB"))

    t_pair = median_ms(compare, 200)
    t_decoded = median_ms(lambda: same_picture(a.thumb, b.thumb), 200)
    t_query = median_ms(lambda: [index.nearest(s, THRESHOLD) for s in sigs], 3) / len(sigs)
    print(f"\n| against {earlier + len(sigs):,} earlier assets | |\n|---|---:|")
    print(f"| one query through the index (the similarity check's own cost) | {t_query:.1f} ms |")
    print(f"| pairs whose looks are close, per asset (mean, max) | {statistics.mean(close):.1f}, {max(close)} |")
    print(f"| one pair compared (two 96 px thumbnails decoded, `same_picture`) | {t_pair:.2f} ms |")
    print(f"| one pair compared, its thumbnails decoded already (each is decoded once a run) | {t_decoded:.2f} ms |")
    print(f"| the duplicate check per asset: one decode, the most close pairs compared | "
          f"{t_pair / 2 + t_decoded * max(close):.2f} ms |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.duplicate_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", type=int, default=len(DEMO_PROMPTS))
    ap.add_argument("--earlier", type=int, default=20_000, help="the cost per asset against this many earlier")
    ap.add_argument("--keep", type=Path, help="write the set's files here (default: a temporary folder)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        cases = labelled_set(range(args.scenes), folder)
    print(f"set made and packed in {time.perf_counter() - started:.1f} s\n")
    report(cases)
    cost_at(cases, args.earlier)


if __name__ == "__main__":
    main()
