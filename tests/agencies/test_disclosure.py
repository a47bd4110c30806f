"""AI rules per agency as spec data: Dreamstime's description note and AI category, Adobe's forbidden wording."""

from __future__ import annotations

from importlib import resources

import pytest

from tasks.agencies.catalog import all_specs
from tasks.agencies.disclosure import with_category, with_note
from tasks.agencies.embedded import embedded_fields
from tasks.agencies.rows import build_row
from tasks.agencies.spec import TextRule, load_spec, parse_spec
from tasks.agencies.text import remove_terms
from tasks.core.errors import ConfigError
from tasks.core.records import Metadata

DREAMSTIME_NOTE = load_spec("dreamstime").ai.description_note
AI_CATEGORY = "212"  # "Illustrations & Clipart / AI generated" in Dreamstime's legend


def md(**kw) -> Metadata:
    base = dict(title="Glass city at sunrise", description="A futuristic glass city at sunrise.",
                keywords=["city", "glass", "sunrise", "skyline", "towers", "future", "architecture"],
                dreamstime_categories=[131, 71])
    return Metadata(**{**base, **kw})


def cells(agency: str, metadata: Metadata) -> dict[str, str]:
    result = build_row(load_spec(agency), metadata, "city_000.jpg")
    assert result.ok, result.problems
    return dict(zip(load_spec(agency).header_row(), result.cells, strict=True))


def fixes(agency: str, metadata: Metadata) -> set[str]:
    return {f.rule for f in build_row(load_spec(agency), metadata, "city_000.jpg").fixes}


# --- Dreamstime --------------------------------------------------------------------------


def test_the_dreamstime_row_of_a_generated_asset_says_it_is_ai_generated():
    row = cells("dreamstime", md(ai_generated=True))
    assert row["Description"] == f"A futuristic glass city at sunrise. {DREAMSTIME_NOTE}"
    assert "AI-generated" in row["Description"]
    assert [row["Category 1"], row["Category 2"], row["Category 3"]] == ["131", "71", AI_CATEGORY]
    assert {"ai.description_note", "ai.category"} <= fixes("dreamstime", md(ai_generated=True))


def test_the_dreamstime_row_of_an_own_photo_says_nothing_of_ai_even_when_the_describer_chose_the_ai_category():
    row = cells("dreamstime", md(dreamstime_categories=[212, 131]))
    assert row["Description"] == "A futuristic glass city at sunrise." and "AI" not in row["Description"]
    assert [row["Category 1"], row["Category 2"], row["Category 3"]] == ["131", "0", "0"]
    assert "AI" not in ",".join(cells("dreamstime", md()).values())


def test_with_three_categories_taken_the_ai_category_replaces_the_last_one():
    row = cells("dreamstime", md(ai_generated=True, dreamstime_categories=[23, 19, 146]))
    assert [row["Category 1"], row["Category 2"], row["Category 3"]] == ["23", "19", AI_CATEGORY]
    already = cells("dreamstime", md(ai_generated=True, dreamstime_categories=[23, 212, 146]))
    assert [already["Category 1"], already["Category 2"], already["Category 3"]] == ["23", AI_CATEGORY, "146"]
    assert with_category([], 212, 3, ai=True) == ([212], "added category 212: the asset is AI-generated")


def test_the_note_is_added_once_and_a_description_without_a_full_stop_gets_one():
    assert with_note(f"City. {DREAMSTIME_NOTE}", DREAMSTIME_NOTE, None) == f"City. {DREAMSTIME_NOTE}"
    assert with_note("Glass city at dawn", "AI-generated.", None) == "Glass city at dawn. AI-generated."
    assert with_note("", "AI-generated.", None) == "AI-generated."


def test_the_note_fits_the_description_limit_by_shortening_the_description_at_a_word_boundary():
    spec = load_spec("dreamstime")
    limited = spec.model_copy(update={"description": TextRule(max_chars=len(DREAMSTIME_NOTE) + 20)})
    long = md(ai_generated=True, description="A futuristic glass city seen from the harbour at sunrise.")
    result = build_row(limited, long, "city_000.jpg")
    description = result.cells[spec.header_row().index("Description")]
    assert description.endswith(DREAMSTIME_NOTE) and len(description) <= len(DREAMSTIME_NOTE) + 20
    assert description == f"A futuristic glass. {DREAMSTIME_NOTE}"  # cut between words, never inside one
    too_small = spec.model_copy(update={"description": TextRule(max_chars=len(DREAMSTIME_NOTE) - 1)})
    refused = build_row(too_small, long, "city_000.jpg")
    assert not refused.ok and [p.rule for p in refused.problems] == ["ai.description_note"]


# --- Adobe --------------------------------------------------------------------------------


def test_adobe_title_and_keywords_of_a_generated_asset_lose_the_words_generative_ai_and_tool_names():
    generated = md(ai_generated=True, title="Generative AI glass city at sunrise, Midjourney",
                   keywords=["city", "generative AI", "AI-generated", "glass", "midjourney art", "sunrise"])
    row = cells("adobe", generated)
    assert row["Title"] == "glass city at sunrise"
    assert row["Keywords"] == "city,glass,art,sunrise"
    assert "ai.forbidden_terms" in fixes("adobe", generated)


def test_adobe_metadata_of_an_own_photo_keeps_its_words():
    own = md(title="Generative AI concept on a laptop screen", keywords=["generative AI", "laptop", "screen"])
    row = cells("adobe", own)
    assert row["Title"] == "Generative AI concept on a laptop screen"
    assert row["Keywords"] == "generative AI,laptop,screen"
    assert "ai.forbidden_terms" not in fixes("adobe", own)


def test_a_title_of_only_forbidden_words_falls_back_to_the_description_without_them():
    row = cells("adobe", md(ai_generated=True, title="Generative AI", description="Glass city, generative AI"))
    assert row["Title"] == "Glass city"


def test_the_embedded_title_and_keywords_of_a_generated_asset_lose_the_forbidden_words_too():
    specs = list(all_specs().values())
    fields = embedded_fields(md(ai_generated=True, title="Generative AI glass city",
                                keywords=["generative AI", "city"]),
                             specs)
    assert fields.title == "glass city" and fields.keywords == ("city",)
    own = embedded_fields(md(title="Generative AI glass city", keywords=["generative AI", "city"]), specs)
    assert own.title == "Generative AI glass city" and own.keywords == ("generative AI", "city")


def test_forbidden_terms_match_whole_words_in_any_case_and_a_hyphen_for_a_space():
    terms = ("generative AI", "AI generated")
    assert remove_terms("AI-Generated sunset, GENERATIVE ai", terms) == "sunset"
    assert remove_terms("Sea: generative AI; waves", terms) == "Sea: waves"
    assert remove_terms("nongenerative AIx and AI generatedness", terms) == "nongenerative AIx and AI generatedness"
    assert remove_terms("generative generative AI AI city", terms) == "city"  # the halves left would join


# --- the spec checks its AI rules ---------------------------------------------------------


def test_an_ai_category_missing_from_the_table_or_a_note_without_a_description_column_fails_at_load():
    text = (load_spec_text("dreamstime")).replace("category = 212", "category = 9999")
    with pytest.raises(ConfigError, match=r"ai.category 9999 is not in the \[categories\] table"):
        parse_spec(text, "agencies/mystock.toml", "mystock")
    adobe = load_spec_text("adobe").replace('portal_tick = "', 'description_note = "AI."\nportal_tick = "')
    with pytest.raises(ConfigError, match="ai.description_note is set but no column has source 'description'"):
        parse_spec(adobe, "agencies/mystock.toml", "mystock")


def load_spec_text(name: str) -> str:
    return (resources.files("tasks.agencies") / f"{name}.toml").read_text(encoding="utf-8")


def test_a_line_break_or_an_invisible_character_cannot_hide_a_forbidden_term():
    row = cells("adobe",
                md(ai_generated=True, title="Glass city, generative\u200b AI", keywords=["city", "generative\nAI"]))
    assert row["Title"] == "Glass city" and row["Keywords"] == "city"


def test_a_generated_clips_dreamstime_description_says_video_and_an_images_says_image():
    spec = load_spec("dreamstime")
    clip = build_row(spec, md(ai_generated=True), "city_000.mov")
    image = build_row(spec, md(ai_generated=True), "city_000.jpg")
    assert clip.ok and image.ok
    clip_note, image_note = spec.video.ai_description_note, spec.ai.description_note
    assert "video" in clip_note and "image" not in clip_note and "image" in image_note
    assert clip.cells[2].endswith(clip_note) and image_note not in clip.cells[2]
    assert image.cells[2].endswith(image_note)
    assert {f.rule for f in clip.fixes} >= {"ai.description_note", "ai.category"}
    own = build_row(spec, md(), "city_000.mov")  # a clip of the contributor's own: no note
    assert clip_note not in own.cells[2] and image_note not in own.cells[2]
