"""Cells an agency's columns take from the contributor's settings (``AgencySettings.csv_defaults``): checked
by the column's kind before any row is written, so a bad value is one agency-wide problem, not a bad CSV."""

from __future__ import annotations

import re
from collections.abc import Mapping

from tasks.agencies.spec import AgencySpec, Column, CsvFormat
from tasks.agencies.text import clean_cell
from tasks.core.reports import Problem

_NUMBER = re.compile(r"\d+(\.\d+)?")
_ID_LIST = re.compile(r"\d+(,\d+)*")


def config_value(column: Column, raw: str, fmt: CsvFormat) -> tuple[str, str | None]:
    """A configured cell value normalised by the column's kind, and an error message when invalid."""
    value = raw.strip()
    if column.kind == "flag":
        return value, None if value in (fmt.flag_no, fmt.flag_yes) else (
            f"{column.name} must be {fmt.flag_no} or {fmt.flag_yes}, not {raw!r}")
    if column.kind == "number":
        return value, (None if value == "" or _NUMBER.fullmatch(value)
                       else f"{column.name} must be a number or empty, not {raw!r}")
    if column.kind == "id_list":
        value = re.sub(r"\s*,\s*", ",", value)
        return value, None if value == "" or _ID_LIST.fullmatch(value) else (
            f"{column.name} must be comma-separated numeric ids or empty, not {raw!r}")
    if column.kind == "choice":
        return value, (None if value in column.choices
                       else f"{column.name} must be one of {list(column.choices)}, not {raw!r}")
    return clean_cell(value), None


def check_csv_defaults(spec: AgencySpec, csv_defaults: Mapping[str, str]) -> list[Problem]:
    """Agency-wide problems in ``AgencySettings.csv_defaults``: unknown columns and invalid values."""
    known = spec.configurable_columns()
    problems = []
    for key in sorted(csv_defaults):
        if key not in known:
            problems.append(Problem(agency=spec.name, asset="", rule="config.unknown_column",
                                    message=f"csv_defaults.{key}: {spec.display_name} has no configurable column "
                                            f"{key!r} (choose from {', '.join(known) or 'none'})"))
            continue
        _, error = config_value(known[key], str(csv_defaults[key]), spec.csv)
        if error:
            problems.append(Problem(agency=spec.name, asset="", rule=f"config.{key}", message=f"csv_defaults.{error}"))
    return problems
