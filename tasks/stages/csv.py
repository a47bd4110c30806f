"""Agency CSVs, regenerated from every sidecar each run: one valid row per described asset, never twice.

For each agency, every described asset's metadata goes through the agency's
rules (:mod:`tasks.agencies.rows`); valid rows are written to
``csv/<agency>.csv`` in asset-name order, continuing in ``<agency>-2.csv``,
``<agency>-3.csv``… past the spec's row or byte limit (continuation files
left from an earlier, larger run are removed). An asset whose row breaks a
rule is skipped for that agency only, and the report says which rule. Files
are written whole or not at all, and only when their bytes change.

What goes to agency X is answered once, here: an asset X's CSV has a valid row
for (:meth:`CsvReport.accepted`; ``reports/validation.json`` shows it to people). Review
asks about what is accepted somewhere, and the upload stage and the ``ledger``
commands send or count only what is accepted there
(:func:`tasks.stores.pending.uploadable`, and what the pack manifest records for the ``ledger`` commands), so
nothing goes to an agency whose CSV lacks it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from pathlib import Path

from tasks.agencies.catalog import Catalog, catalog
from tasks.agencies.dialect import bom_bytes, csv_bytes
from tasks.agencies.embedded import EmbeddedFields, embedded_fields
from tasks.agencies.protected import ProtectedNames
from tasks.agencies.rows import RowResult, build_row, check_csv_defaults
from tasks.agencies.spec import AgencySpec
from tasks.core.errors import StageStopped
from tasks.core.files import atomic_write_bytes, cannot_write, disk_full, disk_of
from tasks.core.records import Sidecar, described_sidecars, ready_name
from tasks.core.reports import AgencyCsv, CsvReport, PackReport, Problem
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stages.kinds import ASSET_EXTENSIONS, kind_of
from tasks.stages.run_context import RunContext


def agency_rows(spec: AgencySpec, sidecars: list[Sidecar], csv_defaults: Mapping[str, str],
                protected: ProtectedNames | None = None,
                embedded: Mapping[str, EmbeddedFields] | None = None) -> list[RowResult]:
    """Every described asset's row for one agency, in order; the same image or upload file name is used once.
    ``protected``: the protected names the spec's ``[names]`` policy holds back for, looked for in the row and in
    what ``embedded`` says an asset's upload-ready JPEG carries (by asset name; clips have none)."""
    results: list[RowResult] = []
    names: dict[str, str] = {}
    images: dict[str, str] = {}
    for sidecar in sidecars:
        filename = ready_name(sidecar.name)
        result = build_row(spec, sidecar.metadata, filename, csv_defaults, asset=sidecar.name, names=protected,
                           embedded=(embedded or {}).get(sidecar.name))
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
    start = bom_bytes(spec.csv) + csv_bytes(spec.csv, [header])
    files: list[bytes] = []
    chunk: list[bytes] = []
    size = len(start)
    for cells in rows:
        line = csv_bytes(spec.csv, [cells])
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


def _write(path: Path, data: bytes, report: CsvReport) -> None:
    """Write ``path`` whole or not at all; a full disk stops the stage (StageStopped ``disk_full``): one line naming
    the disk, the file, and the agencies whose CSVs ``report`` holds as written; any other cause (a read-only
    folder) the same way, naming the file (``unwritable``)."""
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        done = [agency for agency, result in report.agencies.items() if result.files]
        kept = f"the CSVs of {', '.join(done)} written" if done else "no agency's CSVs written"
        if not disk_full(exc):
            raise cannot_write(path, exc, f"the CSV stage stopped with {kept}, nothing uploaded") from None
        disk = disk_of(path)
        raise StageStopped(f"disk full: {disk} has no room left for {path} ({exc.strerror or exc}); the CSV stage "
                           f"stopped with {kept} (each file whole or not at all) — free space on {disk} and run "
                           "again: every CSV is written again from the sidecars", kind="disk_full") from None


def _write_files(wd: Workdir, agency: str, contents: list[bytes], report: CsvReport) -> list[str]:
    paths = []
    for i, data in enumerate(contents, start=1):
        path = wd.csv / csv_file_name(agency, i)
        if not path.is_file() or path.read_bytes() != data:  # a folder in its place: set aside by the write
            _write(path, data, report)
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
    waiting: Collection[str] = (),
    left_out_rules: Mapping[str, Mapping[str, str]] | None = None,
    packed: PackReport | None = None,
    known: Catalog | None = None,
) -> CsvReport:
    """Regenerate ``csv/<agency>.csv`` (and continuations) for each agency from every sidecar.

    ``settings`` gives each agency's ``csv_defaults``; ``specs`` overrides the
    workdir's specs (tests use small limits). An agency that takes no CSV
    (``takes_csv = false``) gets its rows checked and reported, and no file. ``left_out[agency]`` maps the
    assets the pack stage rejected or held back for that agency to the reason:
    they get no row there, and the reason is reported under the rule ``left_out_rules[agency][name]`` gives
    (``similar content``, ``image size``; ``image`` when none is given). Assets rejected in review (their
    sidecar says so) and those ``waiting`` for a review decision get no row either
    (rule ``review``). With the pack stage's report ``packed``, only the assets it packed get a row, and none
    where their kind's rules do not take them (:attr:`PackReport.not_taken`: no row, no problem — a clip at an
    agency without video rules is no row problem there). Every kind of asset the same way: a clip is an asset
    whose upload-ready file carries no embedded metadata. Agencies not listed keep their
    files. An agency whose settings are invalid gets no file this run and an
    agency-wide problem. The report is also saved as ``reports/validation.json``. A full disk stops the stage
    with one line (StageStopped ``disk_full``, :func:`_write`).
    """
    settings = settings or Settings()
    names = ProtectedNames.of(settings.keywords)
    sidecars = [s for s in described_sidecars(wd, ASSET_EXTENSIONS) if packed is None or s.name in packed.ready]
    review = {s.name: f"rejected in review ({s.review.at})" for s in sidecars if s.rejected}
    review.update({name: "waiting for review" for name in waiting if name not in review})
    report = CsvReport()
    known = known or catalog(wd)  # the run's agencies (its context's catalog), else the workdir's read now
    # what each upload-ready file carries, as the pack stage embeds it (every known agency's rules)
    embedded = {s.name: embedded_fields(s.metadata, known.specs.values(), names) for s in sidecars
                if kind_of(s.name).embeds_metadata}
    for agency in agencies:
        spec = (specs or {}).get(agency) or known.spec(agency)
        defaults = settings.agency(agency).csv_defaults
        result = AgencyCsv(agency=agency, display_name=spec.display_name,
                           csv_upload=spec.transport.csv_upload if spec.takes_csv else "none")
        report.agencies[agency] = result
        config_problems = check_csv_defaults(spec, defaults)
        if config_problems:
            report.problems.extend(config_problems)
            result.written = False
            continue
        excluded = (left_out or {}).get(agency, {})
        rules = (left_out_rules or {}).get(agency, {})
        report.problems.extend(Problem(agency=agency, asset=name, rule=rules.get(name, "image"), message=reason)
                               for name, reason in sorted(excluded.items()))
        report.problems.extend(Problem(agency=agency, asset=name, rule="review", message=reason)
                               for name, reason in sorted(review.items()) if name not in excluded)
        not_taken = packed.not_taken.get(agency, {}) if packed is not None else {}
        rows = agency_rows(spec, [s for s in sidecars
                                  if s.name not in excluded and s.name not in review and s.name not in not_taken],
                           defaults, names, embedded)
        fixes: Counter[str] = Counter(f.rule for r in rows for f in r.fixes)
        valid = [r for r in rows if r.ok]
        report.problems.extend(p for r in rows for p in r.problems)
        result.rows = len(valid)
        result.accepted = [r.asset for r in valid]
        result.fixes = dict(sorted(fixes.items()))
        if spec.takes_csv:
            result.files = _write_files(wd, agency,
                                        split_files(spec, spec.header_row(defaults), [r.cells for r in valid]),
                                        report)
    _write(wd.reports / "validation.json", report.model_dump_json(indent=2).encode("utf-8"), report)
    return report



def csvs_for_packed(ctx: RunContext, packed: PackReport, waiting: Collection[str] = ()) -> CsvReport:
    """The CSV stage: every agency's CSVs, leaving out what pack rejected or held back there, what review
    rejected, and what is ``waiting`` for a review decision."""
    left_out = {a: packed.left_out(a) for a in ctx.agencies}
    return write_agency_csvs(ctx.wd, ctx.agencies, ctx.settings, left_out=left_out, waiting=waiting,
                             left_out_rules={a: {name: packed.left_out_rule(a, name) for name in names}
                                             for a, names in left_out.items()}, packed=packed, known=ctx.catalog)
