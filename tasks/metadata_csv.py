"""Agency CSVs, regenerated from every sidecar each run (never a row twice)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from tasks.assets import iter_asset_files
from tasks.files import atomic_write_bytes
from tasks.metadata import Sidecar, read_sidecar
from tasks.workdir import Workdir

HEADERS = {
    "adobe": ["Filename", "Title", "Keywords", "Category", "Releases"],
    "vecteezy": ["Filename", "Title", "Description", "Keywords"],
    "dreamstime": ["Filename", "Image Name", "Description", "Category 1", "Category 2", "Category 3", "keywords",
                   "Free", "W-EL", "P-EL", "SR-EL", "SR-Price", "Editorial", "MR doc Ids", "Pr Docs"],
}


@dataclass
class CsvReport:
    """Rows written per agency and the files holding them."""

    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)


def described_sidecars(wd: Workdir) -> list[Sidecar]:
    """The sidecars of every described asset, in file-name order."""
    found = (read_sidecar(wd.sidecar(p.name)) for p in iter_asset_files(wd.assets))
    return [s for s in found if s is not None]


def _row(agency: str, s: Sidecar) -> list[str]:
    m, name = s.metadata, s.name.rsplit(".", 1)[0] + ".jpg"
    if agency == "adobe":
        return [name, m.title, ",".join(m.keywords), str(m.adobe_category or ""), ",".join(m.releases)]
    if agency == "vecteezy":
        return [name, m.title, m.description, ",".join(m.keywords)]
    cats = (list(m.dreamstime_categories) + [0, 0, 0])[:3]
    return [name, m.title, m.description, *map(str, cats), " ".join(m.keywords), "0", "0", "0", "0", "", "0", "", ""]


def write_agency_csvs(wd: Workdir, agencies: list[str]) -> CsvReport:
    """Write ``csv/<agency>.csv`` for every described asset."""
    report = CsvReport()
    sidecars = described_sidecars(wd)
    for agency in agencies:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(HEADERS[agency])
        for s in sidecars:
            writer.writerow(_row(agency, s))
        path = wd.csv / f"{agency}.csv"
        atomic_write_bytes(path, buf.getvalue().encode("utf-8"))
        report.rows[agency] = len(sidecars)
        report.files[agency] = [str(path)]
    return report
