"""The portfolio: kept across batches, a bad line skipped, and an index that finds what scoring everything finds."""

from __future__ import annotations

import random

from tasks.core.workdir import Workdir
from tasks.images.likeness import Signature
from tasks.images.similar import Looks
from tasks.stores.portfolio import SignatureIndex, add_to_portfolio, portfolio_path, read_portfolio
from tests.images.similar_cases import labelled_cases


def sig(name: str, rng: random.Random, title: str = "") -> Signature:
    base = [rng.randrange(256) for _ in range(3)]  # a palette of its own, varied over the 4×4 cells
    colour = bytes(max(0, min(255, base[i % 3] + rng.randint(-30, 30))) for i in range(48))
    looks = Looks(rng.getrandbits(64), rng.getrandbits(64), colour)
    return Signature(name, name * 4, looks, title, ("one", "two"))


def test_the_portfolio_keeps_assets_across_batches_and_skips_a_bad_line(tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    rng = random.Random(1)
    first = add_to_portfolio(wd, read_portfolio(wd), [sig("a", rng), sig("b", rng)])
    add_to_portfolio(wd, read_portfolio(wd), [sig("c", rng)])  # a later batch without a and b
    with portfolio_path(wd).open("a") as f:
        f.write("{not json\n")
    kept = read_portfolio(wd)
    assert sorted(s.name for s in kept.values()) == ["a", "b", "c"] and kept["aaaa"] == first["aaaa"]


def test_the_index_finds_every_version_scoring_everything_finds_among_unrelated_assets():
    rng = random.Random(2)
    cases = labelled_cases(scenes=range(0, 8, 3), variants=("original", "crop 8%", "seed 2", "re-titled"))
    noise = [sig(f"n{i}", rng, title=f"unrelated {i}") for i in range(2000)]
    index = SignatureIndex([c.signature for c in cases] + noise)
    for c in cases:
        exhaustive = {s.name for s, lk in index.nearest(c.signature, 0.4, exhaustive=True) if lk.score >= 0.4}
        indexed = {s.name for s, lk in index.nearest(c.signature, 0.4) if lk.score >= 0.4}
        assert indexed == exhaustive and len(index.candidates(c.signature)) < 200  # of 2,012


def test_copies_of_one_picture_are_searched_as_one_and_each_finds_another_copy():
    same = Looks(1, 2, bytes(48))
    copies = [Signature(f"c{i:04d}.jpg", f"{i:064x}", same, f"Blue sky number {i}") for i in range(3000)]
    index = SignatureIndex(copies)
    assert len(index.items) == 1
    first, second = index.nearest(copies[0], 0.4), index.nearest(copies[1], 0.4)
    assert [s.name for s, _ in first] == ["c0001.jpg"] and [s.name for s, _ in second] == ["c0000.jpg"]
    assert first[0][1].score == 1.0
