"""The pack manifest (``packs/manifest.json``): what each asset was packed from and into, so a re-run packs only
what changed, and where each upload-ready file goes (:func:`record_where`; the ``ledger`` commands answer from
it, :func:`tasks.stores.pending.read_where`); read through the defended path (a damaged file costs one line and
a re-pack, never a batch)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tasks.core.files import atomic_write_bytes, disk_full
from tasks.core.printable import printable
from tasks.core.reports import CsvReport, PackReport
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir
from tasks.stores.pending import EVERY_ASSET, AgencyWhere, Where

log = logging.getLogger(__name__)


def stamp(path: Path) -> list[int]:
    """What a packed file is, cheaply: its size and modification time in ns (as git tells a changed file), kept
    in the manifest when it is written."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def unchanged(path: Path, kept: object) -> bool:
    """Is ``path`` still the file the manifest's ``kept`` stamp describes? Not when it is gone, a folder, cut
    short or edited since (a bad byte written into it changes its time): then it is packed again."""
    try:
        return path.is_file() and stamp(path) == kept
    except OSError:
        return False


def manifest_path(wd: Workdir) -> Path:
    return wd.packs / "manifest.json"


class ManifestEntry(BaseModel):
    """What an asset's manifest entry must hold to be used (it holds more: the looks, ``upscaled_from``)."""

    key: str
    source: dict
    width: int
    height: int
    sizes: list[int] = Field(alias="bytes", min_length=3, max_length=3)


def parse_manifest(raw: bytes) -> dict:
    """The manifest of the file's bytes: an asset's entry of the wrong shape is dropped (that asset is packed
    again) and named; TypeError or ValueError when the file itself is damaged."""
    data = json.loads(raw)
    if not isinstance(data.get("assets"), dict):
        raise TypeError("no assets table")
    dropped = []
    for name, entry in list(data["assets"].items()):
        try:
            ManifestEntry.model_validate(entry)
        except ValidationError:
            dropped.append(printable(name))
            del data["assets"][name]
    if not isinstance(data.get("zip", {}), dict):
        del data["zip"]
    if "where" in data:
        try:
            Where.model_validate(data["where"])
        except ValidationError:
            log.warning("packs/manifest.json: where the packed files go is of the wrong shape: nothing counts as "
                        "pending until the next run records it again")
            del data["where"]
    if dropped:
        log.warning("packs/manifest.json: the entries of %s are of the wrong shape: packed again", ", ".join(dropped))
    return data


def load_manifest(wd: Workdir) -> dict:
    return read_file(manifest_path(wd), parse_manifest, "every asset is checked and packed again") or {"assets": {}}


def save_manifest(wd: Workdir, manifest: dict) -> None:
    atomic_write_bytes(manifest_path(wd), json.dumps(manifest, indent=1, sort_keys=True).encode())


def save_or_full(wd: Workdir, manifest: dict) -> OSError | None:
    """Save the manifest; the error when the disk is full (the manifest on disk stays the last whole one)."""
    try:
        save_manifest(wd, manifest)
    except OSError as exc:
        if not disk_full(exc):
            raise
        return exc
    return None


def record_where(wd: Workdir, manifest: dict, packed: PackReport, csvs: CsvReport) -> bool:
    """Record in ``manifest`` where the last run's files go: what ``csvs`` (the run's final CSVs) accepted per
    agency, what ``packed`` and ``csvs`` kept from each (the agencies ``csvs`` does not name keep what an earlier
    run recorded), and each packed asset's file; True when that changed what the manifest held."""
    before = manifest.get("where")
    where = Where.model_validate(before) if isinstance(before, dict) else Where()
    for agency, result in csvs.agencies.items():
        held = dict(packed.held_back.get(agency, {}))
        for problem in csvs.problems:
            if problem.agency == agency:
                held.setdefault(problem.asset or EVERY_ASSET, problem.message)
        where.agencies[agency] = AgencyWhere(accepted=sorted(result.accepted), held_back=dict(sorted(held.items())),
                                             not_taken=dict(sorted(packed.not_taken.get(agency, {}).items())))
    where.files = {name: (path.relative_to(wd.root).as_posix(), packed.asset_ids[name])
                   for name, path in sorted(packed.ready.items())}
    manifest["where"] = where.model_dump(mode="json")
    return manifest["where"] != before
