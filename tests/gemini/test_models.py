"""The models and prices tables, the thinking setting, and the class of every SDK finish / block reason."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest
from google.genai import types

from tasks.core.records import Usage
from tasks.core.settings import GeminiSettings
from tasks.gemini import models as models_module
from tasks.gemini.client import BLOCK_REASONS, FINISH_REASONS
from tasks.gemini.models import (
    cost_usd,
    current_models,
    known_models,
    lacks_structured_output,
    suggestion,
    thinking_config,
)


def test_every_finish_reason_of_the_installed_sdk_has_a_decided_class():
    assert {r.name for r in types.FinishReason} == set(FINISH_REASONS)
    assert set(FINISH_REASONS.values()) <= {"ok", "blocked", "refused", "truncated", "account", "retry"}


def test_every_block_reason_of_the_installed_sdk_is_a_block():
    assert {r.name for r in types.BlockedReason} == BLOCK_REASONS


def test_the_issues_decisions_for_named_reasons():
    assert {r: FINISH_REASONS[r] for r in ("RECITATION", "LANGUAGE", "MAX_TOKENS", "CONTINUATION", "ESCALATION",
                                           "PUP_LIMITED_DISABLED", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT",
                                           "IMAGE_RECITATION", "IMAGE_OTHER", "NO_IMAGE")} == {
        "RECITATION": "refused", "LANGUAGE": "refused", "MAX_TOKENS": "truncated", "CONTINUATION": "truncated",
        "ESCALATION": "blocked", "PUP_LIMITED_DISABLED": "account", "IMAGE_SAFETY": "blocked",
        "IMAGE_PROHIBITED_CONTENT": "blocked", "IMAGE_RECITATION": "refused", "IMAGE_OTHER": "retry",
        "NO_IMAGE": "retry"}


def test_the_defaults_are_generally_available_models_of_the_table():
    defaults = GeminiSettings()
    models = known_models()
    assert models[defaults.model].status == "ga" and models[defaults.model].use == "describe"
    assert models[defaults.model].structured
    image = models[defaults.image_model]
    table = tomllib.loads((Path(models_module.__file__).parent / "models.toml").read_text())["models"]
    assert image.status == "ga" and image.use == "image" and "2K" in table[defaults.image_model]["image_sizes"]
    assert defaults.api_version == "v1beta"
    assert "gemini-2.5-flash" not in current_models("describe")
    assert all(models[m].replacement in current_models(models[m].use) for m in models if models[m].status == "retired")


def test_thinking_is_the_lowest_the_model_allows_unless_set():
    assert thinking_config("gemini-3.5-flash-lite", "") == types.ThinkingConfig(thinking_level="MINIMAL")
    assert thinking_config("gemini-3.8-flash", "") == types.ThinkingConfig(thinking_level="LOW")
    assert thinking_config("gemini-3.8-flash", "high") == types.ThinkingConfig(thinking_level="HIGH")
    assert thinking_config("some-model", "0") == types.ThinkingConfig(thinking_budget=0)
    assert thinking_config("gemini-3-pro-image", "") is None  # thinking always on, not settable
    assert thinking_config("a-model-not-in-the-table", "") is None


def test_cost_from_the_price_table_and_unknown_when_there_is_none():
    usage = Usage(prompt_tokens=1_000_000, output_tokens=500_000, thought_tokens=500_000)
    assert cost_usd("gemini-3.5-flash-lite", usage, dt.date(2026, 11, 30)) == pytest.approx(0.30 + 2.50)
    assert cost_usd("gemini-3.8-flash", usage, dt.date(2026, 12, 31)) == pytest.approx(0.75 + 3.75)
    # the announced price from the day it takes effect (Google's pricing page: "$1.50 starting January 1, 2027")
    assert cost_usd("gemini-3.8-flash", usage, dt.date(2027, 1, 1)) == pytest.approx(1.50 + 7.50)
    assert cost_usd("gemini-3.1-flash-lite", usage, dt.date(2026, 11, 30)) is None  # price not confirmed


def test_batch_cost_is_half_the_sync_cost_where_a_batch_price_is_confirmed_and_unknown_elsewhere():
    usage = Usage(prompt_tokens=1_000_000, output_tokens=500_000, thought_tokens=500_000)
    sync = cost_usd("gemini-3.5-flash-lite", usage, dt.date(2026, 11, 30))
    assert cost_usd("gemini-3.5-flash-lite", usage, dt.date(2026, 11, 30), batch=True) == pytest.approx(sync / 2)
    assert cost_usd("gemini-3.8-flash", usage, dt.date(2026, 11, 30), batch=True) is None  # no batch row confirmed


def test_a_clips_sound_is_billed_at_the_audio_price_and_the_rest_of_the_prompt_at_the_input_price(monkeypatch):
    # a row whose audio price differs from its input price (as 2.5 Flash's "$1.00 (audio)" beside "$0.30"), so
    # the split shows; the shipped 3.5 Flash-Lite row names one price for both
    row = models_module.Price(0.30, 2.50, None, 0.15, 1.25, audio_input_per_million=1.00)
    monkeypatch.setattr(models_module, "prices", lambda: {"m": (row,)})
    usage = Usage(prompt_tokens=1_000_000, output_tokens=100_000)
    on = dt.date(2026, 12, 5)
    assert cost_usd("m", usage, on, audio_tokens=400_000) == pytest.approx(0.6 * 0.30 + 0.4 * 1.00 + 0.1 * 2.50)
    assert cost_usd("m", usage, on) == pytest.approx(0.30 + 0.25)  # silent: all at the input price
    assert cost_usd("m", usage, on, batch=True) == pytest.approx(0.15 + 0.125)
    assert cost_usd("m", usage, on, audio_tokens=400_000, batch=True) is None  # no batch price for audio


def test_an_unusable_model_is_answered_with_its_replacement_and_the_current_ones():
    assert suggestion("gemini-2.5-flash", "describe").startswith(
        "its replacement is gemini-3.5-flash-lite; or pick one of")
    assert suggestion("gemini-9", "image") == ("pick one of gemini-3.1-flash-image, gemini-3-pro-image, "
                                               "gemini-3.1-flash-lite-image (docs/GEMINI.md)")
    assert lacks_structured_output("gemini-3.1-flash-lite-image") and not lacks_structured_output("gemini-3.8-flash")
    assert not lacks_structured_output("a-model-not-in-the-table")
