"""What the similarity check found, per agency and asset, and the contributor's releases of held-back assets.

Three files in the workdir (docs/INTERFACE.md):

* ``reports/similarity.json`` — written by the pack stage each run:
  ``{"agencies": {agency: {asset name: Risk as JSON}}}``; the review form,
  ``batch-assets`` and the terminal summary read it.
* ``reports/distinct.json`` — what ``microstock similar distinct`` changed:
  ``{asset name: {"before": {title, keywords}, "after": {title, keywords}, "by"}}``
  (the first ten keywords), shown in the review form.
* ``similar_released.json`` — the releases, kept across runs:
  ``{"released": [{"agency", "asset", "sha256", "at"}]}``. A released asset is
  sent to that agency however alike it is; the release is for its content
  (``sha256``), so a changed image is checked again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from tasks.core.files import atomic_write_bytes, exclusive_lock
from tasks.core.workdir import Workdir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Risk:
    """One asset at one agency: how alike its nearest other asset is, and what was done about it."""

    score: float
    #: The closest other asset (of this batch, or uploaded there before), "" when none was found.
    nearest: str = ""
    nearest_sha256: str = ""
    #: The closest asset is already uploaded to this agency (else it is in this batch).
    nearest_uploaded: bool = False
    #: The signals behind the score ("colour 0.95, title 1.00").
    why: str = ""
    #: Versions in the asset's group (itself included): 1 when nothing scores above the threshold.
    versions: int = 1
    #: The group's first asset by name (names the motif).
    motif: str = ""
    #: ``held back``, ``released`` (held back but released by the contributor), ``warned`` (above the
    #: threshold, the agency's policy is to warn), or "" (below the threshold).
    outcome: str = ""
    threshold: float = 0.0

    @property
    def risky(self) -> bool:
        return self.score >= self.threshold > 0


def _risks_path(wd: Workdir) -> Path:
    return wd.reports / "similarity.json"


def write_risks(wd: Workdir, risks: dict[str, dict[str, Risk]]) -> None:
    data = {"agencies": {a: {n: asdict(r) for n, r in sorted(per.items())} for a, per in sorted(risks.items())}}
    atomic_write_bytes(_risks_path(wd), json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8"))


def read_risks(wd: Workdir) -> dict[str, dict[str, Risk]]:
    """agency -> asset name -> its risk, as the last pack stage found them ({} when none was written)."""
    try:
        data = json.loads(_risks_path(wd).read_text(encoding="utf-8"))
        return {a: {n: Risk(**r) for n, r in per.items()} for a, per in data["agencies"].items()}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s not read: %s", _risks_path(wd).name, exc)
        return {}


def _releases_path(wd: Workdir) -> Path:
    return wd.root / "similar_released.json"


def _release_lines(wd: Workdir) -> list[dict]:
    try:
        lines = json.loads(_releases_path(wd).read_text(encoding="utf-8"))["released"]
        return [d for d in lines if isinstance(d, dict) and {"agency", "sha256"} <= d.keys()]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s not read (nothing counts as released): %s", _releases_path(wd).name, exc)
        return []


def released(wd: Workdir) -> set[tuple[str, str]]:
    """(agency, sha256) of every release the contributor made."""
    return {(d["agency"], d["sha256"]) for d in _release_lines(wd)}


def record_release(wd: Workdir, agency: str, asset: str, sha256: str, now: datetime | None = None) -> bool:
    """Keep the contributor's release of ``asset`` (content ``sha256``) for ``agency``; False if already kept.

    Read, added to and rewritten under ``.similar_released.lock``: releases made at once by several
    processes are all kept."""
    with exclusive_lock(wd.root / ".similar_released.lock", "the releases"):
        lines = _release_lines(wd)
        if any(d["agency"] == agency and d["sha256"] == sha256 for d in lines):
            return False
        lines.append({"agency": agency, "asset": asset, "sha256": sha256,
                      "at": (now or datetime.now(UTC)).isoformat(timespec="seconds")})
        atomic_write_bytes(_releases_path(wd), json.dumps({"released": lines}, indent=1).encode("utf-8"))
    return True


def read_distinct(wd: Workdir) -> dict[str, dict]:
    """asset name -> ``{"before", "after", "by"}`` of each title and keyword change made to set it apart."""
    try:
        data = json.loads((wd.reports / "distinct.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        log.warning("distinct.json not read: %s", exc)
        return {}
