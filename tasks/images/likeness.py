"""How alike two assets are: one score from their looks, titles and first keywords.

Each signal catches what the others miss (measured in docs/BENCHMARKS.md,
"Similar-content risk"):

* ``dhash`` — brightness gradients: the same picture re-encoded, with noise,
  blurred, brightened, colour-shifted or cropped by a few per cent;
* ``phash`` — the picture's coarse shape (lowest DCT frequencies): the same
  edits, with a wider gap to other scenes, so a larger crop still counts;
* ``colour`` — where which colour sits (a 4×4 layout): the same prompt drawn
  again with another seed keeps it when every hash has moved (a colour or
  brightness shift lowers it; the hashes keep those);
* ``title`` — title words shared (Jaccard after lower-casing, dropping small
  words and a plural ``s``): a re-titled copy, or a series named alike;
* ``keywords`` — the first ten keywords shared. Adobe ranks by the first ten
  most ("the first 10 keywords are the most important", docs/AGENCIES.md).

Each signal becomes a similarity in 0–1 and the score is their weighted sum
(:data:`WEIGHTS`, summing to 1). A pair whose dHashes are within the old
``pack.similar_max_distance`` bits scores 1 unless their colour layouts are
unrelated (similarity 0): the old guard's motifs stay motifs, except two
pictures of one composition in wholly different palettes (a sunset and a
desert of the demo generator, 7 bits apart, were one motif to it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from tasks.images.similar import Looks, colour_difference, distance

#: Weights of the five similarities in the score (docs/AGENCIES.md, "Similar content").
WEIGHTS = {"dhash": 0.15, "phash": 0.25, "colour": 0.25, "title": 0.15, "keywords": 0.20}
#: A hash distance at or below ``_SAME_BITS`` is similarity 1; at or above ``_RANDOM_BITS`` (two unrelated
#: 64-bit hashes differ in about 32) it is 0; linear between.
_SAME_BITS, _RANDOM_BITS = 4, 28
#: A colour layout difference (mean absolute, 0–255) at or below 4 is similarity 1, at or above 48 it is 0.
_SAME_COLOUR, _OTHER_COLOUR = 4.0, 48.0
#: Keywords compared: Adobe weights the first ten most.
FIRST_KEYWORDS = 10
#: Two assets' first keywords are "nearly the same" from this Jaccard on (8 of 10 shared and two others: 0.67;
#: 9 of 10: 0.82): this project's choice, no agency gives a figure.
SAME_KEYWORDS = 0.8
_SMALL_WORDS = frozenset("a an and at by for from in into of on or over the to under with".split())


@dataclass(frozen=True)
class Signature:
    """One asset as the similarity check sees it: its name and content id, looks, title and first keywords."""

    name: str
    sha256: str
    looks: Looks
    title: str = ""
    keywords: tuple[str, ...] = ()
    #: A clip's: the looks of its frames in time order (``looks`` is the middle one); () for an image.
    frames: tuple[Looks, ...] = ()
    #: A clip's: the digest of those frames' decoded pixels (``tasks.images.clip_signature``); "" for an image.
    digest: str = field(default="", compare=False)

    @property
    def is_clip(self) -> bool:
        return bool(self.frames)

    @cached_property  # worked out once per asset, not per pair
    def title_words(self) -> frozenset[str]:
        return title_words(self.title)

    @cached_property
    def first_keywords(self) -> frozenset[str]:
        return frozenset(k.strip().lower() for k in self.keywords[:FIRST_KEYWORDS] if k.strip())


def title_words(title: str) -> frozenset[str]:
    """The words of a title that say something: lower case, small words dropped, a plural ``s`` cut."""
    words = re.findall(r"[^\W_]+", title.lower())
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                     for w in words if w not in _SMALL_WORDS)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def named_alike(a: Signature, b: Signature) -> bool:
    """The same title words and nearly the same first ten keywords (:data:`SAME_KEYWORDS` of them shared, by
    Jaccard): a series named alike, which reviewers read as spam whatever the pictures (docs/AGENCIES.md)."""
    return bool(a.title_words) and a.title_words == b.title_words and (
        _jaccard(a.first_keywords, b.first_keywords) >= SAME_KEYWORDS)


def _ramp(value: float, same: float, other: float) -> float:
    return max(0.0, min(1.0, (other - value) / (other - same)))


@dataclass(frozen=True)
class Likeness:
    """How alike two assets are: the score and each signal's similarity (for the words that explain it)."""

    score: float
    parts: dict[str, float]

    def why(self) -> str:
        """The signals that made the score, strongest first (``"colour 0.95, title 1.00"``)."""
        strong = sorted(((v, k) for k, v in self.parts.items() if v >= 0.5), reverse=True)
        return ", ".join(f"{k} {v:.2f}" for v, k in strong) or "weak on every signal"


def likeness(a: Signature, b: Signature, same_motif_bits: int = 8) -> Likeness:
    """The score (0–1) of two assets, 1 when their dHashes are within ``same_motif_bits`` and their colours
    are not unrelated. Two clips are compared frame by frame (the first with the first…): each looks signal is
    the mean over the frames, and they are the same motif when every frame pair is."""
    if a.is_clip and b.is_clip:
        pairs = list(zip(a.frames, b.frames, strict=False))  # a kept signature may have other frames
        looked = [_looks_parts(x, y) for x, y in pairs]
        parts = {k: sum(p[k] for p in looked) / len(looked) for k in ("dhash", "phash", "colour")}
        same = all(distance(x.dhash, y.dhash) <= same_motif_bits and p["colour"] > 0
                   for (x, y), p in zip(pairs, looked, strict=True))
    else:
        parts = _looks_parts(a.looks, b.looks)
        same = distance(a.looks.dhash, b.looks.dhash) <= same_motif_bits and parts["colour"] > 0
    parts |= {"title": _jaccard(a.title_words, b.title_words),
              "keywords": _jaccard(a.first_keywords, b.first_keywords)}
    score = 1.0 if same else sum(WEIGHTS[k] * v for k, v in parts.items())
    return Likeness(round(score, 3), parts)


#: The looks' similarities (dHash, pHash, colour layout) from which two images may be one picture saved twice
#: (at most 8.8 bits apart, colour layouts within 12.8): only such pairs have their pixels compared. Every
#: re-encoding and scaling of ``bench.duplicate_bench`` is within (a scaling moves dHash up to 5 bits).
CLOSE_LOOKS = 0.8


def looks_close(like: Likeness) -> bool:
    """Whether a pair's looks are close enough (:data:`CLOSE_LOOKS`) for it to be one picture saved twice."""
    return all(like.parts[k] >= CLOSE_LOOKS for k in ("dhash", "phash", "colour"))


def _looks_parts(a: Looks, b: Looks) -> dict[str, float]:
    """The similarities of two looks' signals (dHash, pHash, colour layout), each 0–1."""
    return {"dhash": _ramp(distance(a.dhash, b.dhash), _SAME_BITS, _RANDOM_BITS),
            "phash": _ramp(distance(a.phash, b.phash), _SAME_BITS, _RANDOM_BITS),
            "colour": _ramp(colour_difference(a.colour, b.colour), _SAME_COLOUR, _OTHER_COLOUR)}
