"""The portfolio: every asset ever packed in this workdir, as the similarity check sees it, and a fast search.

``packs/portfolio.jsonl`` has one JSON object per line and asset (its
content id ``sha256``, name, ``dhash``, ``phash``, ``colour``, title, first
ten keywords; a clip's ``frames`` too, the looks of each frame of its signature), kept
when the asset leaves the batch (the pack manifest drops
it then), with a 96 px copy of its thumbnail in ``packs/portfolio/<sha256[:16]>.jpg``
so the review form can show it later and the similarity check can tell a
re-encoding of it from a version (``tasks.images.similar.same_picture``). Which of them were uploaded to an
agency is the ledger's answer, never this file's. A line that cannot be read
is skipped; the file is rewritten whole (atomically) when assets are added.

:class:`SignatureIndex` finds the candidates worth scoring without comparing
with every asset (multi-index hashing): each 64-bit hash is cut into bands
and two assets whose hashes share two of the 16 bands are candidates, as are
assets with nearly the same mean colour or sharing a title word or one of
the first keywords (a word that more than 1 % of the assets have finds
none by itself). It can miss a pair that scoring everything finds: a pair
whose hashes differ in every band but one, whose mean colours are further
apart than one cell and whose words are all common. docs/BENCHMARKS.md
("Similar-content risk") counts what it missed on the labelled set and its
speed at 20,000.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel

from tasks.core.files import atomic_write_bytes, exclusive_lock
from tasks.core.records import ready_name
from tasks.core.state_files import read_lines
from tasks.core.workdir import Workdir
from tasks.images.likeness import Likeness, Signature, likeness
from tasks.images.similar import Looks, small_thumbnail

log = logging.getLogger(__name__)

#: Each hash is cut into this many bands of 64 / BANDS bits.
BANDS = 8
#: Hash bands (of dHash's and pHash's 2 × BANDS) two assets must share to be candidates by their hashes.
MIN_SHARED = 2
#: A word shared by more than this share of the indexed assets finds no candidates by itself ("landscape").
_COMMON_WORD = 0.01
#: Mean colour cells (per channel) for the colour candidates; neighbours are looked up too.
_COLOUR_STEP = 16


def portfolio_path(wd: Workdir) -> Path:
    return wd.packs / "portfolio.jsonl"


def portfolio_thumb(wd: Workdir, sha256: str) -> Path:
    """Where the portfolio keeps an asset's thumbnail."""
    return wd.packs / "portfolio" / f"{sha256[:16]}.jpg"


def _line(sig: Signature) -> dict:
    clip = {"frames": [f.as_manifest() for f in sig.frames]} if sig.is_clip else {}
    return {"sha256": sig.sha256, "name": sig.name, **sig.looks.as_manifest(), "title": sig.title,
            "keywords": list(sig.keywords), **clip}


class PortfolioLine(BaseModel):
    """One line of ``packs/portfolio.jsonl``, as :func:`_line` writes it (the hashes as ``Looks`` keeps them)."""

    sha256: str
    name: str
    title: str = ""
    keywords: tuple[str, ...] = ()


def _signature(d: dict) -> Signature:
    """One line's signature; ValueError when it is of the wrong shape or its hashes are missing."""
    line = PortfolioLine.model_validate(d)
    looks = Looks.from_manifest(d)
    frames = tuple(Looks.from_manifest(f) for f in d.get("frames") or ())
    if looks is None or None in frames:
        raise ValueError("hashes missing")
    return Signature(line.name, line.sha256, looks, line.title, line.keywords, frames)  # type: ignore[arg-type]


def read_portfolio(wd: Workdir) -> dict[str, Signature]:
    """sha256 -> the asset's signature, for every asset the portfolio holds (a damaged line is skipped and
    named; a file that cannot be read is set aside and the portfolio starts again from this batch)."""
    return {sig.sha256: sig for sig in read_lines(portfolio_path(wd), _signature,
                                                  instead="the portfolio starts again from this batch")}


def add_to_portfolio(wd: Workdir, known: dict[str, Signature], batch: Iterable[Signature],
                     thumbs: Callable[[str], Path] | None = None) -> dict[str, Signature]:
    """``known`` with the batch's signatures added (a changed title or keywords replaces the line).

    Keeps a 96 px copy of each new asset's thumbnail (``packs/portfolio/``; ``thumbs`` says where an asset's
    thumbnail is, by name: by default the packed image's) and rewrites the file only when
    something changed: under ``packs/.portfolio.lock``, over the file as it is then, so what another run
    added meanwhile is kept.
    """
    changed: dict[str, Signature] = {}
    out = dict(known)
    for sig in batch:
        if out.get(sig.sha256) != sig:
            out[sig.sha256] = changed[sig.sha256] = sig
        kept = portfolio_thumb(wd, sig.sha256)
        if not kept.exists():
            small = small_thumbnail(thumbs(sig.name) if thumbs else wd.packs / "thumbs" / ready_name(sig.name))
            if small is not None:
                kept.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(kept, small)
    if changed:
        with exclusive_lock(wd.packs / ".portfolio.lock", "the portfolio"):
            out = {**read_portfolio(wd), **changed}
            data = "".join(json.dumps(_line(s), ensure_ascii=False) + "\n"
                           for s in sorted(out.values(), key=lambda s: (s.name, s.sha256)))
            atomic_write_bytes(portfolio_path(wd), data.encode("utf-8"))
    return out


def _words(sig: Signature) -> frozenset[str]:
    return sig.title_words | sig.first_keywords


def _mean_colour(sig: Signature) -> tuple[int, int, int]:
    c = sig.looks.colour
    cells = max(1, len(c) // 3)
    return tuple(sum(c[i::3]) // cells // _COLOUR_STEP for i in range(3))  # type: ignore[return-value]


class SignatureIndex:
    """Assets to search, and :meth:`nearest`: those at least as alike as a threshold, without an n² scan.

    Assets with identical looks (the same picture: every pair of them scores 1) are searched as one: the
    first of them stands for the others, so a batch of thousands of copies costs what one does.
    """

    def __init__(self, signatures: Iterable[Signature], bands: int = BANDS, min_shared: int = MIN_SHARED) -> None:
        same: dict[tuple, list[Signature]] = {}
        for sig in signatures:
            same.setdefault((sig.looks, sig.frames), []).append(sig)
        self._copies = list(same.values())
        self.items = [copies[0] for copies in self._copies]
        self.min_shared = min_shared
        self.bands, self._width = bands, 64 // bands
        self._by_band: dict[tuple, list[int]] = defaultdict(list)
        self._by_word: dict[str, list[int]] = defaultdict(list)
        self._by_colour: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        for i, sig in enumerate(self.items):
            for key in self._band_keys(sig):
                self._by_band[key].append(i)
            for w in _words(sig):
                self._by_word[w].append(i)
            self._by_colour[_mean_colour(sig)].append(i)
        self._common = max(20, int(len(self.items) * _COMMON_WORD))

    def _band_keys(self, sig: Signature) -> Iterable[tuple]:
        mask = (1 << self._width) - 1
        for kind, h in (("d", sig.looks.dhash), ("p", sig.looks.phash)):
            for b in range(self.bands):
                yield kind, b, (h >> (b * self._width)) & mask

    def candidates(self, sig: Signature) -> set[int]:
        """Indexes of the assets that share ``min_shared`` hash bands, a mean colour cell (or its neighbour) or
        a word that is not common."""
        shared: Counter[int] = Counter()
        for key in self._band_keys(sig):
            shared.update(self._by_band.get(key, ()))
        found = {i for i, n in shared.items() if n >= self.min_shared}
        r, g, b = _mean_colour(sig)
        for dr in (-1, 0, 1):
            for dg in (-1, 0, 1):
                for db in (-1, 0, 1):
                    found.update(self._by_colour.get((r + dr, g + dg, b + db), ()))
        words: Counter[int] = Counter()
        for w in _words(sig):
            hits = self._by_word.get(w, ())
            if len(hits) <= self._common:
                words.update(hits)
        found.update(i for i, n in words.items() if n >= self.min_shared)
        return found

    def nearest(self, sig: Signature, threshold: float, same_motif_bits: int = 8,
                exhaustive: bool = False) -> list[tuple[Signature, Likeness]]:
        """The other assets (not ``sig``'s content) scoring at least ``threshold`` with ``sig``, best first.

        The best candidate is returned as well when it scores below (the nearest earlier asset is shown
        whatever its score). ``exhaustive`` scores every asset (the benchmark's reference).
        """
        pool = range(len(self.items)) if exhaustive else self.candidates(sig)
        scored = []
        for i in pool:
            other = next((c for c in self._copies[i] if c.sha256 != sig.sha256), None)  # a copy stands for all
            if other is not None:
                scored.append((other, likeness(sig, other, same_motif_bits)))
        scored.sort(key=lambda p: (-p[1].score, p[0].name))
        return [p for n, p in enumerate(scored) if n == 0 or p[1].score >= threshold]
