"""What Gemini itself lists as its models, and the check of the configured models before anything is paid for.

With a key, the first run of a UTC day asks ``models.list`` through the SDK
(every page) and keeps the answer in ``<workdir>/gemini-models.json``
(:attr:`~tasks.core.workdir.Workdir.gemini_models`: the day, the API version,
the models); later runs of the same UTC day read it, the next day asks again.
A list call that fails (an HTTP error, a timeout, a body the SDK cannot read)
stops nothing: the run says so in one line and checks against ``models.toml``
only, and the next run asks again (a failed answer is not kept).

:func:`check_models` is the up-front check (docs/GEMINI.md, "The model list"):

* a configured model ``models.toml`` marks ``retired`` is refused, with its
  replacement, with or without a list;
* a configured model the list does not hold for ``generateContent`` is refused,
  naming the closest listed replacement (the table's replacement when listed,
  else the nearest listed name of the same use);
* on the day's first asking, one warning each for Gemini models the list holds
  that the table does not know, and for table rows whose status the list
  contradicts (``ga``/``deprecated`` but not listed; ``retired`` but listed).
"""

from __future__ import annotations

import datetime as dt
import difflib
from dataclasses import dataclass, field
from typing import Callable

from google import genai
from pydantic import BaseModel

from tasks.core.errors import ConfigError, MicrostockError
from tasks.core.files import atomic_write_bytes
from tasks.core.settings import GeminiSettings
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir
from tasks.gemini.client import Target, gemini_client, map_gemini_errors
from tasks.gemini.models import ModelInfo, known_models, retired_refusal

#: Models asked per page (Google: at most 50 when unspecified, at most 1000).
PAGE_SIZE = 1000
#: Seconds the list call may take at most (the configured ``gemini.timeout_s`` when shorter).
LIST_TIMEOUT_S = 15.0
GENERATE = "generateContent"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class ServedModel:
    """One model as ``models.list`` describes it (``name`` without ``models/``)."""

    name: str
    display_name: str = ""
    version: str = ""
    input_token_limit: int | None = None
    output_token_limit: int | None = None
    methods: tuple[str, ...] = ()

    @property
    def generates(self) -> bool:
        return GENERATE in self.methods


@dataclass(frozen=True)
class ServedList:
    """The day's list: ``fresh`` when it was asked for now rather than read from the day's file."""

    day: dt.date
    models: tuple[ServedModel, ...]
    fresh: bool = False

    def generating(self) -> dict[str, ServedModel]:
        """The listed models that answer ``generateContent``, by name."""
        return {m.name: m for m in self.models if m.generates}


@dataclass
class ModelCheck:
    """What :func:`check_models` found: the list (None when it could not be read) and lines to show once."""

    served: ServedList | None
    notes: list[str] = field(default_factory=list)


def ask_gemini(client: genai.Client, target: Target, api_key: str) -> tuple[ServedModel, ...]:
    """Every page of ``client.models.list()``; :mod:`tasks.core.errors` classes as :mod:`tasks.gemini.client`
    maps them."""
    with map_gemini_errors(target, api_key):
        return tuple(ServedModel(name=(m.name or "").removeprefix("models/"), display_name=m.display_name or "",
                                 version=m.version or "", input_token_limit=m.input_token_limit,
                                 output_token_limit=m.output_token_limit, methods=tuple(m.supported_actions or ()))
                     for m in client.models.list(config={"page_size": PAGE_SIZE}))


class ServedFile(BaseModel):
    """``gemini-models.json``: one UTC day's list, written and read by this schema (a wrong type anywhere, such
    as ``methods`` as a string, is damage: the file is set aside and Gemini asked again)."""

    day: str
    api_version: str
    asked_at: str = ""
    models: tuple[ServedModel, ...]


def _read_day(wd: Workdir, day: dt.date, api_version: str) -> ServedList | None:
    kept = read_file(wd.gemini_models, ServedFile.model_validate_json, "Gemini's list of models is asked again")
    if kept is None or kept.day != day.isoformat() or kept.api_version != api_version:
        return None
    return ServedList(day, kept.models)


def served_today(wd: Workdir, settings: GeminiSettings, api_key: str, *, refresh: bool = False,
                 now: Callable[[], dt.datetime] = utc_now) -> ServedList:
    """The UTC day's list: the workdir's file of today, else asked now and kept (unless ``refresh``, which asks
    anyway). MicrostockError when asking fails (nothing is kept then)."""
    day = now().astimezone(dt.UTC).date()
    kept = None if refresh else _read_day(wd, day, settings.api_version)
    if kept is not None:
        return kept
    quick = settings.model_copy(update={"timeout_s": min(settings.timeout_s, LIST_TIMEOUT_S)})
    client = gemini_client(quick, api_key)
    models = ask_gemini(client, Target("gemini.model", settings.model, "describe", settings.api_version), api_key)
    record = ServedFile(day=day.isoformat(), api_version=settings.api_version, asked_at=now().isoformat(),
                        models=models)
    try:
        atomic_write_bytes(wd.gemini_models, record.model_dump_json(indent=1).encode())
    except OSError:  # keeping the list saves a call; a workdir that cannot hold it only costs the next run one
        pass
    return ServedList(day, models, fresh=True)


_GA = ModelInfo(name="", use="", status="ga")


def _use_of(name: str) -> str:
    info = known_models().get(name)
    return info.use if info is not None else ("image" if "image" in name else "describe")


def closest(model: str, use: str, served: ServedList) -> str | None:
    """What to propose instead of ``model``: the table's replacement if listed, else the nearest listed name of
    the same use (difflib; among the table's models when any is listed), else None."""
    listed = served.generating()
    info = known_models().get(model)
    if info is not None and info.replacement in listed:
        return info.replacement
    same_use = [n for n in listed if _use_of(n) == use and known_models().get(n, _GA).status != "retired"]
    known = [n for n in same_use if n in known_models()]  # a table model first: its use and settings are known
    found = difflib.get_close_matches(model, known or same_use, n=1, cutoff=0.0)
    return found[0] if found else None


def disagreements(served: ServedList) -> list[str]:
    """One line each: listed Gemini models the table does not know, table rows the list contradicts."""
    listed = served.generating()
    table = known_models()
    unknown = sorted(n for n in listed if n.startswith("gemini-") and n not in table)
    missing = sorted(n for n, m in table.items() if m.status in ("ga", "deprecated") and n not in listed)
    served_retired = sorted(n for n, m in table.items() if m.status == "retired" and n in listed)
    lines = []
    if unknown:
        lines.append(f"Gemini lists {len(unknown)} model(s) tasks/gemini/models.toml does not know: "
                     f"{', '.join(unknown)} (`microstock models` shows them)")
    if missing:
        lines.append(f"models.toml says {', '.join(missing)} can be used, but Gemini does not list "
                     f"{'it' if len(missing) == 1 else 'them'} today: the table may be out of date")
    if served_retired:
        lines.append(f"models.toml marks {', '.join(served_retired)} retired, but Gemini still lists "
                     f"{'it' if len(served_retired) == 1 else 'them'}: the table may be out of date")
    return lines


def check_models(wd: Workdir, settings: GeminiSettings, api_key: str, uses: tuple[str, ...], *,
                 now: Callable[[], dt.datetime] = utc_now) -> ModelCheck:
    """ConfigError, before any paid call, when a model the run will call (``uses``: ``describe`` for
    ``gemini.model``, ``image`` for ``gemini.image_model``, ``clip`` for ``gemini.clip_model``) is retired in the
    table or not in the day's list; else what was found, with the lines to show (the list failing, the
    disagreements of a fresh list)."""
    chosen = [(s, m, u) for s, m, u in (("gemini.model", settings.model, "describe"),
                                        ("gemini.image_model", settings.image_model, "image"),
                                        ("gemini.clip_model", settings.clip_model, "clip")) if u in uses]
    for setting, model, _ in chosen:
        if refusal := retired_refusal(setting, model):
            raise ConfigError(f"{refusal}; nothing was sent to Gemini")
    try:
        served = served_today(wd, settings, api_key, now=now)
    except MicrostockError as exc:
        return ModelCheck(None, [f"Gemini's model list could not be read: {exc.message}; checking the models "
                                 "against tasks/gemini/models.toml only"])
    listed = served.generating()
    for setting, model, use in chosen:
        if model not in listed:
            instead = closest(model, use, served)
            raise ConfigError(f"`{setting} = {model}` is not among the models Gemini lists for generateContent "
                              f"today (API {settings.api_version})"
                              + (f": the closest listed is {instead}" if instead else "")
                              + "; nothing was sent to Gemini (`microstock models` shows the list)")
    return ModelCheck(served, disagreements(served) if served.fresh else [])
