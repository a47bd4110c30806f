"""What the project knows about Gemini models and their prices, read from data files.

``models.toml`` (use, status, structured output, thinking setting, image
sizes) and ``prices.toml`` (USD per million tokens, with source and date) sit
next to this module and are package data: when Google's pages change, the
data changes, not the code. docs/GEMINI.md says where each fact comes from.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.errors import ConfigError
from tasks.core.records import Usage
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.images.inspect import image_rules

if TYPE_CHECKING:  # the SDK is imported where a Gemini request is built, not by an offline run
    from google.genai import types

_HERE = Path(__file__).parent


@cache
def _table() -> dict:
    return tomllib.loads((_HERE / "models.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ModelInfo:
    """One row of ``models.toml``."""

    name: str
    use: str
    status: str
    structured: bool = False
    #: ``level``, ``budget`` or ``fixed``; empty when not known.
    thinking: str = ""
    lowest: str = ""
    #: What Google names as the model to move to, for a deprecated or retired one.
    replacement: str = ""
    #: The ``image_config.image_size`` values an image model accepts.
    image_sizes: tuple[str, ...] = ()
    #: The ``response_format.resolution`` values a clip model makes.
    resolutions: tuple[str, ...] = ()


@cache
def known_models() -> dict[str, ModelInfo]:
    """Every model of ``models.toml`` by name."""
    rows = _table()["models"]
    return {name: ModelInfo(name=name, use=row["use"], status=row["status"], structured=row.get("structured", False),
                            thinking=row.get("thinking", ""), lowest=row.get("lowest", ""),
                            replacement=row.get("replacement", ""), image_sizes=tuple(row.get("image_sizes", ())),
                            resolutions=tuple(row.get("resolutions", ())))
            for name, row in rows.items()}


def check_image_settings(model: str, image_size: str, min_pixels: int, upscale: bool) -> None:
    """ConfigError, naming the setting, when ``model`` at ``image_size`` cannot make an image of ``min_pixels``
    (the smallest minimum of the run's agencies) or does not make that size at all; nothing when upscaling is chosen
    or the model is not in the table (then the service's answer decides)."""
    info = known_models().get(model)
    if info is None or not info.image_sizes:
        return
    if image_size not in info.image_sizes:
        raise ConfigError(f"generate.image_size = {image_size!r}: {model} makes only {', '.join(info.image_sizes)} "
                          f"(gemini.image_model; docs/GEMINI.md)")
    megapixels = _table()["image_megapixels"].get(image_size, 0)
    if not upscale and megapixels * 1_000_000 < min_pixels:
        bigger = [s for s in info.image_sizes if _table()["image_megapixels"].get(s, 0) * 1_000_000 >= min_pixels]
        choose = (f"choose generate.image_size = {bigger[0]!r}" if bigger
                  else "choose an image model that makes 2K or 4K")
        raise ConfigError(f"generate.image_size = {image_size!r} gives about {megapixels:g} MP with {model}, below the "
                          f"{min_pixels / 1e6:g} MP every agency of this run needs at least: {choose}, "
                          "or set pack.upscale_to_minimum = true")


def check_clip_settings(model: str, resolution: str) -> None:
    """ConfigError, naming the setting, when ``model`` is not a clip model of the table (an unlisted model's
    request and price are unknown: nothing is paid for on a guess) or does not make ``resolution``."""
    info = known_models().get(model)
    if info is None or info.use != "clip":
        raise ConfigError(f"`gemini.clip_model = {model}` is not a clip model of tasks/gemini/models.toml: "
                          f"pick one of {', '.join(current_models('clip'))} (docs/GEMINI.md); nothing was sent")
    if info.resolutions and resolution not in info.resolutions:
        raise ConfigError(f"generate.clip_resolution = {resolution!r}: {model} makes only "
                          f"{', '.join(info.resolutions)} (docs/GEMINI.md)")


def current_models(use: str) -> list[str]:
    """Generally-available models for ``use`` (``describe``, ``image``, ``clip``), as named in messages."""
    return [m.name for m in known_models().values() if m.use == use and m.status == "ga"]


def suggestion(model: str, use: str) -> str:
    """What a message about an unusable ``model`` proposes: its replacement, if the table names one, and the
    current models."""
    info = known_models().get(model)
    instead = f"its replacement is {info.replacement}; or " if info is not None and info.replacement else ""
    return f"{instead}pick one of {', '.join(current_models(use))} (docs/GEMINI.md)"


def retired_refusal(setting: str, model: str) -> str | None:
    """The line refusing ``model`` (configured as ``setting``) when the table marks it ``retired``, naming its
    replacement; None otherwise. Callers refuse before any call is made."""
    info = known_models().get(model)
    if info is None or info.status != "retired":
        return None
    return f"`{setting} = {model}` is retired (tasks/gemini/models.toml): {suggestion(model, info.use)}"


def lacks_structured_output(model: str) -> bool:
    """True when the table knows ``model`` cannot answer with a response schema (so it cannot describe)."""
    info = known_models().get(model)
    return info is not None and not info.structured and info.status != "retired"


def thinking_config(model: str, setting: str) -> types.ThinkingConfig | None:
    """The thinking setting sent with every describe call.

    ``setting`` (``gemini.thinking``) wins when given: a number is a budget in
    tokens, anything else a level. Empty means the lowest the model allows,
    from ``models.toml``; None (the model's own default) when the model is not
    in the table or its thinking cannot be set.
    """
    from google.genai import types

    if setting:
        if setting.lstrip("-").isdigit():
            return types.ThinkingConfig(thinking_budget=int(setting))
        return types.ThinkingConfig(thinking_level=setting.upper())
    info = known_models().get(model)
    if info is None or not info.lowest or info.thinking not in ("level", "budget"):
        return None
    if info.thinking == "budget":
        return types.ThinkingConfig(thinking_budget=int(info.lowest))
    return types.ThinkingConfig(thinking_level=info.lowest.upper())


@dataclass(frozen=True)
class Price:
    """USD per million tokens (output includes thinking), valid from ``since`` through ``until`` when set;
    ``batch_*``: the Batch API's price of the same tokens, None when not confirmed for the model."""

    input_per_million: float
    output_per_million: float
    until: dt.date | None = None
    batch_input_per_million: float | None = None
    batch_output_per_million: float | None = None
    since: dt.date | None = None
    #: The price of audio input (a clip's sound) where the pricing page names it; None: not confirmed.
    audio_input_per_million: float | None = None

    def covers(self, on: dt.date) -> bool:
        return (self.since is None or on >= self.since) and (self.until is None or on <= self.until)


def _price(row: dict) -> Price:
    def day(key: str) -> dt.date | None:
        return dt.date.fromisoformat(row[key]) if key in row else None

    batch = (float(row[k]) if k in row else None for k in ("batch_input_per_million", "batch_output_per_million"))
    audio = float(row["audio_input_per_million"]) if "audio_input_per_million" in row else None
    return Price(float(row["input_per_million"]), float(row["output_per_million"]), day("until"), *batch,
                 since=day("from"), audio_input_per_million=audio)


@cache
def prices() -> dict[str, tuple[Price, ...]]:
    """Every price of ``prices.toml`` by model: the current one, then those announced to take effect later
    (``[[prices."<model>".later]]``, each with the day it takes effect)."""
    data = tomllib.loads((_HERE / "prices.toml").read_text(encoding="utf-8"))
    try:
        return {name: (_price(row), *(_price(later) for later in row.get("later", ())))
                for name, row in data["prices"].items()}
    except (KeyError, ValueError) as exc:  # a broken data file is the installation's fault
        raise ConfigError(f"tasks/gemini/prices.toml: {exc}") from None


def cost_usd(model: str, usage: Usage, on: dt.date, *, batch: bool = False, audio_tokens: int = 0) -> float | None:
    """What ``usage`` cost on ``model`` on day ``on`` (through the Batch API when ``batch``), at the price in
    effect that day; None when no confirmed price is known for it. ``audio_tokens`` of the prompt (a clip's sound)
    are billed at the model's audio input price: None when that is not confirmed (or through the Batch API)."""
    price = next((p for p in prices().get(model, ()) if p.covers(on)), None)
    if price is None:
        return None
    per_input, per_output = ((price.batch_input_per_million, price.batch_output_per_million) if batch
                             else (price.input_per_million, price.output_per_million))
    per_audio = None if batch else price.audio_input_per_million
    if per_input is None or per_output is None or (audio_tokens and per_audio is None):
        return None
    billed_output = usage.output_tokens + usage.thought_tokens
    audio = min(audio_tokens, usage.prompt_tokens)
    return ((usage.prompt_tokens - audio) * per_input + audio * (per_audio or 0) + billed_output * per_output) / 1e6


def check_generation(settings: Settings, agencies: list[str], wd: Workdir | None = None) -> None:
    """ConfigError, before anything runs, when Gemini's image model and ``generate.image_size`` cannot make an
    image any of ``agencies`` takes (the CLI asks when a key is in the environment; the stage asks again)."""
    floor = min((image_rules(a, wd).min_pixels for a in agencies), default=0)
    check_image_settings(settings.gemini.image_model, settings.generate.image_size, floor,
                         any(settings.pack.upscales(a) for a in agencies))
