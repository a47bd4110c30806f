"""The contributor's keyword rules on a describer's answer (tasks/agencies/keyword_rules.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tasks.agencies.keyword_rules import apply_keyword_rules, removed_words, repeat_key
from tasks.agencies.protected import ProtectedNames
from tasks.core.records import Metadata, Sidecar
from tasks.core.settings import KeywordSettings, Settings

NAMES = ProtectedNames.of(KeywordSettings())


def _keywords(keywords: list[str], editorial: bool = False, **rules) -> tuple[list[str], list[str]]:
    md = Metadata(title="t", description="d", keywords=keywords, editorial=editorial)
    out, changes = apply_keyword_rules(md, KeywordSettings(**rules), NAMES)
    return out.keywords, changes.lines()


def test_vocabulary_writes_each_synonym_as_the_preferred_word_and_the_repeat_it_makes_goes():
    kept, said = _keywords(["car", "road", "Automobile", "auto", "speed"],
                           vocabulary={"automobile": ["car", "auto"]})
    assert kept == ["automobile", "road", "speed"]  # "Automobile" and "auto" became repeats of the first
    assert "vocabulary: car → automobile, auto → automobile" in said


def test_excluded_and_protected_keywords_are_removed_wherever_they_stand():
    kept, said = _keywords(["shoes", "Nike", "sneaker", "mickey mouse", "iphone 15", "stock", "running"],
                           excluded=["stock"])
    assert kept == ["shoes", "sneaker", "running"]
    assert "removed (protected names): Nike, mickey mouse, iphone 15" in said and "excluded: stock" in said


def test_an_editorial_asset_keeps_brand_keywords_but_not_excluded_ones():
    kept, _ = _keywords(["Nike", "store", "stock"], editorial=True, excluded=["stock"])
    assert kept == ["Nike", "store"]


def test_plural_and_case_repeats_go_and_the_first_keeps_its_place():
    kept, said = _keywords(["Cat", "boxes", "cats", "box", "City", "cities", "glass", "orange skies", "orange sky"])
    assert kept == ["Cat", "boxes", "City", "glass", "orange skies"]
    assert said == ["near-repeats removed: cats, box, cities, orange sky"]
    assert repeat_key("glass") == "glass" and repeat_key("Houses") == repeat_key("house")


def test_required_keywords_come_after_the_first_ten_and_are_not_doubled():
    describer = [f"word{i}" for i in range(14)]
    kept, said = _keywords([*describer, "Italy"], required=["italy", "travel"])
    assert kept[:10] == describer[:10] and kept[10:11] == ["travel"] and "Italy" in kept  # present: not added again
    assert said == ["required added: travel"]
    short, _ = _keywords(["sea"], required=["travel"])
    assert short == ["sea", "travel"]


def test_the_rules_are_settings_of_microstock_toml_and_unknown_keys_are_refused():
    s = Settings.model_validate({"keywords": {"required": ["a"], "vocabulary": {"b": ["c"]},
                                              "allowed_names": ["Lego"]}})
    assert s.keywords.required == ["a"] and s.keywords.vocabulary == {"b": ["c"]}
    with pytest.raises(ValidationError):
        Settings.model_validate({"keywords": {"requried": ["a"]}})


def test_removed_keywords_are_kept_with_why_and_a_second_pass_forgets_none():
    md = Metadata(title="t", description="d", keywords=["shoes", "Nike", "mickey mouse", "stock", "running"])
    once, _ = apply_keyword_rules(md, KeywordSettings(excluded=["stock"]), NAMES)
    assert once.keywords == ["shoes", "running"]
    assert once.removed_keywords == {"Nike": "protected name 'Nike' (brand)",
                                     "mickey mouse": "protected name 'Mickey Mouse' (character)",
                                     "stock": "excluded"}
    again, changes = apply_keyword_rules(once, KeywordSettings(excluded=["stock", "running"]), NAMES)
    assert again.removed_keywords == {**once.removed_keywords, "running": "excluded"}
    assert changes.lines() == ["excluded: running"]
    assert removed_words({"Nike": "protected name 'Nike' (brand)", "stock": "excluded"}) == \
        "Nike: protected name 'Nike' (brand); stock: excluded"


def test_a_sidecar_written_before_removed_keywords_were_kept_still_loads():
    old = Sidecar.model_validate_json('{"asset_id": "a1", "name": "a.jpg", "metadata": '
                                      '{"title": "t", "description": "d", "keywords": ["sea"]}}')
    assert old.metadata.removed_keywords == {}
    assert Sidecar.model_validate_json(old.model_dump_json()).metadata == old.metadata


def test_keywords_written_around_a_name_are_removed_and_recorded_as_the_name_itself_is():
    md = Metadata(title="t", description="d",
                  keywords=["Nikes", "N\u0456ke", "spider_man", "Picassos", "batman2", "Coca_Cola", "Coca-Colas",
                            "shoe", "monetary", "pepsin"])
    out, _ = apply_keyword_rules(md, KeywordSettings(), NAMES)
    assert out.keywords == ["shoe", "monetary", "pepsin"]
    assert out.removed_keywords["N\u0456ke"] == "protected name 'Nike' (brand)"
    assert out.removed_keywords["Coca-Colas"] == "protected name 'Coca-Cola' (brand)"
    assert len(out.removed_keywords) == 7
