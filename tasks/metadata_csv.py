"""Agency CSVs, regenerated from every sidecar each run: one valid row per described asset, never twice.

For each agency, every described asset's metadata goes through the agency's
rules (:mod:`tasks.agencies.rows`); valid rows are written to
``csv/<agency>.csv`` in asset-name order, continuing in ``<agency>-2.csv``,
``<agency>-3.csv``… past the spec's row or byte limit (continuation files
left from an earlier, larger run are removed). An asset whose row breaks a
rule is skipped for that agency only, and the report says which rule. Files
are written whole or not at all, and only when their bytes change.

The upload stage asks :func:`asset_problems` (or :meth:`CsvReport.accepted`)
before sending an asset, so nothing goes to an agency whose CSV lacks it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from pydantic import BaseModel, Field
from rich.console import Group
from rich.table import Table

from tasks.agencies.rows import Problem, RowResult, bom_bytes, build_row, check_csv_defaults, csv_bytes
from tasks.agencies.spec import AgencySpec, load_spec
from tasks.assets import iter_asset_files
from tasks.config import Settings
from tasks.report import md_cell
from tasks.files import atomic_write_bytes
from tasks.metadata import Sidecar, read_sidecar
from tasks.pack import ready_name
from tasks.workdir import Workdir


class AgencyCsv(BaseModel):
    """What was written for one agency."""

    agency: str
    display_name: str
    rows: int = 0
    #: Paths of the CSV files, first file first.
    files: list[str] = Field(default_factory=list)
    #: Asset names with a valid row.
    accepted: list[str] = Field(default_factory=list)
    #: Deterministic fixes made, by rule (``title.max_chars`` → 3).
    fixes: dict[str, int] = Field(default_factory=dict)
    #: How the contributor hands the CSV over (``portal``: uploaded by hand).
    csv_upload: str = "portal"
    #: False when the agency's settings are invalid: no file was written.
    written: bool = True


class CsvReport(BaseModel):
    """The run's CSV stage: per agency what was written, and every problem found."""

    agencies: dict[str, AgencyCsv] = Field(default_factory=dict)
    #: Assets skipped for an agency (``asset`` is "" for an agency-wide problem).
    problems: list[Problem] = Field(default_factory=list)

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per agency."""
        return {a: r.rows for a, r in self.agencies.items()}

    @property
    def files(self) -> dict[str, list[str]]:
        """CSV files written per agency."""
        return {a: r.files for a, r in self.agencies.items()}

    def accepted(self, agency: str, asset: str) -> bool:
        """Has ``asset`` a valid row in the agency's CSV this run?"""
        found = self.agencies.get(agency)
        return found is not None and asset in found.accepted


def described_sidecars(wd: Workdir) -> list[Sidecar]:
    """The sidecars of every described asset whose image is in ``assets/``, in file-name order."""
    found = []
    for path in iter_asset_files(wd.assets):
        sidecar = read_sidecar(wd.sidecar(path.name))
        # assets/a.jpg and assets/a.png share assets/a.json: it describes only the file it names.
        if sidecar is not None and sidecar.name == path.name:
            found.append(sidecar)
    return found


def agency_rows(spec: AgencySpec, sidecars: list[Sidecar], csv_defaults: Mapping[str, str]) -> list[RowResult]:
    """Every described asset's row for one agency, in order; the same image or upload file name is used once."""
    results: list[RowResult] = []
    names: dict[str, str] = {}
    images: dict[str, str] = {}
    for sidecar in sidecars:
        filename = ready_name(sidecar.name)
        result = build_row(spec, sidecar.metadata, filename, csv_defaults, asset=sidecar.name)
        twin = names.get(filename) or images.get(sidecar.asset_id)
        if twin is not None:
            result = RowResult(agency=spec.name, asset=sidecar.name, filename=filename, cells=None, problems=(
                Problem(agency=spec.name, asset=sidecar.name, rule="row.duplicate",
                        message=f"same upload file or image as {twin}; written once"),))
        else:
            names[filename] = images[sidecar.asset_id] = sidecar.name
        results.append(result)
    return results


def split_files(spec: AgencySpec, header: list[str], rows: list[tuple[str, ...]]) -> list[bytes]:
    """The CSV files' bytes: each starts with the header (and BOM when the spec says) and stays
    within the spec's row and byte limits. Always at least one file (the header alone when no rows)."""
    max_rows, max_bytes = spec.csv.max_rows, spec.csv.max_bytes
    start = bom_bytes(spec) + csv_bytes([header])
    files: list[bytes] = []
    chunk: list[bytes] = []
    size = len(start)
    for cells in rows:
        line = csv_bytes([cells])
        full = (max_rows is not None and len(chunk) >= max_rows) or (
            max_bytes is not None and size + len(line) > max_bytes)
        if chunk and full:
            files.append(start + b"".join(chunk))
            chunk, size = [], len(start)
        chunk.append(line)
        size += len(line)
    files.append(start + b"".join(chunk))
    return files


def csv_file_name(agency: str, index: int) -> str:
    """``<agency>.csv`` for the first file, ``<agency>-<n>.csv`` for the n-th (n ≥ 2)."""
    return f"{agency}.csv" if index == 1 else f"{agency}-{index}.csv"


def _write_files(wd: Workdir, agency: str, contents: list[bytes]) -> list[str]:
    paths = []
    for i, data in enumerate(contents, start=1):
        path = wd.csv / csv_file_name(agency, i)
        if not path.exists() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
        paths.append(str(path))
    stale = re.compile(rf"{re.escape(agency)}-(\d+)\.csv")
    for path in wd.csv.glob(f"{agency}-*.csv"):
        match = stale.fullmatch(path.name)
        if match and int(match[1]) > len(contents):
            path.unlink(missing_ok=True)
    return paths


def write_agency_csvs(
    wd: Workdir,
    agencies: list[str],
    settings: Settings | None = None,
    *,
    specs: Mapping[str, AgencySpec] | None = None,
    left_out: Mapping[str, Mapping[str, str]] | None = None,
) -> CsvReport:
    """Regenerate ``csv/<agency>.csv`` (and continuations) for each agency from every sidecar.

    ``settings`` gives each agency's ``csv_defaults``; ``specs`` overrides the
    packaged specs (tests use small limits). ``left_out[agency]`` maps the
    assets the pack stage rejected or held back for that agency to the reason:
    they get no row there, and the reason is reported. Agencies not listed keep their
    files. An agency whose settings are invalid gets no file this run and an
    agency-wide problem. The report is also saved as ``reports/validation.json``.
    """
    settings = settings or Settings()
    sidecars = described_sidecars(wd)
    report = CsvReport()
    for agency in agencies:
        spec = (specs or {}).get(agency) or load_spec(agency)
        defaults = settings.agency(agency).csv_defaults
        result = AgencyCsv(agency=agency, display_name=spec.display_name, csv_upload=spec.transport.csv_upload)
        report.agencies[agency] = result
        config_problems = check_csv_defaults(spec, defaults)
        if config_problems:
            report.problems.extend(config_problems)
            result.written = False
            continue
        excluded = (left_out or {}).get(agency, {})
        report.problems.extend(Problem(agency=agency, asset=name, rule="image", message=reason)
                               for name, reason in sorted(excluded.items()))
        rows = agency_rows(spec, [s for s in sidecars if s.name not in excluded], defaults)
        fixes: Counter[str] = Counter(f.rule for r in rows for f in r.fixes)
        valid = [r for r in rows if r.ok]
        report.problems.extend(p for r in rows for p in r.problems)
        result.rows = len(valid)
        result.accepted = [r.asset for r in valid]
        result.fixes = dict(sorted(fixes.items()))
        result.files = _write_files(wd, agency, split_files(spec, spec.header_row(defaults), [r.cells for r in valid]))
    atomic_write_bytes(wd.reports / "validation.json", report.model_dump_json(indent=2).encode("utf-8"))
    return report


def asset_problems(wd: Workdir, settings: Settings, agency: str, asset: str) -> list[Problem]:
    """Why ``asset`` has no valid row for ``agency`` right now; empty when it has one.

    Re-derived from the workdir (sidecar + spec + settings), so the upload
    stage can ask in any later run: upload an asset to an agency only when
    this is empty.
    """
    sidecar = read_sidecar(wd.sidecar(asset))
    if sidecar is None or sidecar.name != asset:
        return [Problem(agency=agency, asset=asset, rule="described", message="not described yet (no sidecar)")]
    spec = load_spec(agency)
    return list(build_row(spec, sidecar.metadata, ready_name(asset), settings.agency(agency).csv_defaults,
                          asset=asset).problems)


# --- the validation report ---------------------------------------------------------------


def next_steps(report: CsvReport) -> list[str]:
    """What the contributor does with the CSVs by hand (Adobe and Vecteezy: upload them in the portal)."""
    steps = []
    for result in report.agencies.values():
        if result.written and result.rows and result.csv_upload == "portal":
            files = ", ".join(result.files)
            steps.append(f"{result.display_name}: upload {files} in the contributor portal once the images have arrived")
    return steps


def validation_table(report: CsvReport) -> Group:
    """The validation report for the terminal: rows per agency, then every skipped asset with its rule."""
    summary = Table(title="Agency CSVs", title_justify="left")
    for column in ("agency", "rows", "fixed", "skipped", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "fixed", "skipped") else "left")
    skipped = Counter(p.agency for p in report.problems if p.asset)
    for agency, result in report.agencies.items():
        files = "\n".join(result.files) if result.written else "not written (see problems)"
        summary.add_row(result.display_name, str(result.rows), str(sum(result.fixes.values())),
                        str(skipped[agency]), files)
    parts: list = [summary]
    if report.problems:
        problems = Table(title="Skipped for an agency (the rule it broke)", title_justify="left")
        for column in ("asset", "agency", "rule", "problem"):
            problems.add_column(column, overflow="fold")
        for p in report.problems:
            problems.add_row(p.asset or "(all)", p.agency, p.rule, p.message)
        parts.append(problems)
    parts.extend(next_steps(report))
    return Group(*parts)


def validation_markdown(report: CsvReport) -> str:
    """The validation report as markdown (for a Prefect artifact)."""
    lines = ["## Agency CSVs", "", "| agency | rows | fixed | skipped | files |", "|---|---:|---:|---:|---|"]
    skipped = Counter(p.agency for p in report.problems if p.asset)
    for agency, result in report.agencies.items():
        files = ", ".join(f"`{md_cell(f)}`" for f in result.files) if result.written else "not written"
        lines.append(f"| {md_cell(result.display_name)} | {result.rows} | {sum(result.fixes.values())} "
                     f"| {skipped[agency]} | {files} |")
    fixes = Counter()
    for result in report.agencies.values():
        fixes.update({f"{result.agency}: {rule}": n for rule, n in result.fixes.items()})
    if fixes:
        lines += ["", "Fixed automatically: " + ", ".join(f"{md_cell(k)} ×{n}" for k, n in sorted(fixes.items()))]
    if report.problems:
        lines += ["", "### Skipped for an agency", "", "| asset | agency | rule | problem |", "|---|---|---|---|"]
        lines += [f"| {md_cell(p.asset or '(all)')} | {p.agency} | `{md_cell(p.rule)}` | {md_cell(p.message)} |"
                  for p in report.problems]
    steps = next_steps(report)
    if steps:
        lines += ["", "### Next steps", ""] + [f"- {md_cell(s)}" for s in steps]
    return "\n".join(lines) + "\n"
