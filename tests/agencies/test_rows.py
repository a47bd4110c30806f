"""Agency specs (data) and the rules that turn metadata into a row: one behaviour per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.agencies.catalog import all_specs
from tasks.agencies.categories import hint_to_id
from tasks.agencies.embedded import embedded_fields
from tasks.agencies.rows import build_row, check_csv_defaults, split_keywords
from tasks.agencies.spec import load_spec, parse_spec
from tasks.agencies.text import clean_cell, shorten
from tasks.core.errors import ConfigError
from tasks.core.records import Metadata
from tasks.images.demo import DEMO_PROMPTS

ADOBE_HEADER = "Filename,Title,Keywords,Category,Releases"
VECTEEZY_HEADER = "Filename,Title,Description,Keywords"
DREAMSTIME_HEADER = ("Filename,Image Name,Description,Category 1,Category 2,Category 3,keywords,"
                     "Free,W-EL,P-EL,SR-EL,SR-Price,Editorial,MR doc Ids,Pr Docs")


def md(**kw) -> Metadata:
    base = dict(title="Sunset over a calm sea", description="A glowing sun sets over a calm sea.",
                keywords=["sunset", "sea", "sun", "horizon", "ocean", "evening"])
    return Metadata(**{**base, **kw})


def row(agency: str, metadata: Metadata, filename: str = "sunset_sea_000.jpg", defaults=None):
    return build_row(load_spec(agency), metadata, filename, defaults or {})


def cell(agency: str, result, column: str) -> str:
    return result.cells[load_spec(agency).header_row().index(column)]


# --- the specs --------------------------------------------------------------------------


def test_headers_are_exactly_the_agencies_templates():
    assert ",".join(load_spec("adobe").header_row()) == ADOBE_HEADER
    assert ",".join(load_spec("vecteezy").header_row()) == VECTEEZY_HEADER
    assert ",".join(load_spec("dreamstime").header_row()) == DREAMSTIME_HEADER


def test_all_specs_come_in_the_fixed_agency_order():
    assert list(all_specs()) == ["adobe", "vecteezy", "dreamstime", "shutterstock", "freepik", "123rf",
                                 "depositphotos", "pond5", "alamy"]


def test_vecteezy_license_column_is_off_by_default_and_added_when_configured():
    spec = load_spec("vecteezy")
    assert spec.header_row({}) == VECTEEZY_HEADER.split(",")
    assert spec.header_row({"License": "pro"}) == VECTEEZY_HEADER.split(",") + ["License"]
    result = row("vecteezy", md(), defaults={"License": "free"})
    assert result.cells[-1] == "free"


def test_adobe_categories_are_the_21_named_ones():
    table = load_spec("adobe").categories.table
    assert sorted(table) == list(range(1, 22))
    assert table[11] == "Landscapes" and table[21] == "Travel" and table[6] == "States of Mind"


def test_dreamstime_category_table_is_the_legend_with_its_source_noted():
    cats = load_spec("dreamstime").categories
    assert "legend" in cats.source.lower()
    assert cats.table[23] == "Nature / Sunsets & Sunrises"
    assert cats.table[112] == "Abstract / Backgrounds"
    assert cats.table[212] == "Illustrations & Clipart / AI generated"
    # parent group ids (8 Nature, 29 Animals, 38 Abstract) are headings, not choosable ids
    assert not {8, 29, 38} & set(cats.table)


def test_image_and_transport_limits_are_exposed_for_pack_and_upload():
    adobe, vecteezy, dreamstime = (load_spec(a) for a in ("adobe", "vecteezy", "dreamstime"))
    assert ((adobe.image.min_pixels, adobe.image.max_pixels, adobe.image.max_bytes)
            == (4_000_000, 100_000_000, 45_000_000))
    assert (vecteezy.image.min_pixels, vecteezy.image.max_pixels, vecteezy.image.max_bytes) == (
        4_000_000, 50_000_000, 50_000_000)
    assert dreamstime.image.min_pixels == 3_000_000 and dreamstime.image.max_pixels is None
    assert adobe.transport.target_example == "sftp://USER@sftp.contributor.adobestock.com:22/"
    assert dreamstime.transport.target_example == "ftp://USER@upload.dreamstime.com:21/"
    assert dreamstime.transport.passive is True and dreamstime.transport.folder == "/"
    assert adobe.transport.csv_upload == "portal"


def test_csv_limits_per_file():
    assert (load_spec("adobe").csv.max_rows, load_spec("adobe").csv.max_bytes) == (5000, 1_000_000)
    assert not any(s.csv.bom for s in all_specs().values())
    small = load_spec("adobe").with_limits(max_rows=2)
    assert (small.csv.max_rows, small.csv.max_bytes) == (2, 1_000_000)


def test_a_spec_whose_columns_do_not_spell_its_header_is_refused():
    text = (
        'display_name = "X"\nheader = "Filename,Title"\n'
        '[[columns]]\nname = "Filename"\nsource = "filename"\n'
        '[[columns]]\nname = "Name"\nsource = "title"\n'
        '[transport]\nprotocol = "web"\n'
    )
    with pytest.raises(ConfigError, match="x.toml.*do not spell the header"):
        parse_spec(text, "x.toml", "x")


def test_unknown_agency_spec_is_a_config_error():
    with pytest.raises(ConfigError, match="no agency spec for 'istock'"):
        load_spec("istock")


def test_demo_prompts_carry_real_dreamstime_and_adobe_ids():
    dreamstime, adobe = load_spec("dreamstime").categories.table, load_spec("adobe").categories.table
    for prompt in DEMO_PROMPTS:
        assert prompt.adobe_category in adobe
        assert prompt.dreamstime_categories and set(prompt.dreamstime_categories) <= set(dreamstime), prompt.slug


# --- cleaning ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw, clean", [
    ("=SUM(A1:A2)", "SUM(A1:A2)"),
    ("+-@= x", "x"),
    ("  two\n lines\r\n\tand tab ", "two lines and tab"),
    ("bell\x07 and nul\x00", "bell and nul"),
    ("right\u202eto-left override", "rightto-left override"),
    ("line\u2028separator", "line separator"),
    ("夕日と海", "夕日と海"),
    ("a - b", "a - b"),  # a dash inside text is kept
])
def test_clean_cell(raw, clean):
    assert clean_cell(raw) == clean


def test_shorten_cuts_at_a_word_boundary_never_mid_word():
    text = "Sunset over a calm sea with a glowing sun and boats"
    assert shorten(text, 20) == "Sunset over a calm"
    assert shorten(text, 100) == text
    assert shorten("Supercalifragilistic expialidocious", 10) is None
    assert shorten("alpha, beta gamma", 9) == "alpha"  # no dangling comma
    assert shorten("海に沈む夕日と静かな波", 5) == "海に沈む夕"  # CJK breaks between characters


# --- Adobe ------------------------------------------------------------------------------


def test_adobe_title_shortened_to_70_at_a_word_boundary_and_reported():
    long = "Sunset over a calm sea " * 14
    result = row("adobe", md(title=long))
    title = cell("adobe", result, "Title")
    assert len(title) <= 70 and long.startswith(title) and long[len(title)] == " "
    assert any(f.rule == "title.max_chars" for f in result.fixes)


def test_adobe_title_loses_its_commas():
    result = row("adobe", md(title="Sunset, sea, and sky"))
    assert cell("adobe", result, "Title") == "Sunset sea and sky"


def test_adobe_keywords_deduplicated_case_insensitively_capped_at_50_in_order():
    kws = ["Sunset", "sunset", "", "  ", "SEA"] + [f"kw{i}" for i in range(80)] + ["sea"]
    result = row("adobe", md(keywords=kws))
    written = split_keywords(load_spec("adobe"), cell("adobe", result, "Keywords"))
    assert written == (["Sunset", "SEA"] + [f"kw{i}" for i in range(48)])
    assert {"keywords.duplicates", "keywords.max"} <= {f.rule for f in result.fixes}


def test_adobe_keyword_with_a_comma_becomes_two_keywords():
    result = row("adobe", md(keywords=["red, blue", "green"]))
    assert cell("adobe", result, "Keywords") == "red,blue,green"


def test_adobe_category_kept_when_valid_mapped_from_hints_when_out_of_range_else_empty():
    assert cell("adobe", row("adobe", md(adobe_category=7)), "Category") == "7"
    mapped = row("adobe", md(adobe_category=99, category_hints=["landscape"]))
    assert cell("adobe", mapped, "Category") == "11"
    assert {"category.out_of_range", "category.mapped"} <= {f.rule for f in mapped.fixes}
    empty = row("adobe", md(adobe_category=0, category_hints=["zzz"]))
    assert cell("adobe", empty, "Category") == ""


def test_adobe_releases_joined_empty_when_none():
    assert cell("adobe", row("adobe", md()), "Releases") == ""
    assert cell("adobe", row("adobe", md(releases=["Model A", "model a", "Prop, B"])), "Releases") == "Model A,Prop B"


def test_adobe_long_ingested_filename_is_a_problem_for_adobe_only():
    name = "a_very_long_ingested_file_name_2024.jpg"  # 39 characters
    adobe = row("adobe", md(), filename=name)
    assert not adobe.ok and [p.rule for p in adobe.problems] == ["filename.max_chars"]
    assert "at most 30" in adobe.problems[0].message
    assert row("dreamstime", md(), filename=name).ok


def test_generated_names_fit_adobe():
    from tasks.images.demo import generated_name

    for prompt in DEMO_PROMPTS:
        assert row("adobe", md(), filename=generated_name(prompt, 12345, 999)).ok


def test_filename_that_would_run_as_a_formula_is_reported_not_rewritten():
    result = row("dreamstime", md(), filename="=cmd.jpg")
    assert not result.ok and result.problems[0].rule == "filename.unsafe"


# --- Vecteezy ---------------------------------------------------------------------------


def test_vecteezy_title_capitalised_and_punctuation_limited():
    result = row("vecteezy", md(title="sunset! over the sea: (calm) & quiet — it's \"nice\"."))
    assert cell("vecteezy", result, "Title") == "Sunset over the sea calm quiet it's nice."


def test_vecteezy_fewer_than_5_keywords_is_a_problem_not_a_silent_write():
    result = row("vecteezy", md(keywords=["sunset", "sea", "Sea", "sun"]))
    assert not result.ok and result.problems[0].rule == "keywords.min"
    assert "3 keyword(s)" in result.problems[0].message


def test_vecteezy_takes_english_only():
    japanese = row("vecteezy", md(title="海に沈む夕日"))
    assert not japanese.ok and japanese.problems[0].rule == "title.latin_only"
    assert not row("vecteezy", md(language="ja")).ok
    assert row("vecteezy", md(title="Café crème at sunset")).ok


# --- Dreamstime -------------------------------------------------------------------------


def test_dreamstime_keywords_are_single_words_deduplicated_in_order():
    result = row("dreamstime", md(keywords=["orange sky", "sky", "Sea  water", "sea"]))
    assert cell("dreamstime", result, "keywords") == "orange,sky,Sea,water"


def test_dreamstime_categories_validated_else_mapped_from_hints_unused_zero():
    assert [cell("dreamstime", row("dreamstime", md(dreamstime_categories=[23, 999, 19])), f"Category {i}")
            for i in (1, 2, 3)] == ["23", "19", "0"]
    mapped = row("dreamstime", md(category_hints=["sunsets", "seascapes", "mountains"]))
    assert [cell("dreamstime", mapped, f"Category {i}") for i in (1, 2, 3)] == ["23", "19", "15"]


def test_dreamstime_hints_never_pick_editorial_or_ai_ids():
    cats = load_spec("dreamstime").categories
    assert hint_to_id(cats, "celebrities") is None
    assert hint_to_id(cats, "ai generated") is None
    assert hint_to_id(cats, "skies") == 22


def test_dreamstime_config_columns_from_settings_and_editorial_from_metadata():
    result = row("dreamstime", md(editorial=True), defaults={"W-EL": "1", "SR-Price": "250", "MR doc Ids": "12, 34"})
    got = {c: cell("dreamstime", result, c) for c in ("Free", "W-EL", "SR-Price", "Editorial", "MR doc Ids", "Pr Docs")}
    assert got == {"Free": "0", "W-EL": "1", "SR-Price": "250", "Editorial": "1", "MR doc Ids": "12,34", "Pr Docs": ""}


def test_dreamstime_image_name_and_description_never_empty():
    result = row("dreamstime", md(description="  \n "))
    assert cell("dreamstime", result, "Description") == "Sunset over a calm sea"
    empty = row("dreamstime", md(title="=", description="@"))
    assert not empty.ok and {p.rule for p in empty.problems} == {"title.empty", "description.empty"}


def test_invalid_or_unknown_csv_defaults_are_named():
    problems = check_csv_defaults(load_spec("dreamstime"), {"W-EL": "yes", "Colour": "1", "SR-Price": "ten"})
    assert [p.rule for p in problems] == ["config.unknown_column", "config.SR-Price", "config.W-EL"]
    assert "W-EL must be 0 or 1" in problems[2].message
    assert check_csv_defaults(load_spec("adobe"), {}) == []


# --- rows are deterministic; embedded fields take the strictest limits ----------------------


def test_same_input_same_row():
    m = md(title="Sunset " * 30, keywords=["a b", "A", "c"] * 20, adobe_category=50, category_hints=["nature"])
    for agency in all_specs():
        assert row(agency, m) == row(agency, m)


def test_embedded_fields_use_the_strictest_limits():
    m = md(title="Sunset over a calm sea " * 10, keywords=[f"k{i}" for i in range(60)] + ["K1"])
    fields = embedded_fields(m, all_specs().values())
    assert len(fields.title) <= 70
    assert list(fields.keywords) == [f"k{i}" for i in range(50)]


def test_a_spec_whose_agency_takes_no_jpeg_is_refused():
    text = (Path(__file__).parents[2] / "tasks" / "agencies" / "adobe.toml").read_text(encoding="utf-8")
    assert 'formats = ["JPEG"]' in text
    with pytest.raises(ConfigError, match="x.toml: image.*leave out JPEG"):
        parse_spec(text.replace('formats = ["JPEG"]', 'formats = ["TIFF"]'), "x.toml", "x")
