"""An agency's requirements as data: ``<agency>.toml`` next to this module.

Each TOML file says, for one agency, the exact CSV header and where each
column's value comes from, the limits of every field, the per-file row and
byte limits, the category table, the image limits the pack stage checks and
how files reach the agency. Adding an agency is a new file, not new code:
:mod:`tasks.agencies.catalog` lists the agencies from the files found.

The loader checks a spec against itself (the header equals its columns, a
category column has a table) so a broken file fails loudly at load, never by
writing a wrong CSV.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tasks.core.errors import ConfigError


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Column(_Spec):
    """One CSV column: its exact name and where its value comes from."""

    name: str
    #: ``filename`` · ``title`` · ``description`` · ``keywords`` · ``releases``
    #: · ``category`` (the ``index``-th id of the category list) · ``editorial``
    #: (1 when the metadata says editorial, else the configured value) ·
    #: ``config`` (``AgencySettings.csv_defaults[name]``, else ``default``).
    source: Literal["filename", "title", "description", "keywords", "releases", "category", "editorial", "config"]
    index: int = Field(1, ge=1)
    #: For ``config``/``editorial``: ``flag`` (0/1), ``number`` (digits, one
    #: optional decimal point, or empty), ``id_list`` (comma-separated digits,
    #: or empty), ``choice`` (one of ``choices``), ``text`` (cleaned text).
    kind: Literal["flag", "number", "id_list", "choice", "text"] = "text"
    default: str = ""
    choices: tuple[str, ...] = ()
    #: Not in the header unless ``csv_defaults`` names this column.
    optional: bool = False


class FilenameRule(_Spec):
    #: Longest file name (with extension) the agency takes; None = no limit.
    max_chars: int | None = Field(None, ge=5)


class TextRule(_Spec):
    """Limits of a free-text field (title or description)."""

    max_chars: int | None = Field(None, ge=10)
    #: Must the written value be non-empty?
    required: bool = True
    #: Field used when this one is empty after cleaning.
    fallback: Literal["title", "description"] | None = None
    #: Characters removed wherever they appear (Adobe titles: ``,``).
    remove_chars: str = ""
    #: When set, the only punctuation and symbol characters kept (others become spaces).
    allowed_punctuation: str | None = None
    capitalize_first: bool = False
    #: Reject (not rewrite) text with letters outside the Latin script.
    latin_only: bool = False


class KeywordRule(_Spec):
    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=1)
    #: Split multi-word keywords into single words (Dreamstime).
    single_words: bool = False
    latin_only: bool = False
    #: Between keywords in the cell (a keyword never contains it).
    separator: str = ","


class CsvLimits(_Spec):
    #: Data rows per file (the header is not counted); None = no limit.
    max_rows: int | None = Field(None, ge=1)
    #: Bytes per file, header and BOM included; None = no limit.
    max_bytes: int | None = Field(None, ge=64)
    bom: bool = False


class Categories(_Spec):
    """The agency's category ids, and how describer hints map onto them."""

    #: The Metadata field holding ids chosen by the describer.
    field: Literal["adobe_category", "dreamstime_categories"]
    #: How many category columns the CSV has.
    count: int = Field(1, ge=1)
    #: Written in a category column with no id.
    unused: str = ""
    #: Where the table comes from.
    source: str
    table: dict[int, str]
    #: Hint word (singular, lower case) → id.
    hints: dict[str, int] = Field(default_factory=dict)
    #: Ids never chosen from a hint (only when the metadata names them).
    no_auto: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _hints_in_table(self) -> "Categories":
        bad = sorted({i for i in self.hints.values() if i not in self.table})
        if bad:
            raise ValueError(f"hints point at ids missing from the table: {bad}")
        return self


class ImageLimits(_Spec):
    """What the agency accepts as an image file; the pack stage checks these."""

    #: Formats the agency takes. The pack stage makes JPEGs only, so JPEG must be among them.
    formats: tuple[str, ...] = ("JPEG",)
    min_megapixels: float | None = None
    max_megapixels: float | None = None
    max_bytes: int | None = None
    #: Near-identical versions of one motif the agency takes (docs/AGENCIES.md); None: no stated cap.
    max_versions_per_motif: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _takes_what_pack_makes(self) -> "ImageLimits":
        if "JPEG" not in self.formats:
            raise ValueError(f"formats {list(self.formats)} leave out JPEG, the only format the pack stage makes")
        return self

    @property
    def min_pixels(self) -> int | None:
        return None if self.min_megapixels is None else round(self.min_megapixels * 1_000_000)

    @property
    def max_pixels(self) -> int | None:
        return None if self.max_megapixels is None else round(self.max_megapixels * 1_000_000)


class TransportHint(_Spec):
    """How files reach the agency (a hint for configuring ``target``)."""

    protocol: Literal["sftp", "ftp", "ftps", "web"]
    host: str = ""
    port: int | None = None
    passive: bool | None = None
    folder: str = "/"
    user_hint: str = ""
    #: How the CSV reaches the agency: ``portal`` (uploaded by the contributor) or ``ftp``.
    csv_upload: Literal["portal", "ftp"] = "portal"
    notes: str = ""

    @property
    def target_example(self) -> str:
        """A ``target`` URL for microstock.toml, or "" when the agency takes no file transfer."""
        if self.protocol == "web" or not self.host:
            return ""
        return f"{self.protocol}://USER@{self.host}:{self.port}{self.folder}"


class AgencySpec(_Spec):
    name: str
    display_name: str
    #: Where the agency stands in lists: lower first, then by name.
    rank: int = 100
    #: The exact header of the CSV without optional columns, as one line.
    header: str
    #: Required metadata language (primary subtag, e.g. ``en``); "" = any.
    language: str = ""
    columns: tuple[Column, ...]
    filename: FilenameRule = FilenameRule()
    title: TextRule = TextRule()
    description: TextRule = TextRule()
    keywords: KeywordRule = KeywordRule()
    csv: CsvLimits = CsvLimits()
    categories: Categories | None = None
    image: ImageLimits = ImageLimits()
    transport: TransportHint

    @model_validator(mode="after")
    def _consistent(self) -> "AgencySpec":
        names = [c.name for c in self.columns if not c.optional]
        if ",".join(names) != self.header:
            raise ValueError(f"columns {names} do not spell the header {self.header!r}")
        if len({c.name for c in self.columns}) != len(self.columns):
            raise ValueError("column names repeat")
        for c in self.columns:
            if c.source == "category":
                if self.categories is None:
                    raise ValueError(f"column {c.name!r} needs a [categories] table")
                if c.index > self.categories.count:
                    raise ValueError(f"column {c.name!r}: index {c.index} > categories.count")
            if c.kind == "choice" and not c.choices:
                raise ValueError(f"column {c.name!r}: kind 'choice' needs choices")
        return self

    def active_columns(self, csv_defaults: dict[str, str] | None = None) -> list[Column]:
        """The columns written, in order: every required one, plus optional ones named in ``csv_defaults``."""
        chosen = csv_defaults or {}
        return [c for c in self.columns if not c.optional or c.name in chosen]

    def header_row(self, csv_defaults: dict[str, str] | None = None) -> list[str]:
        """The header cells written for these settings (``header`` plus enabled optional columns)."""
        return [c.name for c in self.active_columns(csv_defaults)]

    def configurable_columns(self) -> dict[str, Column]:
        """Columns whose value ``csv_defaults`` may set, by name."""
        return {c.name: c for c in self.columns if c.source in ("config", "editorial")}

    def with_limits(self, **limits: int | None) -> "AgencySpec":
        """A copy with other per-file limits (``max_rows``, ``max_bytes``; tests use small ones)."""
        csv_limits = CsvLimits.model_validate({**self.csv.model_dump(), **limits})
        return self.model_copy(update={"csv": csv_limits})


def parse_spec(text: str, origin: str) -> AgencySpec:
    """Validate TOML text as an agency spec; ConfigError names ``origin`` and the key."""
    try:
        return AgencySpec.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"{origin}: {key}: {err['msg']}") from exc


def shipped_spec_names() -> set[str]:
    """The agencies with a spec file next to this module."""
    return {p.name[: -len(".toml")] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml")}


@lru_cache(maxsize=None)
def load_spec(name: str) -> AgencySpec:
    """The spec of agency ``name`` from the package data; ConfigError when there is none or it is broken."""
    if name not in shipped_spec_names():
        raise ConfigError(f"no agency spec for {name!r} (known: {', '.join(sorted(shipped_spec_names()))})")
    resource = resources.files(__package__) / f"{name}.toml"
    spec = parse_spec(resource.read_text(encoding="utf-8"), f"tasks/agencies/{name}.toml")
    if spec.name != name:
        raise ConfigError(f"tasks/agencies/{name}.toml: name is {spec.name!r}, expected {name!r}")
    return spec
