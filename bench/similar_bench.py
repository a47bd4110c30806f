"""The similarity check measured: precision and recall on the labelled set, and its cost at 20,000 earlier assets.

    .venv/bin/python -m bench.similar_bench                       # labelled set, 20,000 earlier assets
    .venv/bin/python -m bench.similar_bench --earlier 5000 --queries 50

1. The labelled set of ``tests/images/similar_cases.py`` (8 demo scenes × 9
   versions: crops, colour shift, brighter, blur, two re-renders with other
   seeds, a re-titled copy): precision and recall of "similar" for every pair,
   for dHash alone at the old default (≤ 8 bits), for each signal alone, for
   the image signals only, and for the score at the default threshold.
2. Cost per asset: ``looks`` (dHash + pHash + colour layout) and dHash alone
   on a 1000 px preview; one pair's ``likeness``.
3. At ``--earlier`` previous assets (synthetic signatures: random hashes, a
   palette each, titles and keywords drawn from a 3,000-word vocabulary with
   Zipf-like frequencies) with the labelled set mixed in: building the index,
   one query through it against scoring every asset, the candidates per
   query, and whether the index found every pair that scoring everything
   found (the labelled set's queries); and a batch of ``--batch`` new assets
   against each other.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import time

from bench.hash_bench import median_ms
from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.images.likeness import Signature, likeness
from tasks.images.similar import Looks, dhash, distance, looks
from tasks.stores.portfolio import SignatureIndex
from tests.images.similar_cases import labelled_cases

THRESHOLD = 0.4


def precision_recall(found: list[bool], truth: list[bool]) -> tuple[float, float]:
    tp = sum(f and t for f, t in zip(found, truth, strict=True))
    return tp / max(1, sum(found)), tp / max(1, sum(truth))


def labelled_table() -> list[Signature]:
    cases = labelled_cases()
    pairs = list(itertools.combinations(cases, 2))
    truth = [a.scene == b.scene for a, b in pairs]
    scored = [likeness(a.signature, b.signature) for a, b in pairs]
    image_only = {"dhash": 0.3, "phash": 0.35, "colour": 0.35}
    rules = {
        "dHash ≤ 8 bits (the old guard)": [distance(a.signature.looks.dhash, b.signature.looks.dhash) <= 8
                                          for a, b in pairs],
        "pHash ≤ 8 bits": [distance(a.signature.looks.phash, b.signature.looks.phash) <= 8 for a, b in pairs],
        "colour layout alone ≥ 0.5": [s.parts["colour"] >= 0.5 for s in scored],
        "title words alone ≥ 0.5": [s.parts["title"] >= 0.5 for s in scored],
        "image signals only (dHash .3, pHash .35, colour .35) ≥ 0.4":
            [sum(w * s.parts[k] for k, w in image_only.items()) >= 0.4 for s in scored],
        f"**the score ≥ {THRESHOLD}** (default)": [s.score >= THRESHOLD for s in scored],
    }
    print(f"{len(cases)} cases, {len(pairs)} pairs, {sum(truth)} similar\n")
    print("| signal | precision | recall |\n|---|---:|---:|")
    for label, found in rules.items():
        p, r = precision_recall(found, truth)
        print(f"| {label} | {p:.2f} | {r:.2f} |")
    by_variant: dict[str, list[bool]] = {}
    for (a, b), t, s in zip(pairs, truth, scored, strict=True):
        if t and "original" in (a.variant, b.variant):
            other = b.variant if a.variant == "original" else a.variant
            by_variant.setdefault(other, []).append((s.score >= THRESHOLD,
                                                     distance(a.signature.looks.dhash, b.signature.looks.dhash) <= 8))
    print("\nRecall against the original, by version (8 scenes each):\n")
    print("| version | dHash ≤ 8 | score ≥ 0.4 |\n|---|---:|---:|")
    for v, hits in by_variant.items():
        print(f"| {v} | {sum(h[1] for h in hits)}/{len(hits)} | {sum(h[0] for h in hits)}/{len(hits)} |")
    worst_negative = max(s.score for s, t in zip(scored, truth, strict=True) if not t)
    weakest_positive = min(s.score for s, t in zip(scored, truth, strict=True) if t)
    print(f"\nhighest score of two different scenes {worst_negative:.2f}; "
          f"lowest of two versions {weakest_positive:.2f}")
    return [c.signature for c in cases]


def synthetic(n: int, rng: random.Random) -> list[Signature]:
    vocabulary = [f"word{i}" for i in range(3000)]
    weights = [1 / (i + 1) for i in range(len(vocabulary))]
    out = []
    for i in range(n):
        base = [rng.randrange(256) for _ in range(3)]
        colour = bytes(max(0, min(255, base[k % 3] + rng.randint(-40, 40))) for k in range(48))
        words = rng.choices(vocabulary, weights, k=15)
        hashes = Looks(rng.getrandbits(64), rng.getrandbits(64), colour)
        out.append(Signature(f"earlier_{i:05d}.jpg", f"{i:064x}", hashes, " ".join(words[:5]), tuple(words[5:])))
    return out


def index_misses(index: SignatureIndex, queries: list[Signature], threshold: float) -> tuple[int, int]:
    """Pairs at or above ``threshold`` that scoring everything found, and how many of them the index missed."""
    missed = found = 0
    for q in queries:
        full = {s.sha256 for s, lk in index.nearest(q, threshold, exhaustive=True) if lk.score >= threshold}
        fast = {s.sha256 for s, lk in index.nearest(q, threshold) if lk.score >= threshold}
        found += len(full)
        missed += len(full - fast)
    return missed, found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.similar_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--earlier", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=5000, help="a batch of this many new assets against each other")
    args = ap.parse_args(argv)
    labelled = labelled_table()

    preview = render_demo_image(DEMO_PROMPTS[0], random.Random(1), size=(1000, 750))
    a, b = labelled[0], labelled[1]
    print("\n| cost per asset | ms |\n|---|---:|")
    print(f"| dhash of a 1000 px preview (the old guard) | {median_ms(lambda: dhash(preview), args.rounds):.2f} |")
    print(f"| looks: dHash + pHash + colour layout of it | {median_ms(lambda: looks(preview), args.rounds):.2f} |")
    print(f"| likeness of one pair (score, five signals) | {median_ms(lambda: likeness(a, b), 200) * 1000:.1f} µs |")

    rng = random.Random(7)
    earlier = synthetic(args.earlier, rng)
    started = time.perf_counter()
    index = SignatureIndex(earlier + labelled)
    built = time.perf_counter() - started
    queries = labelled[: args.queries] + earlier[: max(0, args.queries - len(labelled))]
    cands = [len(index.candidates(q)) for q in queries]
    t_index = median_ms(lambda: [index.nearest(q, THRESHOLD) for q in queries], 3) / len(queries)
    sample = queries[:10]
    t_all = median_ms(lambda: [index.nearest(q, THRESHOLD, exhaustive=True) for q in sample], 1) / len(sample)
    missed, found = index_misses(index, labelled, THRESHOLD)
    bare = [dataclasses.replace(s, title="", keywords=()) for s in labelled]  # the image signals alone
    bare_missed, bare_found = index_misses(SignatureIndex(earlier + bare), bare, 0.25)
    n = len(earlier) + len(labelled)
    print(f"\n| against {n:,} earlier assets | |\n|---|---:|")
    print(f"| build the index | {built:.2f} s |")
    print(f"| candidates per query (median, max) | {statistics.median(cands):.0f}, {max(cands)} |")
    print(f"| one query through the index | {t_index:.1f} ms |")
    print(f"| one query scoring every asset | {t_all:.0f} ms |")
    print(f"| pairs ≥ {THRESHOLD} that scoring everything found and the index missed | {missed} of {found} |")
    print(f"| … the same without titles and keywords, pairs ≥ 0.25 | {bare_missed} of {bare_found} |")
    batch = synthetic(args.batch, random.Random(3))
    started = time.perf_counter()
    own = SignatureIndex(batch)
    for s in batch:
        own.nearest(s, THRESHOLD)
    print(f"\n{args.batch:,} new assets against each other (index and every query): "
          f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
