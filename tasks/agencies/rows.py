"""The rules: canonical metadata + file name + agency settings → a valid CSV row, or the reasons why not.

Every rule of an agency's spec is applied here, before anything is written.
A violation is either fixed deterministically (cleaned, shortened at a word
boundary, de-duplicated, mapped onto the agency's table) and listed as a
:class:`Fix`, or it makes the asset's row invalid for that agency and is
listed as a :class:`Problem` naming the rule. A row with problems is never
written; nothing is changed silently.

Rule names read ``<field>.<rule>`` (``title.max_chars``, ``keywords.min``,
``filename.max_chars``, ``config.W-EL`` …) and appear in the validation report.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from tasks.agencies import categories as category_rules
from tasks.agencies.config_cells import check_csv_defaults, config_value
from tasks.agencies.dialect import bom_bytes, csv_bytes, unencodable
from tasks.agencies.disclosure import description_note, with_category, with_note, without_terms
from tasks.agencies.embedded import EmbeddedFields
from tasks.agencies.protected import ProtectedNames
from tasks.agencies.spec import AgencySpec, KeywordRule, TextRule
from tasks.agencies.text import clean_cell, first_non_latin, prepare, shorten
from tasks.core.records import Metadata
from tasks.core.reports import Problem

#: Separator between release names in a cell (a name never contains it).
RELEASE_SEPARATOR = ","


class Fix(BaseModel):
    """A deterministic change made so the row meets a rule."""

    model_config = ConfigDict(frozen=True)

    rule: str
    message: str


class RowResult(BaseModel):
    """One asset's row for one agency: ``cells`` when valid, else None with the problems."""

    model_config = ConfigDict(frozen=True)

    agency: str
    asset: str
    filename: str
    cells: tuple[str, ...] | None
    problems: tuple[Problem, ...] = ()
    fixes: tuple[Fix, ...] = ()

    @property
    def ok(self) -> bool:
        return self.cells is not None


# --- the rules -------------------------------------------------------------------------


class _Row:
    """Collects fixes and problems while one row is built."""

    def __init__(self, spec: AgencySpec, asset: str) -> None:
        self.spec, self.asset = spec, asset
        self.fixes: list[Fix] = []
        self.problems: list[Problem] = []

    def fix(self, rule: str, message: str) -> None:
        self.fixes.append(Fix(rule=rule, message=message))

    def problem(self, rule: str, message: str) -> None:
        self.problems.append(Problem(agency=self.spec.name, asset=self.asset, rule=rule, message=message))


def _text(row: _Row, field: str, rule: TextRule, raw: str, fallback_raw: str) -> str | None:
    """A title or description cell by ``rule``; None (with a problem) when it cannot be valid."""
    value = prepare(rule, raw)
    if value != raw.strip() and value:
        row.fix(f"{field}.cleaned", f"{field}: removed line breaks, control, formula or disallowed characters")
    if not value and rule.fallback:
        value = prepare(rule, fallback_raw)
        if value:
            row.fix(f"{field}.fallback", f"{field} was empty; used the {rule.fallback}")
    if not value:
        if rule.required:
            row.problem(f"{field}.empty", f"{field} is empty")
            return None
        return ""
    if rule.latin_only and (ch := first_non_latin(value)):
        row.problem(f"{field}.latin_only", f"{row.spec.display_name} takes English metadata only; {field} has {ch!r}")
        return None
    if rule.ascii_only and (ch := next((c for c in value if not c.isascii()), "")):
        row.problem(f"{field}.ascii_only", f"{row.spec.display_name} takes no special letters; {field} has {ch!r}")
        return None
    if rule.max_chars is not None and len(value) > rule.max_chars:
        short = shorten(value, rule.max_chars)
        if short is None:
            row.problem(f"{field}.max_chars",
                        f"{field} is {len(value)} characters (max {rule.max_chars}) with no word boundary to cut at")
            return None
        row.fix(f"{field}.max_chars", f"{field} shortened from {len(value)} to {len(short)} characters")
        value = short
    return value


def _without_terms(row: _Row, field: str, values: list[str], terms: tuple[str, ...]) -> list[str]:
    kept, found = [], []
    for value in values:
        value, seen = without_terms(value, terms)
        kept.append(value)
        found += [t for t in seen if t not in found]
    if found:
        row.fix("ai.forbidden_terms", f"removed {', '.join(repr(t) for t in found)} from the {field}: "
                                      f"{row.spec.display_name} does not want it in AI-generated content's metadata")
    return kept


def _note(row: _Row, description: str, filename: str) -> str | None:
    """The description with the agency's AI note (Dreamstime; a clip's own, :func:`description_note`); None (with
    a problem) when it cannot fit."""
    note, limit = description_note(row.spec, filename), row.spec.description.max_chars
    noted = with_note(description, note, limit)
    if noted is None:
        row.problem("ai.description_note", f"the description cannot hold {note!r} within {limit} characters")
    elif noted != description:
        row.fix("ai.description_note", f"added {note!r} to the description: the asset is AI-generated")
    return noted


def _keywords(row: _Row, rule: KeywordRule, raw: list[str], names: ProtectedNames | None,
              removed: list[str]) -> list[str] | None:
    """The keywords cell's words by ``rule``; a word that names one of ``names`` once cleaned and split is added to
    ``removed`` and left out (before the maximum is counted)."""
    words: list[str] = []
    seen: set[str] = set()
    dropped = split = 0
    for keyword in raw:
        for part in keyword.split(rule.separator):
            pieces = clean_cell(part).split(" ") if rule.single_words else [part]
            split += len(pieces) > 1
            for piece in pieces:
                word = clean_cell(piece)
                key = word.casefold()
                if not word or key in seen:
                    dropped += 1
                    continue
                seen.add(key)
                if names is not None and names.found_in(word):
                    removed.append(word)
                    continue
                words.append(word)
    if split:
        row.fix("keywords.single_words", f"split {split} multi-word keyword(s) into single words")
    if dropped:
        row.fix("keywords.duplicates", f"dropped {dropped} empty or duplicate keyword(s)")
    if rule.max is not None and len(words) > rule.max:
        row.fix("keywords.max", f"kept the first {rule.max} of {len(words)} keywords")
        words = words[: rule.max]
    if rule.latin_only:
        for word in words:
            if ch := first_non_latin(word):
                row.problem("keywords.latin_only",
                            f"{row.spec.display_name} takes English metadata only; keyword {word!r} has {ch!r}")
                return None
    if len(words) < rule.min:
        row.problem("keywords.min", f"{len(words)} keyword(s); {row.spec.display_name} needs at least {rule.min}")
        return None
    return words


def _releases(row: _Row, raw: list[str]) -> str:
    names: list[str] = []
    for release in raw:
        name = clean_cell(release.replace(RELEASE_SEPARATOR, " "))
        if name and name.casefold() not in {n.casefold() for n in names}:
            names.append(name)
    if len(names) != len(raw):
        row.fix("releases.duplicates", "dropped empty or duplicate release names")
    return RELEASE_SEPARATOR.join(names)


#: Why a category cell is empty, and what to do about it.
_NO_CATEGORY = " (the describer gave no category this agency maps; Gemini's descriptions carry category hints)"
def _filename(row: _Row, filename: str) -> None:
    if clean_cell(filename) != unicodedata.normalize("NFC", filename):  # decomposed accents (macOS) are fine
        row.problem("filename.unsafe", f"file name {filename!r} has line breaks, control characters, extra spaces "
                                       "or a leading = + - @; rename the file")
    limit = row.spec.filename.max_chars
    if limit is not None and len(filename) > limit:
        row.problem("filename.max_chars", f"file name is {len(filename)} characters; "
                                          f"{row.spec.display_name} takes at most {limit} (with extension)")


def _language(row: _Row, md: Metadata) -> None:
    want = row.spec.language
    have = md.language.split("-")[0].casefold()
    if want and have != want:
        row.problem("language",
                    f"{row.spec.display_name} takes {want!r} metadata only; this asset's is {md.language!r}")


def _names_removed(row: _Row, gone: list[str]) -> None:
    """The fix for keywords left out for naming a protected name, for every agency (a sidecar described before the
    rules, or corrected by hand, may still hold one; the describe stage removes them from new answers)."""
    if gone:
        row.fix("names.protected", f"removed keyword(s) naming a protected name: {', '.join(dict.fromkeys(gone))}")


def _protected_names(row: _Row, md: Metadata, names: ProtectedNames | None,
                     texts: dict[str, list[str | None]]) -> None:
    """A problem for each of ``texts``' fields whose versions (as described, as its cell carries it) name a
    protected name, where the spec's ``[names]`` holds such an asset back; a field ``"<field> embedded …"`` only
    for names its ``<field>`` did not show; a version that is None (a cell that could not be made) is not looked at."""
    policy = row.spec.names
    if names is None or policy.in_text != "hold_back" or (md.editorial and policy.editorial_exempt):
        return
    said: dict[str, set[str]] = {}
    for field, versions in texts.items():
        shown = said.setdefault(field.split(" ")[0], set())
        found = {str(n): n for text in versions if text for n in names.found_in(text) if str(n) not in shown}
        shown.update(found)
        if found:
            row.problem("names.protected", f"the {field} names {', '.join(found)}: "
                                           f"{row.spec.display_name} refuses protected names in metadata "
                                           "(correct it with `microstock review edit`)")


def build_row(
    spec: AgencySpec,
    metadata: Metadata,
    filename: str,
    csv_defaults: Mapping[str, str] | None = None,
    asset: str | None = None,
    names: ProtectedNames | None = None,
    embedded: EmbeddedFields | None = None,
) -> RowResult:
    """The agency's CSV row for one asset, every rule of ``spec`` applied.

    ``filename`` is the name of the file the agency receives (the upload-ready
    JPEG); ``asset`` is the asset's name in ``assets/`` (defaults to
    ``filename``), used in problems. ``csv_defaults`` are the agency's
    configured column values. ``names``: the run's protected names, looked for after every cleaning step: a
    title or description naming one, as described, as its cell carries it or as ``embedded`` (the upload-ready
    JPEG's fields, :func:`embedded_fields`) carries it, holds the asset back where the spec's ``[names] in_text``
    says so; a keyword naming one, as described or once cleaned and split for the cell, is removed (a fix).
    Deterministic: the same inputs give the same row.
    """
    defaults = dict(csv_defaults or {})
    row = _Row(spec, asset or filename)
    ai = metadata.ai_generated
    if ai and not spec.ai.accepted:
        row.problem("ai.refused", f"{spec.display_name} does not accept AI-generated content; held back there")
        return _result(row, filename, None)
    _filename(row, filename)
    _language(row, metadata)
    for problem in check_csv_defaults(spec, defaults):
        row.problem(problem.rule, problem.message)
    columns = spec.active_columns(defaults)
    # an agency without a CSV reads the embedded title, description and keywords: their rules still apply
    sources = {c.source for c in columns} if spec.takes_csv else {"title", "description", "keywords"}
    # an AI-generated asset's title and keywords lose the wording the agency forbids for it (Adobe: "generative AI")
    terms = spec.ai.forbidden_terms if ai else ()
    raw_title = _without_terms(row, "title", [metadata.title], terms)[0] if "title" in sources else ""
    title_fallback = without_terms(metadata.description, terms)[0]
    title = _text(row, "title", spec.title, raw_title, title_fallback) if "title" in sources else ""
    description = (_text(row, "description", spec.description, metadata.description, metadata.title)
                   if "description" in sources else "")
    if ai and spec.ai.description_note and description is not None:
        description = _note(row, description, filename)
    raw_keywords = _without_terms(row, "keywords", metadata.keywords, terms) if "keywords" in sources else []
    unnamed = names if names is not None and not metadata.editorial else None  # editorial: brands are kept
    raw_keywords, gone = unnamed.keywords_without(raw_keywords) if unnamed else (raw_keywords, [])
    if ai and spec.ai.keyword:
        raw_keywords = [spec.ai.keyword, *raw_keywords]
        row.fix("ai.keyword", f"added {spec.ai.keyword!r} first: the asset is AI-generated")
    keywords = _keywords(row, spec.keywords, raw_keywords, unnamed, gone) if "keywords" in sources else []
    _names_removed(row, gone)
    _protected_names(row, metadata, names, {
        "title": [metadata.title, title], "description": [metadata.description, description],
        "title embedded in the upload-ready JPEG": [embedded.title if embedded else None],
        "description embedded in the upload-ready JPEG": [embedded.description if embedded else None]})
    categories: list[int] = []
    if spec.categories and sources & {"category", "categories"}:
        categories, fixes = category_rules.choose(spec.categories, metadata, spec.display_name)
        for rule, message in fixes:
            row.fix(rule, message)
        if spec.ai.category is not None:
            categories, change = with_category(categories, spec.ai.category, spec.categories.count, ai)
            if change:
                row.fix("ai.category", change)
    releases = _releases(row, metadata.releases) if "releases" in sources else ""
    if row.problems or title is None or description is None or keywords is None:
        return _result(row, filename, None)
    if not spec.takes_csv:
        return _result(row, filename, ())

    values = {"filename": filename, "title": title, "description": description, "releases": releases,
              "keywords": spec.keywords.separator.join(keywords)}
    cells: list[str] = []
    for column in columns:
        if column.ai_only and not ai:
            cells.append("")
        elif column.source in values:
            cells.append(values[column.source])
        elif column.source == "category" and spec.categories:
            cells.append(category_rules.cell(spec.categories, categories[column.index - 1])
                         if column.index <= len(categories) else spec.categories.unused)
        elif column.source == "categories" and spec.categories:
            cells.append(spec.categories.separator.join(category_rules.cell(spec.categories, c) for c in categories))
        else:  # config, editorial, ai_generated (values already checked by check_csv_defaults)
            flagged = (column.source == "editorial" and metadata.editorial) or (column.source == "ai_generated" and ai)
            raw = spec.csv.flag_yes if flagged else defaults.get(column.name, column.default)
            cells.append(config_value(column, raw, spec.csv)[0])

    for column, cell in zip(columns, cells, strict=True):
        if column.required and not cell:
            why = _NO_CATEGORY if column.source in ("category", "categories") else ""
            row.problem("column.required", f"{column.name} is empty: {spec.display_name} refuses a row without it{why}")
    if row.problems:
        return _result(row, filename, None)
    if ch := unencodable(spec.csv, cells):
        row.problem("csv.encoding", f"{spec.display_name}'s CSV is {spec.csv.encoding}; the row has {ch!r}")
        return _result(row, filename, None)
    limit = spec.csv.max_bytes
    if limit is not None:
        size = len(bom_bytes(spec.csv)) + len(csv_bytes(spec.csv, [spec.header_row(defaults), cells]))
        if size > limit:
            row.problem("row.max_bytes",
                        f"the row alone makes a {size}-byte file; {spec.display_name} takes at most {limit}")
            return _result(row, filename, None)
    return _result(row, filename, tuple(cells))


def _result(row: _Row, filename: str, cells: tuple[str, ...] | None) -> RowResult:
    return RowResult(agency=row.spec.name, asset=row.asset, filename=filename, cells=cells,
                     problems=tuple(row.problems), fixes=tuple(row.fixes))


def split_keywords(spec: AgencySpec, cell: str) -> list[str]:
    """The keyword list back from a written keywords cell."""
    return cell.split(spec.keywords.separator) if cell else []
