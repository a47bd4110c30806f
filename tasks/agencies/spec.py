"""An agency's requirements as data: ``<agency>.toml``, shipped next to this module or the contributor's own.

Each TOML file says, for one agency, whether it takes a CSV at all, the CSV
dialect (delimiter, quoting, line ends, encoding, BOM, how yes/no is spelled),
the exact header and where each column's value comes from, the limits of every
field, the per-file row and byte limits, the category table, the image limits
the pack stage checks, what the agency says about AI-generated content and how
files reach it. The file's name is the agency's name. Adding an agency is a new
file, not new code: :mod:`tasks.agencies.catalog` lists the agencies from the
files found (shipped ones plus ``<workdir>/agencies/*.toml``).

The loader checks a spec against itself (the header equals its columns, a
category column has a table, a rule names a column that exists) so a broken
file fails loudly at load, with one line naming the file and the key, never by
writing a wrong CSV.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tasks.agencies.video import VideoRules
from tasks.core.errors import ConfigError
from tasks.core.settings import invalid

#: What an agency may be called: its name becomes a file, a folder, an environment
#: variable (``MICROSTOCK_<NAME>_PASSWORD``) and a Prefect block name.
AGENCY_NAME = re.compile(r"[a-z0-9]{1,30}")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Column(_Spec):
    """One CSV column: its exact name and where its value comes from."""

    name: str
    #: ``filename`` · ``title`` · ``description`` · ``keywords`` · ``releases``
    #: · ``category`` (the ``index``-th category of the asset) · ``categories``
    #: (all of them in one cell, joined by ``categories.separator``) ·
    #: ``editorial`` / ``ai_generated`` (yes when the asset's metadata says so,
    #: else the configured value) · ``config`` (``AgencySettings.csv_defaults[name]``,
    #: else ``default``: a constant or a setting).
    source: Literal["filename", "title", "description", "keywords", "releases", "category", "categories",
                    "editorial", "ai_generated", "config"]
    index: int = Field(1, ge=1)
    #: For ``config``/``editorial``/``ai_generated``: ``flag`` (the ``[csv]`` yes/no
    #: spelling), ``number`` (digits, one optional decimal point, or empty),
    #: ``id_list`` (comma-separated digits, or empty), ``choice`` (one of
    #: ``choices``), ``text`` (cleaned text).
    kind: Literal["flag", "number", "id_list", "choice", "text"] = "text"
    default: str = ""
    choices: tuple[str, ...] = ()
    #: Not in the header unless ``csv_defaults`` names this column.
    optional: bool = False
    #: Empty for an asset that is not AI-generated (Freepik's Prompt and Model).
    ai_only: bool = False
    #: The agency refuses a row whose cell here is empty (Shutterstock: columns A–D): such an
    #: asset is held back for the agency with the reason instead of being written.
    required: bool = False


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
    #: Reject (not rewrite) text with any character outside ASCII (Shutterstock: no ``é``, ``ø``).
    ascii_only: bool = False

    @classmethod
    def rewriting_of_all(cls, rules: Iterable["TextRule"]) -> "TextRule":
        """One rule that rewrites text as all of ``rules`` would: each one's removed characters, only the
        punctuation every one allows (limits and rejections are not merged)."""
        rules = list(rules)
        allowed = [set(r.allowed_punctuation) for r in rules if r.allowed_punctuation is not None]
        return cls(remove_chars="".join(dict.fromkeys("".join(r.remove_chars for r in rules))),
                   allowed_punctuation="".join(sorted(set.intersection(*allowed))) if allowed else None)


class KeywordRule(_Spec):
    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=1)
    #: Split multi-word keywords into single words (Dreamstime).
    single_words: bool = False
    latin_only: bool = False
    #: Between keywords in the cell (a keyword never contains it).
    separator: str = Field(",", min_length=1)


class CsvFormat(_Spec):
    """The CSV file: its dialect and its per-file limits."""

    delimiter: str = Field(",", min_length=1, max_length=1)
    #: ``minimal``: quotes only where needed; ``all``: every cell quoted.
    quoting: Literal["minimal", "all"] = "minimal"
    line_ending: Literal["crlf", "lf"] = "crlf"
    #: ``ascii``: a row with any other character is refused for this agency.
    encoding: Literal["utf-8", "ascii"] = "utf-8"
    bom: bool = False
    #: How a ``flag`` column spells yes and no (``1``/``0``, ``Yes``/``No``, ``yes``/``no``).
    flag_yes: str = Field("1", min_length=1)
    flag_no: str = Field("0", min_length=1)
    #: Data rows per file (the header is not counted); None = no limit.
    max_rows: int | None = Field(None, ge=1)
    #: Bytes per file, header and BOM included; None = no limit.
    max_bytes: int | None = Field(None, ge=64)

    @model_validator(mode="after")
    def _bom_is_utf8(self) -> "CsvFormat":
        if self.bom and self.encoding != "utf-8":
            raise ValueError("bom = true needs encoding = 'utf-8'")
        return self


class Categories(_Spec):
    """The agency's categories, and how describer hints map onto them."""

    #: The Metadata field holding ids chosen by the describer; None = chosen from hints only.
    field: Literal["adobe_category", "dreamstime_categories"] | None = None
    #: How many categories an asset gets at most (category columns, or names in one cell).
    count: int = Field(1, ge=1)
    #: Written in a category column with no id.
    unused: str = ""
    #: ``id``: the table's number is written; ``name``: the table's text (Shutterstock).
    write: Literal["id", "name"] = "id"
    #: Between the categories of a ``categories`` column.
    separator: str = ","
    #: Where the table comes from.
    source: str
    table: dict[int, str]
    #: Hint word (singular, lower case) → id.
    hints: dict[str, int] = Field(default_factory=dict)
    #: Ids never chosen from a hint (only when the metadata names them).
    no_auto: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _hints_in_table(self) -> "Categories":
        bad = sorted({i for i in (*self.hints.values(), *self.no_auto) if i not in self.table})
        if bad:
            raise ValueError(f"hints or no_auto point at ids missing from the table: {bad}")
        return self


class ImageLimits(_Spec):
    """What the agency accepts as an image file; the pack stage checks these."""

    #: Formats the agency takes. The pack stage makes JPEGs only, so JPEG must be among them.
    formats: tuple[str, ...] = ("JPEG",)
    min_megapixels: float | None = Field(None, gt=0)
    max_megapixels: float | None = Field(None, gt=0)
    #: Shorter side at least, longer side at most (pixels).
    min_side: int | None = Field(None, ge=1)
    max_side: int | None = Field(None, ge=1)
    max_bytes: int | None = Field(None, ge=1)
    #: Near-identical versions of one motif the agency takes (docs/AGENCIES.md); None: no stated cap.
    max_versions_per_motif: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _takes_what_pack_makes(self) -> "ImageLimits":
        if "JPEG" not in self.formats:
            raise ValueError(f"formats {list(self.formats)} leave out JPEG, the only format the pack stage makes")
        return self

    @property
    def min_pixels(self) -> int | None:
        """The fewest pixels an image can have: the megapixel minimum, or a square of the minimum side."""
        found = [v for v in (self.min_megapixels and round(self.min_megapixels * 1_000_000),
                             self.min_side and self.min_side ** 2) if v]
        return max(found) if found else None

    @property
    def max_pixels(self) -> int | None:
        return None if self.max_megapixels is None else round(self.max_megapixels * 1_000_000)


class AiRules(_Spec):
    """What the agency says about AI-generated assets (``Metadata.ai_generated``)."""

    #: False: an AI-generated asset is held back for this agency (never sent, no row).
    accepted: bool = True
    #: Put first among an AI-generated asset's keywords (Freepik: ``_ai_generated``). Other
    #: disclosures are columns: ``source = "ai_generated"`` (a flag) or ``ai_only`` (Freepik's Prompt, Model).
    keyword: str = ""
    #: The box the contributor ticks in the agency's portal for an AI-generated file (Adobe: "Created using
    #: generative AI tools"): the run summary lists the files uploaded there that need it.
    portal_tick: str = ""
    #: Appended to an AI-generated asset's description (Dreamstime: the description must say the image was
    #: created using an AI model), within ``description.max_chars``; never added to other assets.
    description_note: str = ""
    #: A category an AI-generated asset must have among its categories (Dreamstime: "AI generated"); it
    #: replaces the last (least relevant) one when all are taken, and is removed from any other asset.
    category: int | None = None
    #: Words an AI-generated asset's title and keywords must not contain (Adobe: "generative AI"; the portal
    #: tick says it): removed wherever they stand, case-insensitively, a space matching a hyphen too.
    forbidden_terms: tuple[str, ...] = ()


class SimilarityPolicy(_Spec):
    """What is done with an asset like another of the batch or one already uploaded there (docs/AGENCIES.md,
    "Similar content"; the score is ``tasks.images.likeness``)."""

    #: ``hold_back``: of each group of versions (uploaded ones first) ``image.max_versions_per_motif`` go and
    #: the rest is held back for this agency until released (no cap: as ``warn``); ``warn``: shown, nothing held.
    action: Literal["hold_back", "warn"] = "warn"
    #: The pair score (0–1) from which two assets are versions of one motif.
    threshold: float = Field(0.4, gt=0, le=1)


class NamesPolicy(_Spec):
    """What the agency says about protected names (artists, characters, brands: ``tasks.agencies.protected``) in a
    title or description. Keywords naming one are removed for every agency when the asset is described
    (``tasks.agencies.keyword_rules``)."""

    #: ``hold_back``: a title or description naming one holds the asset back for this agency, the name given as
    #: the reason (correct it with ``microstock review edit``); ``allow``: no rule of the agency's was found.
    in_text: Literal["hold_back", "allow"] = "allow"
    #: An editorial asset is not held back for it (Shutterstock: trademarks are "generally acceptable" there).
    editorial_exempt: bool = False
    #: Where the agency says so.
    source: str = ""


class UploadLimits(_Spec):
    """A cap the agency states on what a contributor may send (``tasks.stages.upload_caps``); the contributor's
    ``upload_cap`` setting replaces it."""

    #: Files per ``per`` window; None: no stated cap.
    cap: int | None = Field(None, ge=0)
    per: Literal["day", "week", "month"] = "month"
    #: Where the agency says so.
    source: str = ""


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
        port = "" if self.port is None else f":{self.port}"
        return f"{self.protocol}://USER@{self.host}{port}{self.folder}"


class AgencySpec(_Spec):
    #: The file's name without ``.toml`` (set by the loader, never written in the file).
    name: str
    display_name: str
    #: Where the agency stands in lists: lower first, then by name.
    rank: int = 100
    #: Used when ``[agencies.<name>] enabled`` is not in microstock.toml.
    enabled_by_default: bool = True
    #: False: the agency reads only the metadata embedded in the file; rows are
    #: still checked (an asset breaking a rule is held back) but no CSV is written.
    takes_csv: bool = True
    #: The exact header of the CSV without optional columns, as one line joined by the delimiter.
    header: str = ""
    #: Required metadata language (primary subtag, e.g. ``en``); "" = any.
    language: str = ""
    columns: tuple[Column, ...] = ()
    filename: FilenameRule = FilenameRule()
    title: TextRule = TextRule()
    description: TextRule = TextRule()
    keywords: KeywordRule = KeywordRule()
    csv: CsvFormat = CsvFormat()
    categories: Categories | None = None
    image: ImageLimits = ImageLimits()
    ai: AiRules = AiRules()
    similarity: SimilarityPolicy = SimilarityPolicy()
    names: NamesPolicy = NamesPolicy()
    uploads: UploadLimits = UploadLimits()
    #: What the agency takes as a video clip (:mod:`tasks.agencies.video`); absent: no published rules confirmed.
    video: VideoRules = VideoRules()
    transport: TransportHint

    @model_validator(mode="after")
    def _consistent(self) -> "AgencySpec":
        if not self.takes_csv:
            if self.columns or self.header:
                raise ValueError("takes_csv = false: leave out header and columns")
            return self
        if not self.columns:
            raise ValueError("columns: a CSV needs at least one column (or set takes_csv = false)")
        names = [c.name for c in self.columns if not c.optional]
        if self.csv.delimiter.join(names) != self.header:
            raise ValueError(f"columns {names} do not spell the header {self.header!r}")
        if len({c.name for c in self.columns}) != len(self.columns):
            raise ValueError("column names repeat")
        if self.csv.flag_yes == self.csv.flag_no:
            raise ValueError("csv.flag_yes and csv.flag_no are the same")
        sources = {c.source for c in self.columns}
        if self.categories is not None and not sources & {"category", "categories"}:
            raise ValueError("[categories] is set but no column has source 'category' or 'categories'")
        if self.ai.keyword and "keywords" not in sources:
            raise ValueError("ai.keyword is set but no column has source 'keywords'")
        if self.ai.description_note and "description" not in sources:
            raise ValueError("ai.description_note is set but no column has source 'description'")
        if self.ai.category is not None and (self.categories is None or self.ai.category not in self.categories.table):
            raise ValueError(f"ai.category {self.ai.category} is not in the [categories] table")
        for c in self.columns:
            if c.source in ("category", "categories"):
                if self.categories is None:
                    raise ValueError(f"column {c.name!r} needs a [categories] table")
                if c.index > self.categories.count:
                    raise ValueError(f"column {c.name!r}: index {c.index} > categories.count")
            if c.kind == "choice" and not c.choices:
                raise ValueError(f"column {c.name!r}: kind 'choice' needs choices")
            if c.source in ("editorial", "ai_generated") and c.kind != "flag":
                raise ValueError(f"column {c.name!r}: source {c.source!r} needs kind 'flag'")
            if c.kind == "flag" and c.default not in (self.csv.flag_yes, self.csv.flag_no):
                raise ValueError(f"column {c.name!r}: default {c.default!r} is neither csv.flag_yes nor csv.flag_no")
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
        return {c.name: c for c in self.columns if c.source in ("config", "editorial", "ai_generated")}

    def with_limits(self, **limits: int | None) -> "AgencySpec":
        """A copy with other per-file limits (``max_rows``, ``max_bytes``; tests use small ones)."""
        csv_format = CsvFormat.model_validate({**self.csv.model_dump(), **limits})
        return self.model_copy(update={"csv": csv_format})


def parse_spec(text: str, origin: str, name: str) -> AgencySpec:
    """Validate TOML text as the spec of agency ``name``; ConfigError names ``origin`` and the key."""
    if not AGENCY_NAME.fullmatch(name):
        raise ConfigError(f"{origin}: an agency's file name must be 1–30 lower-case letters or digits "
                          f"(it names the CSV, the outbox folder and the password variable), not {name!r}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from exc
    if "name" in data:
        raise ConfigError(f"{origin}: name: not a key (the agency's name is its file name, {name!r})")
    try:
        return AgencySpec.model_validate({**data, "name": name})
    except ValidationError as exc:
        raise invalid(origin, exc) from exc


def shipped_spec_names() -> set[str]:
    """The agencies with a spec file next to this module."""
    return {p.name[: -len(".toml")] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml")}


@lru_cache(maxsize=None)
def load_spec(name: str) -> AgencySpec:
    """The shipped spec of agency ``name``; ConfigError when there is none or it is broken."""
    if name not in shipped_spec_names():
        raise ConfigError(f"no agency spec for {name!r} (known: {', '.join(sorted(shipped_spec_names()))})")
    resource = resources.files(__package__) / f"{name}.toml"
    return parse_spec(resource.read_text(encoding="utf-8"), f"tasks/agencies/{name}.toml", name)
