"""Gemini's own model list (tasks/gemini/served.py) through the real SDK against the test Gemini server: listed,
unlisted, retired in the table, the list call failing, the table disagreeing with the list, paging, the day's file."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tasks.core.errors import ConfigError
from tasks.core.settings import GeminiSettings
from tasks.core.workdir import Workdir
from tasks.gemini import served as served_module
from tasks.gemini.served import check_models, served_today
from tests.fakes.gemini import FAKE_KEY, error, fake_gemini, slow  # noqa: F401
from tests.fakes.gemini_models import model_resource

BOTH = ("describe", "image")
DAY = dt.datetime(2026, 12, 1, 23, 30, tzinfo=dt.UTC)


def clock(at: dt.datetime):
    return lambda: at


@pytest.fixture
def wd(tmp_path) -> Workdir:
    return Workdir(tmp_path / "w").prepare()


def generate_calls(fake) -> list:
    return [r for r in fake.requests if r.method == "POST"]


def test_listed_models_pass_and_the_days_list_is_kept_with_its_date(fake_gemini, wd):
    found = check_models(wd, GeminiSettings(), FAKE_KEY, BOTH, now=clock(DAY))
    assert found.notes == []  # the fake lists exactly the table's usable models (and an embedding model)
    assert found.served is not None and found.served.fresh
    assert {"gemini-3.5-flash-lite", "gemini-3.1-flash-image"} <= set(found.served.generating())
    assert "gemini-embedding-001" not in found.served.generating()  # no generateContent
    kept = json.loads(wd.gemini_models.read_text())
    assert kept["day"] == "2026-12-01" and kept["api_version"] == "v1beta"
    lite = next(m for m in kept["models"] if m["name"] == "gemini-3.5-flash-lite")
    assert lite["input_token_limit"] == 1_048_576 and "generateContent" in lite["methods"]
    assert [path.split("?")[0] for _, path in fake_gemini.models.calls] == ["/v1beta/models"]
    assert generate_calls(fake_gemini) == []


def test_every_page_is_read(fake_gemini, wd):
    fake_gemini.models.max_page_size = 4  # the real cap is 1000: more models than one page holds
    fake_gemini.models.listed["gemini-4-flash"] = model_resource("gemini-4-flash")
    everything = served_today(wd, GeminiSettings(), FAKE_KEY, now=clock(DAY))
    assert {m.name for m in everything.models} == set(fake_gemini.models.listed)
    paths = [path for _, path in fake_gemini.models.calls]
    assert len(paths) == -(-len(fake_gemini.models.listed) // 4) and all("pageSize=1000" in p for p in paths)
    assert "pageToken" not in paths[0] and all("pageToken=" in p for p in paths[1:])


def test_the_list_is_asked_once_a_utc_day(fake_gemini, wd):
    served_today(wd, GeminiSettings(), FAKE_KEY, now=clock(DAY))
    again = served_today(wd, GeminiSettings(), FAKE_KEY, now=clock(DAY.replace(hour=0, minute=1)))
    assert not again.fresh and len(fake_gemini.models.calls) == 1  # the same UTC day: the workdir's file
    next_day = served_today(wd, GeminiSettings(), FAKE_KEY, now=clock(DAY + dt.timedelta(minutes=31)))
    assert next_day.fresh and next_day.day == dt.date(2026, 12, 2) and len(fake_gemini.models.calls) == 2
    assert json.loads(wd.gemini_models.read_text())["day"] == "2026-12-02"


@pytest.mark.parametrize("model, delist, closest", [
    ("gemini-3.7-flash", "gemini-3.7-flash", "gemini-3.8-flash"),  # the table's replacement, listed
    ("gemini-3.9-flash-lite", None, "gemini-3.5-flash-lite"),  # not in the table either: the nearest name
], ids=["delisted", "never listed"])
def test_an_unlisted_model_is_refused_before_any_call_naming_the_closest(fake_gemini, wd, model, delist, closest):
    if delist:
        del fake_gemini.models.listed[delist]
    with pytest.raises(ConfigError) as refused:
        check_models(wd, GeminiSettings(model=model), FAKE_KEY, BOTH, now=clock(DAY))
    assert f"`gemini.model = {model}` is not among the models Gemini lists" in refused.value.message
    assert f"the closest listed is {closest}" in refused.value.message
    assert generate_calls(fake_gemini) == []


def test_an_unlisted_image_model_counts_only_when_images_are_made(fake_gemini, wd):
    del fake_gemini.models.listed["gemini-3-pro-image"]
    settings = GeminiSettings(image_model="gemini-3-pro-image")
    check_models(wd, settings, FAKE_KEY, ("describe",), now=clock(DAY))  # ingesting: no image call
    with pytest.raises(ConfigError, match=r"`gemini.image_model = gemini-3-pro-image` is not among .* "
                                          r"closest listed is gemini-3.1-flash-image"):
        check_models(wd, settings, FAKE_KEY, BOTH, now=clock(DAY))


def test_a_model_the_table_marks_retired_is_refused_without_asking_anything(fake_gemini, wd):
    fake_gemini.models.listed["gemini-2.5-flash-image"] = model_resource("gemini-2.5-flash-image", use="image")
    with pytest.raises(ConfigError) as refused:
        check_models(wd, GeminiSettings(image_model="gemini-2.5-flash-image"), FAKE_KEY, BOTH, now=clock(DAY))
    assert "`gemini.image_model = gemini-2.5-flash-image` is retired" in refused.value.message
    assert "its replacement is gemini-3.1-flash-image" in refused.value.message
    assert fake_gemini.requests == []  # not even the list


@pytest.mark.parametrize("reply", [error(500), slow(3.0)], ids=["500", "timeout"])
def test_a_failing_list_call_stops_nothing_and_is_asked_again(fake_gemini, wd, monkeypatch, reply):
    monkeypatch.setattr(served_module, "LIST_TIMEOUT_S", 0.5)
    fake_gemini.models.push(reply)
    found = check_models(wd, GeminiSettings(model="gemini-3.9-flash-lite"), FAKE_KEY, BOTH, now=clock(DAY))
    assert found.served is None and len(found.notes) == 1
    assert found.notes[0].startswith("Gemini's model list could not be read: ")
    assert "checking the models against tasks/gemini/models.toml only" in found.notes[0]
    assert not wd.gemini_models.exists()  # a failed answer is not kept: the next run asks again
    assert check_models(wd, GeminiSettings(), FAKE_KEY, BOTH, now=clock(DAY)).served.fresh


def test_the_table_disagreeing_with_the_list_is_said_once_a_day(fake_gemini, wd):
    listed = fake_gemini.models.listed
    del listed["gemini-3.6-flash"]  # ga in the table
    listed["gemini-2.5-flash"] = model_resource("gemini-2.5-flash")  # retired in the table
    listed["gemini-4-flash"] = model_resource("gemini-4-flash")  # not in the table
    first = check_models(wd, GeminiSettings(), FAKE_KEY, BOTH, now=clock(DAY))
    assert first.notes == [
        "Gemini lists 1 model(s) tasks/gemini/models.toml does not know: gemini-4-flash "
        "(`microstock models` shows them)",
        "models.toml says gemini-3.6-flash can be used, but Gemini does not list it today: the table may be out "
        "of date",
        "models.toml marks gemini-2.5-flash retired, but Gemini still lists it: the table may be out of date",
    ]
    assert check_models(wd, GeminiSettings(), FAKE_KEY, BOTH, now=clock(DAY)).notes == []
    assert len(fake_gemini.models.calls) == 1
