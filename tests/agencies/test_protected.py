"""Protected names found in prompts and metadata (tasks/agencies/protected.py)."""

from __future__ import annotations

import pytest

from tasks.agencies.protected import ProtectedNames, check_prompts, shipped_names
from tasks.core.errors import ConfigError
from tasks.core.settings import KeywordSettings


def test_each_shipped_name_has_a_category_and_spellings_of_one_name_are_found_alike():
    assert {n.category for n in shipped_names()} == {"artist", "character", "brand"}
    names = ProtectedNames.of(KeywordSettings())
    for text in ("Spider-Man on a roof", "spiderman", "SPIDER MAN"):
        assert [n.name for n in names.found_in(text)] == ["Spider-Man"], text
    assert [n.name for n in names.found_in("Lunch at McDonalds, then Dalí-like clouds by Salvador Dalí")] == [
        "McDonald's", "Salvador Dali"]
    assert [str(n) for n in names.found_in("sunflowers in the style of Van Gogh")] == ["'van Gogh' (artist)"]


def test_whole_words_only_and_ordinary_words_are_not_names():
    names = ProtectedNames.of(KeywordSettings())
    assert names.found_in("a legocity of bricks, an apple, a nikel coin, a shell on the beach") == []
    assert [n.name for n in names.found_in("LEGO bricks")] == ["Lego"]


def test_the_contributors_own_names_are_added_and_allowed_ones_taken_off():
    names = ProtectedNames.of(KeywordSettings(protected_names=["Acme Widgets"], allowed_names=["lego", "NIKE"]))
    assert [str(n) for n in names.found_in("acme-widgets with lego and nike")] == ["'Acme Widgets' (yours)"]
    assert "Lego" not in names.listed() and "Acme Widgets" in names.listed()


def test_a_prompt_naming_one_is_refused_with_the_name_and_clean_ones_are_not():
    names = ProtectedNames.of(KeywordSettings())
    with pytest.raises(ConfigError, match=r"generate.prompts: 'A starry night in the style of Van Gogh' names "
                                          r"'van Gogh' \(artist\)"):
        check_prompts(["A quiet village", "A starry night in the style of Van Gogh"], names)
    check_prompts(["A starry night over a quiet village", "Sneakers on a shelf"], names)


def test_a_title_naming_one_holds_the_asset_back_where_the_spec_says_so_and_only_there():
    from tasks.agencies.rows import build_row
    from tasks.agencies.spec import load_spec
    from tasks.core.records import Metadata

    names = ProtectedNames.of(KeywordSettings())
    md = Metadata(title="Red sneakers like Nike ones", description="Red sneakers on a shelf",
                  keywords=[f"k{i}" for i in range(8)])
    adobe = build_row(load_spec("adobe"), md, "a.jpg", names=names)
    assert not adobe.ok and [p.rule for p in adobe.problems] == ["names.protected"]
    assert "the title names 'Nike' (brand): Adobe Stock refuses protected names" in adobe.problems[0].message
    assert build_row(load_spec("vecteezy"), md, "a.jpg", names=names).ok  # no such rule of Vecteezy's was found
    editorial = md.model_copy(update={"editorial": True})
    sstk = load_spec("shutterstock")
    assert "names.protected" not in {p.rule for p in build_row(sstk, editorial, "a.jpg", names=names).problems}
    assert "names.protected" in {p.rule for p in build_row(sstk, md, "a.jpg", names=names).problems}
    allowed = ProtectedNames.of(KeywordSettings(allowed_names=["nike"]))
    assert build_row(load_spec("adobe"), md, "a.jpg", names=allowed).ok
    # a keyword naming one (a sidecar from before the rules, a hand correction) is removed at every agency
    typed = md.model_copy(update={"title": "Red sneakers", "keywords": [*md.keywords, "Nike Air", "iPhone"]})
    row = build_row(load_spec("vecteezy"), typed, "a.jpg", names=names)
    assert row.ok and row.cells[3] == ",".join(md.keywords)  # the Keywords column: k0…k7 only
    assert any(f.rule == "names.protected" and "Nike Air, iPhone" in f.message for f in row.fixes)
