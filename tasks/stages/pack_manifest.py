"""The pack manifest (``packs/manifest.json``): what each asset was packed from and into, so a re-run packs only
what changed; read through the defended path (a damaged file costs one line and a re-pack, never a batch)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tasks.core.files import atomic_write_bytes, disk_full
from tasks.core.printable import printable
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir

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
