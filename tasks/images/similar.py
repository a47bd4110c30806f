"""Near-duplicates: a perceptual hash per image, and motifs of images that look alike.

Agencies refuse a flood of near-identical submissions (Adobe: "don't submit
more than three significant versions of a single motif"), which is what a
batch generated from a few prompts produces. :func:`dhash` is the difference
hash of an image's brightness gradients: 64 bits that stay nearly the same
under noise, recompression, a small crop or a colour shift, and differ for
another scene. Two images whose hashes differ in at most ``max_distance``
bits look alike; :func:`motifs` puts look-alikes into one motif (transitively,
so a chain of small changes stays one motif).

The pack stage computes the hash from the preview it decodes anyway (a few
hundred pixels), so hashing adds no decode of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from PIL import Image

#: 9×8 brightness samples give 8×8 = 64 left-to-right gradients.
_W, _H = 9, 8


def dhash(im: Image.Image) -> int:
    """The 64-bit difference hash of ``im`` (any mode, any size)."""
    grey = im.convert("L").resize((_W, _H), Image.Resampling.BOX)
    px = grey.tobytes()
    bits = 0
    for y in range(_H):
        row = px[y * _W:(y + 1) * _W]
        for x in range(_W - 1):
            bits = (bits << 1) | (row[x] > row[x + 1])
    return bits


def distance(a: int, b: int) -> int:
    """How many of the 64 bits differ."""
    return (a ^ b).bit_count()


def motifs(hashes: Mapping[str, int], max_distance: int) -> list[list[str]]:
    """Groups of names whose images look alike, each sorted by name, groups in the order of their first name.

    Names with no look-alike are left out. Pairs are compared once each
    (n² / 2 XORs and bit counts: 1.7 s for 5,000 hashes, docs/BENCHMARKS.md).
    """
    names = sorted(hashes)
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    values = [hashes[n] for n in names]
    for i, a in enumerate(values):
        for j in range(i + 1, len(values)):
            if (a ^ values[j]).bit_count() <= max_distance:
                ri, rj = root(names[i]), root(names[j])
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return [g for g in groups.values() if len(g) > 1]
