"""Which agencies exist: the ones whose spec file is found, and nothing typed out anywhere else.

Settings, the ledger, the CLI and the reports all take their agency names
from here. Lists are in the specs' ``rank`` order (then by name).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from tasks.agencies.spec import AgencySpec, load_spec, shipped_spec_names
from tasks.core.errors import ConfigError
from tasks.core.settings import Settings


@lru_cache(maxsize=1)
def agency_names() -> tuple[str, ...]:
    """Every agency with a spec, in list order."""
    return tuple(sorted(shipped_spec_names(), key=lambda name: (load_spec(name).rank, name)))


#: An agency's name as a type: the flows' parameter forms in the Prefect UI offer exactly these.
AgencyName = Literal[agency_names()]  # type: ignore[valid-type]  # the names come from the spec files


def all_specs() -> dict[str, AgencySpec]:
    """Every agency's spec by name, in list order."""
    return {name: load_spec(name) for name in agency_names()}


def shortest_file_name() -> int | None:
    """The shortest file-name limit (extension included) of any agency; None when none has one."""
    limits = [spec.filename.max_chars for spec in all_specs().values() if spec.filename.max_chars]
    return min(limits, default=None)


def enabled_agencies(settings: Settings, only: list[str] | None = None) -> list[str]:
    """The enabled agencies in list order, limited to ``only`` when given.

    ConfigError names an agency that has no spec, whether it is in ``only``
    or under ``[agencies]`` in the configuration.
    """
    known = agency_names()
    for name in settings.agencies:
        if name not in known:
            raise ConfigError(f"agencies.{name}: unknown agency (choose from {', '.join(known)})")
    for name in only or []:
        if name not in known:
            raise ConfigError(f"unknown agency {name!r} (choose from {', '.join(known)})")
    return [a for a in known if settings.agency(a).enabled and (not only or a in only)]
