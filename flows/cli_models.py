"""``microstock models``: the model table (``tasks/gemini/models.toml``) beside what Gemini lists today, and with
``[describer] provider = "openai"`` what its endpoint lists (the check a run makes of the configured models before
any paid call is the flow's: RunContext.check)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import WorkdirOpt, console, resolve_workdir


def models(
    workdir: Optional[Path] = WorkdirOpt,
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: <workdir>/microstock.toml)."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask Gemini again, even if today's list is kept."),
) -> None:
    """The models the project knows (models.toml) beside what Gemini lists today (asked once a UTC day with a
    key in GEMINI_API_KEY / GOOGLE_API_KEY; without one, the table alone)."""
    from rich.table import Table

    from tasks.core.errors import MicrostockError
    from tasks.core.secrets import gemini_api_key
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.gemini.models import known_models
    from tasks.gemini.served import disagreements, served_today

    wd = Workdir(resolve_workdir(workdir, config))
    every = load_settings(wd.config_path(config))
    settings = every.gemini
    key = gemini_api_key()
    served, why = None, "no key in GEMINI_API_KEY / GOOGLE_API_KEY: Gemini was not asked"
    if key:
        try:
            served = served_today(wd, settings, key, refresh=refresh)
            kept = "asked now" if served.fresh else f"kept in {wd.gemini_models.name}"
            why = f"Gemini's list of {served.day.isoformat()} (UTC), {kept}"
        except MicrostockError as exc:
            why = f"Gemini's model list could not be read: {exc.message}"
    listed = served.generating() if served else {}
    configured = {settings.model: "gemini.model", settings.image_model: "gemini.image_model"}
    table = Table(title="Gemini models: the table beside the API", caption=why)
    table.add_column("model", overflow="fold")  # a narrow terminal wraps model names, never cuts them
    for column in ("use", "models.toml", "replacement", "Gemini lists", "display name", "tokens in / out"):
        table.add_column(column, overflow="fold")
    for info in known_models().values():
        served_model = listed.get(info.name)
        table.add_row(_name(info.name, configured), info.use, info.status, info.replacement or "",
                      "?" if served is None else ("yes" if served_model else "no"), *_served_cells(served_model))
    for name, served_model in sorted(listed.items()):
        if name.startswith("gemini-") and name not in known_models():
            table.add_row(_name(name, configured), "", "not in the table", "", "yes", *_served_cells(served_model))
    for name in configured:
        if name not in known_models() and name not in listed:
            table.add_row(_name(name, configured), "", "not in the table", "",
                          "?" if served is None else "no", "", "")
    console.print(table)
    for line in disagreements(served) if served else []:
        console.print(line, highlight=False)
    if every.describer.provider == "openai":
        _endpoint_models(every.describer)


def _endpoint_models(chosen) -> None:
    """What the OpenAI-compatible endpoint of ``[describer]`` lists, the configured model marked (ConfigError,
    one line, when it cannot be read)."""
    from tasks.core.secrets import openai_api_key
    from tasks.openai_compat.client import served_models

    served = served_models(chosen, openai_api_key())
    console.print(f"{chosen.base_url} lists {len(served)} model(s): " + ", ".join(
        f"{m} (describer.model)" if chosen.model in (m, m.removeprefix("models/")) else m for m in served),
        highlight=False, soft_wrap=True)


def _name(model: str, configured: dict[str, str]) -> str:
    return f"{model} ({configured[model]})" if model in configured else model


def _served_cells(model) -> tuple[str, str]:
    if model is None:
        return "", ""
    limits = f"{model.input_token_limit or '?'} / {model.output_token_limit or '?'}"
    return model.display_name, limits
