"""The new signals and the score: what each catches, and the labelled set's precision and recall against dHash."""

from __future__ import annotations

import itertools

from tasks.images.likeness import Signature, likeness, title_words
from tasks.images.similar import Looks, distance, looks
from tests.images.similar_cases import labelled_cases, variant_image

#: The default threshold of an agency's [similarity] policy (tasks.agencies.spec.SimilarityPolicy).
THRESHOLD = 0.4


def test_a_re_render_with_another_seed_moves_dhash_far_but_keeps_the_colour_layout():
    a, b = looks(variant_image(0, "original")), looks(variant_image(0, "seed 2"))
    other = looks(variant_image(5, "original"))  # another horizon scene: same style, other palette
    assert distance(a.dhash, b.dhash) > 8  # the old guard calls the re-render distinct
    sa, sb, so = (Signature(n, n, lk) for n, lk in (("a", a), ("b", b), ("o", other)))
    assert likeness(sa, sb).parts["colour"] > 0.6 > likeness(sa, so).parts["colour"]


def test_title_words_ignore_case_small_words_and_plurals():
    assert title_words("Sunsets over the Calm Sea") == title_words("sunset, calm sea") == {"sunset", "calm", "sea"}


def test_on_the_labelled_set_the_score_finds_far_more_versions_than_dhash_at_no_worse_precision():
    cases = labelled_cases(scenes=range(0, 8, 2))  # four scenes of four styles, nine versions each
    truth, old, new = [], [], []
    for a, b in itertools.combinations(cases, 2):
        truth.append(a.scene == b.scene)
        old.append(distance(a.signature.looks.dhash, b.signature.looks.dhash) <= 8)
        new.append(likeness(a.signature, b.signature).score >= THRESHOLD)

    def precision_recall(found):
        tp = sum(f and t for f, t in zip(found, truth, strict=True))
        return tp / max(1, sum(found)), tp / sum(truth)

    (p_old, r_old), (p_new, r_new) = precision_recall(old), precision_recall(new)
    assert r_new >= r_old + 0.4 and p_new >= p_old, (p_old, r_old, p_new, r_new)


def test_the_old_guards_motif_stays_one_unless_the_palettes_are_unrelated():
    # Regression: a demo sunset and desert 7 dHash bits apart were one motif, held back at Adobe together.
    warm, cold = bytes([250, 120, 60] * 16), bytes([30, 90, 200] * 16)
    a = Signature("a", "a", Looks(0, 0, warm))
    near = Signature("b", "b", Looks(0b1111111, 1 << 40, bytes(max(0, v - 20) for v in warm)))
    other = Signature("c", "c", Looks(0b1111111, 1 << 40, cold))
    assert likeness(a, near).score == 1.0 and likeness(a, other).score < THRESHOLD
