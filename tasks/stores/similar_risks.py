"""What the similarity check found, per agency and asset, and the contributor's releases of held-back assets.

Three files in the workdir (docs/INTERFACE.md):

* ``reports/similarity.json`` — written by the pack stage each run:
  ``{"agencies": {agency: {asset name: Risk as JSON}}}``, for people and for ``microstock similar`` (the run's
  own review form, ``batch-assets`` and summary take the risks from the pack report in hand).
* ``reports/distinct.json`` — what ``microstock similar distinct`` changed:
  ``{asset name: {"before": {title, keywords}, "after": {title, keywords}, "by"}}``
  (the first ten keywords), shown in the review form; read, added to and
  rewritten under ``reports/.distinct.lock``.
* ``similar_released.json`` — the releases, kept across runs:
  ``{"released": [{"agency", "asset", "sha256", "at"}]}``. A released asset is
  sent to that agency however alike it is; the release is for its content
  (``sha256``), so a changed image is checked again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from tasks.core.files import atomic_write_bytes, exclusive_lock
from tasks.core.reports import Risk
from tasks.core.state_files import read_file, what_is_wrong
from tasks.core.workdir import Workdir

log = logging.getLogger(__name__)


def _risks_path(wd: Workdir) -> Path:
    return wd.reports / "similarity.json"


class RisksFile(BaseModel):
    """``reports/similarity.json``: written and read by this schema (a wrong type is damage, never a crash)."""

    agencies: dict[str, dict[str, Risk]]


def write_risks(wd: Workdir, risks: dict[str, dict[str, Risk]]) -> None:
    data = {"agencies": {a: {n: asdict(r) for n, r in sorted(per.items())} for a, per in sorted(risks.items())}}
    atomic_write_bytes(_risks_path(wd), RisksFile.model_validate(data).model_dump_json(indent=1).encode("utf-8"))


def read_risks(wd: Workdir) -> dict[str, dict[str, Risk]]:
    """agency -> asset name -> its risk, as the last pack stage found them ({} when none was written; a
    damaged report is set aside, and the next pack writes it again)."""
    found = read_file(_risks_path(wd), RisksFile.model_validate_json,
                      "no similarity report until the next pack writes it again")
    return found.agencies if found is not None else {}


def _releases_path(wd: Workdir) -> Path:
    return wd.root / "similar_released.json"


class Release(BaseModel):
    """One release in ``similar_released.json``: ``asset`` (content ``sha256``) may go to ``agency``."""

    agency: str
    sha256: str
    asset: str = ""
    at: str = ""


def _releases(raw: bytes, path: Path) -> list[Release]:
    """The releases of the file's bytes; a release of the wrong shape is skipped and named (ValueError when the
    file itself is damaged)."""
    entries = json.loads(raw)["released"]
    if not isinstance(entries, list):
        raise TypeError(f"released is a {type(entries).__name__}, not a list")
    kept, skipped = [], []
    for n, entry in enumerate(entries, 1):
        try:
            kept.append(Release.model_validate(entry))
        except ValidationError as exc:
            skipped.append(f"{n} ({what_is_wrong(exc)})")
    if skipped:
        log.warning("%s: release %s skipped (of the wrong shape): release it again with "
                    "`microstock similar release`", path, "; ".join(skipped))
    return kept


def _release_lines(wd: Workdir) -> list[Release]:
    path = _releases_path(wd)
    return read_file(path, lambda raw: _releases(raw, path), "nothing counts as released: release the assets "
                     "again with `microstock similar release` (the file set aside says which)") or []


def released(wd: Workdir) -> set[tuple[str, str]]:
    """(agency, sha256) of every release the contributor made."""
    return {(r.agency, r.sha256) for r in _release_lines(wd)}


def record_release(wd: Workdir, agency: str, asset: str, sha256: str, now: datetime | None = None) -> bool:
    """Keep the contributor's release of ``asset`` (content ``sha256``) for ``agency``; False if already kept.

    Read, added to and rewritten under ``.similar_released.lock``: releases made at once by several
    processes are all kept."""
    with exclusive_lock(wd.root / ".similar_released.lock", "the releases"):
        lines = _release_lines(wd)
        if any(r.agency == agency and r.sha256 == sha256 for r in lines):
            return False
        lines.append(Release(agency=agency, asset=asset, sha256=sha256,
                             at=(now or datetime.now(UTC)).isoformat(timespec="seconds")))
        data = {"released": [r.model_dump() for r in lines]}
        atomic_write_bytes(_releases_path(wd), json.dumps(data, indent=1).encode("utf-8"))
    return True


class Words(BaseModel):
    """A title and the first keywords, before or after ``similar distinct``."""

    title: str
    keywords: list[str]


class DistinctChange(BaseModel):
    """One asset's entry in ``reports/distinct.json``."""

    before: Words
    after: Words
    by: str = ""


class DistinctFile(BaseModel):
    changes: dict[str, DistinctChange]


def _distinct(raw: bytes) -> dict[str, dict]:
    return {n: c.model_dump() for n, c in DistinctFile.model_validate({"changes": json.loads(raw)}).changes.items()}


def read_distinct(wd: Workdir) -> dict[str, dict]:
    """asset name -> ``{"before", "after", "by"}`` of each title and keyword change made to set it apart (a
    damaged file is set aside: the review form shows no before and after)."""
    return read_file(_distinct_path(wd), _distinct,
                     "the review form shows no before and after of `similar distinct`") or {}


def _distinct_path(wd: Workdir) -> Path:
    return wd.reports / "distinct.json"


def record_distinct(wd: Workdir, changes: dict[str, dict]) -> None:
    """Keep the before and after of each asset ``similar distinct`` set apart (name -> ``{before, after, by}``).

    Read again, added to and rewritten under ``reports/.distinct.lock``: two ``similar distinct`` at once (of
    other assets) both keep theirs; an asset set apart again keeps its latest change."""
    with exclusive_lock(wd.reports / ".distinct.lock", "the changes of `similar distinct`"):
        kept = read_distinct(wd)
        kept.update(changes)
        atomic_write_bytes(_distinct_path(wd), json.dumps(kept, indent=1, ensure_ascii=False).encode("utf-8"))
