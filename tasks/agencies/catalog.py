"""Which agencies exist: the ones whose spec file is found, and nothing typed out anywhere else.

The set of agencies is the specs shipped in ``tasks/agencies/`` plus the
contributor's own ``<workdir>/agencies/<name>.toml``; a contributor's file
with a shipped name replaces the shipped spec (:attr:`Catalog.notes` says so,
and the run logs it). Settings, the ledger, the CLI and the reports all take
their agency names from here. Lists are in the specs' ``rank`` order (then by
name). Every spec of the workdir is loaded and checked at once, so one broken
file stops a run before anything is written, with one line naming the file
and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from tasks.agencies.spec import AgencySpec, load_spec, parse_spec, shipped_spec_names
from tasks.core.errors import ConfigError
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir


@dataclass(frozen=True)
class Catalog:
    """The agencies of one workdir (or the shipped ones alone)."""

    #: Every agency's spec by name, in list order (read-only: the catalog is cached).
    specs: Mapping[str, AgencySpec]
    #: Names whose spec comes from the workdir's ``agencies/`` folder.
    own: frozenset[str] = frozenset()
    #: Shipped names the workdir's own file replaces.
    replaced: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.specs)

    def spec(self, name: str) -> AgencySpec:
        """The spec of ``name``; ConfigError naming the known ones when there is none."""
        try:
            return self.specs[name]
        except KeyError as exc:
            raise ConfigError(f"no agency spec for {name!r} (known: {', '.join(self.names)})") from exc

    @property
    def notes(self) -> list[str]:
        """One line per shipped spec the workdir replaces, for the run's log and summary."""
        return [f"agencies/{name}.toml in the workdir replaces the shipped {name} spec" for name in self.replaced]

    def enabled(self, settings: Settings, only: list[str] | None = None) -> list[str]:
        """The enabled agencies in list order, limited to ``only`` when given.

        ``[agencies.<name>] enabled`` decides when set; otherwise the spec's
        ``enabled_by_default``, and an agency named in ``only`` counts as
        enabled (``--agency shutterstock`` runs it though it ships disabled).
        ConfigError names an agency that has no spec, whether it is in
        ``only``, under ``[agencies]`` or in ``pack.upscale_to_minimum``.
        """
        for name in settings.agencies:
            if name not in self.specs:
                raise ConfigError(f"agencies.{name}: unknown agency (choose from {', '.join(self.names)})")
        upscaled = settings.pack.upscale_to_minimum
        for name in upscaled if isinstance(upscaled, list) else []:
            if name not in self.specs:
                raise ConfigError(f"pack.upscale_to_minimum: unknown agency {name!r} "
                                  f"(choose from {', '.join(self.names)})")
        for name in only or []:
            if name not in self.specs:
                raise ConfigError(f"unknown agency {name!r} (choose from {', '.join(self.names)})")
        chosen = []
        for name, spec in self.specs.items():
            named = bool(only) and name in (only or [])
            if only and not named:
                continue
            setting = settings.agency(name).enabled
            if setting if setting is not None else (spec.enabled_by_default or named):
                chosen.append(name)
        return chosen


def _own_files(wd: Workdir | None) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime, size) of every ``*.toml`` in the workdir's ``agencies/`` folder: the cache key."""
    if wd is None or not wd.agencies.is_dir():
        return ()
    found = []
    for path in sorted(wd.agencies.glob("*.toml")):
        stat = path.stat()
        found.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def catalog(wd: Workdir | None = None) -> Catalog:
    """The agencies of ``wd`` (shipped plus its own specs), or the shipped ones when ``wd`` is None."""
    return _catalog(_own_files(wd))


@lru_cache(maxsize=16)
def _catalog(own_files: tuple[tuple[str, int, int], ...]) -> Catalog:
    specs = {name: load_spec(name) for name in shipped_spec_names()}
    own: set[str] = set()
    for path_text, _, _ in own_files:
        path = Path(path_text)
        name = path.stem
        origin = f"{path.parent.name}/{path.name} in {path.parent.parent}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{origin}: cannot read: {exc}") from exc
        specs[name] = parse_spec(text, origin, name)
        own.add(name)
    ordered = dict(sorted(specs.items(), key=lambda item: (item[1].rank, item[0])))
    replaced = tuple(name for name in ordered if name in own and name in shipped_spec_names())
    return Catalog(MappingProxyType(ordered), frozenset(own), replaced)


def agency_names(wd: Workdir | None = None) -> tuple[str, ...]:
    """Every agency with a spec, in list order."""
    return catalog(wd).names


def all_specs(wd: Workdir | None = None) -> Mapping[str, AgencySpec]:
    """Every agency's spec by name, in list order."""
    return catalog(wd).specs


def enabled_agencies(settings: Settings, only: list[str] | None = None, wd: Workdir | None = None) -> list[str]:
    """The enabled agencies of ``wd`` in list order, limited to ``only`` when given (see :meth:`Catalog.enabled`)."""
    return catalog(wd).enabled(settings, only)


def shortest_file_name() -> int | None:
    """The shortest file-name limit (extension included) of the shipped agencies; None when none has one."""
    limits = [spec.filename.max_chars for spec in all_specs().values() if spec.filename.max_chars]
    return min(limits, default=None)
