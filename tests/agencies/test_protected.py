"""Protected names found in prompts and metadata (tasks/agencies/protected.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tasks.agencies.catalog import all_specs
from tasks.agencies.protected import ProtectedNames, check_prompts, shipped_names, skeleton
from tasks.agencies.text import clean_cell, prepare, shorten
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


#: text -> the names found in it: each way of writing a name around the list (issue 50), and words that hold a
#: name only as a part or look like one (found in none)
FORMS = {
    "N\u200bike sneakers on a bench": ["Nike"],  # a zero-width space
    "Spider\u00adMan mask": ["Spider-Man"],  # a soft hyphen
    "Spider_Man figure": ["Spider-Man"],
    "Nikes": ["Nike"], "N\u0456ke": ["Nike"], "\u039d\u0399\u039a\u0395": ["Nike"],  # Cyrillic і; Greek ΝΙΚΕ
    "\uff2e\uff49\uff4b\uff45": ["Nike"], "N\u2060i\ufe0fke": ["Nike"], "Ni\x07ke": ["Nike"],  # fullwidth; joiners
    "spider_man": ["Spider-Man"], "Picassos": ["Picasso"], "batman2": ["Batman"], "Coca_Cola": ["Coca-Cola"],
    "Coca-Colas": ["Coca-Cola"], "coca.cola": ["Coca-Cola"], "Spider'Man": ["Spider-Man"], "Nike\u732b": ["Nike"],
    "monetary": [], "pepsin": [], "nikel": [], "legocity": [], "batmobile": [], "superb": [], "Disneyland": [],
    "N1ke": [], "ironing": [], "Lego\u0442\u0430": [],
}


@pytest.mark.parametrize("text", list(FORMS), ids=[repr(t) for t in FORMS])
def test_a_name_is_found_however_it_is_written_around_the_list_and_parts_of_words_are_not_names(text):
    names = ProtectedNames.of(KeywordSettings())
    assert [n.name for n in names.found_in(text)] == FORMS[text], skeleton(text)


def test_the_skeleton_is_the_text_as_matched():
    assert skeleton("  \uff2e\u0456ke_Air\u00ad-Max\u200b 2  ") == "nike air max 2"
    assert skeleton("Caf\u00e9 \u2019s") == "cafe 's"


#: pieces of text that names are made of, and every kind of character a cleaning step drops, joins or splits at
_PIECES = ["Spider", "Man", "Nike", "Coca", "Cola", "s", "2", "a", " ", "-", "_", ",", ".", "'", "\u2019", "\u200b",
           "\u00ad", "\u200d", "\x07", "\n", "=", "\u732b", "\u0456", "generative AI"]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), st.integers(5, 40))
@example("Spider\u00adMan", 40).via("issue 50: a soft hyphen dropped")
@example("N\u200bike", 40).via("issue 50: a zero-width space dropped")
@example("Spider_Man", 40).via("issue 50: Adobe's title rule makes _ a space")
@example("Nike\u732bs", 5).via("a cut between a Latin and a wide character")
def test_no_cleaning_step_makes_a_name_the_text_itself_did_not_hold(text, cut):
    """What the check sees in a text covers what every cleaning of it can show: each agency's title and description
    rules, clean_cell, a cut at a word boundary."""
    names = ProtectedNames.of(KeywordSettings())
    held = {n.name for n in names.found_in(text)}
    rules = {r for spec in all_specs().values() for r in (spec.title, spec.description)}
    cleaned = [clean_cell(text), *(prepare(rule, text) for rule in rules)]
    for value in [*cleaned, *(shorten(c, cut) or "" for c in cleaned)]:
        assert {n.name for n in names.found_in(value)} <= held, (text, value)


def test_a_name_only_the_embedded_title_shows_holds_the_asset_back_where_names_are_refused():
    """The JPEG's title is written once for every agency, losing the forbidden terms of all of them: a term another
    agency forbids, removed, joins "Spider" and "Man" in the JPEG while Adobe's own cell keeps them apart."""
    from tasks.agencies.embedded import embedded_fields
    from tasks.agencies.rows import build_row
    from tasks.agencies.spec import load_spec
    from tasks.core.records import Metadata

    names = ProtectedNames.of(KeywordSettings())
    adobe = load_spec("adobe")
    mine = adobe.model_copy(update={"name": "mine", "ai": adobe.ai.model_copy(update={"forbidden_terms": ["magic"]})})
    md = Metadata(title="Spider magic Man costume", description="A costume", keywords=[f"k{i}" for i in range(8)],
                  ai_generated=True)
    fields = embedded_fields(md, [adobe, mine], names)
    assert fields.title == "Spider Man costume"
    assert build_row(adobe, md, "a.jpg", names=names).ok  # the cell alone: "Spider magic Man costume"
    row = build_row(adobe, md, "a.jpg", names=names, embedded=fields)
    assert [p.message.split(":")[0] for p in row.problems] == [
        "the title embedded in the upload-ready JPEG names 'Spider-Man' (character)"]
