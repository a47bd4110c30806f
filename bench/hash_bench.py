"""What the near-duplicate guard costs the pack stage, per 24 MP image.

    .venv/bin/python -m bench.hash_bench                  # 6 images, 5 rounds
    .venv/bin/python -m bench.hash_bench --images 8 --rounds 7

The perceptual hash is taken from the preview the pack stage decodes anyway
(``tasks.images.ready.preview_jpegs``), so its cost is the hash of an
in-memory 1000 px image, not a decode. This measures, per image and median
over rounds: the whole ``preview_jpegs`` call (draft decode, sRGB, preview,
thumbnail, encode, hashes), ``dhash`` alone and ``looks`` (dHash, pHash, colour
layout) on the same 1000 px preview; and,
for comparison, what a hash with its own full-size decode would cost. The
24 MP test photos are ``bench.pack_bench``'s (made once, cached in ``bench/out/pack``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from io import BytesIO
from pathlib import Path

from PIL import Image

from bench.pack_bench import OUT, SIZE, make_photo
from tasks.images.ready import preview_jpegs
from tasks.images.similar import dhash, looks


def full_decode_hash(path: Path) -> None:
    """A hash with its own full-size decode: what the guard would cost without the preview."""
    with Image.open(path) as big:
        big.load()
        dhash(big)


def median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.hash_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(args.images):
        path = OUT / f"photo_{i:02d}.jpg"
        if not path.exists():
            path.write_bytes(make_photo(i))
        with Image.open(BytesIO(path.read_bytes())) as im:
            preview = im.copy()
            preview.draft("RGB", (1000, 1000))
            preview.thumbnail((1000, 1000))

        rows.append((median_ms(partial(preview_jpegs, path, 1000, 400), args.rounds),
                     median_ms(partial(dhash, preview), args.rounds),
                     median_ms(partial(looks, preview), args.rounds),
                     median_ms(partial(full_decode_hash, path), max(1, args.rounds // 2))))
    pj, dh, lk, full = (statistics.mean(col) for col in zip(*rows, strict=True))
    print(f"{args.images} JPEGs of {SIZE[0]}×{SIZE[1]} ({SIZE[0] * SIZE[1] / 1e6:.0f} MP), "
          f"median of {args.rounds} rounds, mean over images:")
    print("| step | ms per image |\n|---|---:|")
    print(f"| preview_jpegs (draft decode, preview, thumbnail, encodes, hash) | {pj:.1f} |")
    print(f"| dhash of the 1000 px preview (the old guard's whole cost) | {dh:.2f} |")
    print(f"| looks of it: dHash + pHash + colour layout (the similarity check's image part) | {lk:.2f} |")
    print(f"| for comparison: dhash with a full-size decode of its own | {full:.0f} |")


if __name__ == "__main__":
    main()
