"""Ingest: the contributor's own files from ``--source`` copied unchanged into ``assets/``, each under a
name it can keep (one sidecar and one upload-ready file per stem), unusable ones rejected with a reason.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from tasks.core.errors import BadInput, StageStopped
from tasks.core.files import atomic_file, disk_full, disk_of, name_max, sha256_file
from tasks.core.printable import printable
from tasks.core.records import ACCEPTED_EXTENSIONS, CLIP_EXTENSIONS, Asset, iter_asset_files, read_sidecar
from tasks.images.clip_probe import probe_clip
from tasks.images.inspect import IMAGE_EXTENSIONS, JPEG_FORMATS, inspect_image
from tasks.images.mpf import left_out

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What ingesting a folder did: new assets, files already there, files rejected (name → reason),
    files that are the same picture as an asset under another name, and files given another name."""

    added: list[Asset] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    #: source name -> why it is not a new asset: the same picture as one already there.
    duplicates: dict[str, str] = field(default_factory=dict)
    #: source name -> the asset's name, when the file's own name could not be the asset's (see asset_name).
    renamed: dict[str, str] = field(default_factory=dict)
    #: asset name -> what its upload-ready copy leaves out (the other images of a JPEG's MPF index).
    left_out: dict[str, str] = field(default_factory=dict)


def disk_full_stop(assets_dir: Path, exc: OSError, kept: int, left: int) -> str:
    """The one line a full disk stops adding assets with: the disk, what was kept, what the next run does."""
    disk = disk_of(assets_dir)
    return (f"disk full: {disk} has no room left for {assets_dir} ({exc.strerror or exc}); {kept} asset(s) added "
            f"and kept, {left} file(s) left for the next run — free space on {disk} and run again")


def shown(name: str) -> str:
    """A file name as it can be printed and kept in a report: control characters and bytes that are not
    UTF-8 as ``\\xNN`` (:func:`tasks.core.printable.printable`)."""
    return printable(name)


def stem_key(name: str) -> str:
    """What two asset names must not share: the stem, in NFC and case-folded (one sidecar ``<stem>.json``
    and one upload-ready ``<stem>.jpg`` per stem, on case-sensitive and case-insensitive disks alike)."""
    return unicodedata.normalize("NFC", Path(name).stem).casefold()


def _utf8(name: str) -> bool:
    """Is the name on disk UTF-8 (not bytes read as surrogate escapes)?"""
    try:
        os.fsencode(name).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _readable_name(name: str) -> str:
    """The name as text, NFC: bytes that are not UTF-8 read as CP1252 (old Windows tools), else Latin-1."""
    raw = os.fsencode(name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = raw.decode("cp1252")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
    return unicodedata.normalize("NFC", text)


def asset_name(name: str, digest: str, taken: dict[str, str], limit: int) -> str:
    """The name a source file gets in ``assets/``: its own, unless that cannot be.

    The rule (INTERFACE.md): the name in NFC, bytes that are not UTF-8 read as
    CP1252 or Latin-1; then ``<stem>_<first 8 hex of the SHA-256><ext>`` when the
    stem is taken (``taken``: stem_key → name, another case or extension
    included) or too long for the sidecar ``<stem>.json`` to fit the disk's
    ``limit`` (the stem is cut to fit).
    """
    text = _readable_name(name)
    stem, ext = os.path.splitext(text)
    room = limit - len(".json")
    if stem_key(text) not in taken and len(stem.encode("utf-8")) <= room:
        return text
    keep = stem.encode("utf-8")[:room - 9].decode("utf-8", errors="ignore")
    return f"{keep}_{digest[:8]}{ext}"


def _not_a_file(entry: os.DirEntry) -> str | None:
    """Why ``entry`` of the source folder is not a file to read (a link counts as what it points to)."""
    try:
        info = os.stat(entry.path)
    except OSError as exc:
        if entry.is_symlink():
            if exc.errno == errno.ELOOP:
                return "a symbolic link that loops (it never reaches a file)"
            return f"a symbolic link to nothing ({shown(os.readlink(entry.path))} does not exist)"
        return f"cannot be read ({exc.strerror or exc})"
    link = "a symbolic link to " if entry.is_symlink() else ""
    if stat.S_ISREG(info.st_mode):
        return None
    if stat.S_ISDIR(info.st_mode):
        return f"{link}a folder, not an image file (folders inside --source are not searched)"
    kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket or device"
    return f"{link}{kind}, not a regular file (not read)"


def ingest(source: Path, assets_dir: Path) -> IngestReport:
    """Copy the usable pictures (JPEG, PNG, TIFF, WebP, AVIF, HEIC: ``tasks.images.formats``) and MP4/MOV/AVI/MPEG
    clips (ones FFmpeg can read) of ``source`` into ``assets_dir``, unchanged.

    A file whose content is already an asset (under any name) is not copied
    again; one that was ingested under another name is named as a duplicate.
    A name is kept unless :func:`asset_name` must change it (said in
    ``renamed``). Unusable files, links to nothing, folders and special files
    with an image's extension are rejected with a reason; any unexpected error
    with one file rejects that file. None of them stops the others. A full
    disk stops them all: StageStopped ``disk_full`` (:func:`disk_full_stop`'s
    one line), the files copied so far kept as assets, the re-run copying
    only the rest.
    """
    report = IngestReport()
    existing = iter_asset_files(assets_dir) + iter_asset_files(assets_dir, CLIP_EXTENSIONS)
    known = {sha256_file(p): p.name for p in existing}
    taken = {stem_key(p.name): p.name for p in existing}
    limit = name_max(assets_dir)
    with os.scandir(source) as listing:
        entries = sorted(listing, key=lambda e: os.fsencode(e.name))
    for at, entry in enumerate(entries):
        name = entry.name
        if name.startswith("."):
            continue
        try:
            image_like = os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS | CLIP_EXTENSIONS
            why = _not_a_file(entry)
            if why is not None and (image_like or not entry.is_dir(follow_symlinks=False)):
                report.rejected[shown(name)] = why  # a plain sub-folder is not named: it is no file of the batch
            if why is not None or not image_like:
                continue
            _ingest_one(Path(entry.path), assets_dir, known, taken, limit, report)
        except Exception as exc:  # one file never stops the others; a full disk stops them all
            if disk_full(exc):  # the run stops here, as at pack: describing on a full disk loses paid answers
                raise StageStopped(disk_full_stop(assets_dir, exc, len(report.added), len(entries) - at),
                                   kind="disk_full") from None
            log.exception("ingesting %s failed", shown(name))
            report.rejected[shown(name)] = f"unexpected error ({type(exc).__name__}: {exc}); not ingested"
    return report


def _ingest_one(path: Path, assets_dir: Path, known: dict[str, str], taken: dict[str, str], limit: int,
                report: IngestReport) -> None:
    name = shown(path.name)
    try:
        clip = path.suffix.lower() in CLIP_EXTENSIONS
        if not clip and path.suffix.lower() not in ACCEPTED_EXTENSIONS:
            raise BadInput(name, f"unsupported file type {path.suffix} (JPEG, PNG, TIFF, WebP, AVIF and HEIC are "
                                 "accepted)")
        facts = None if clip else inspect_image(path)
        if clip:
            probe_clip(path)  # a clip FFmpeg cannot read is rejected here, naming the file and the reason
    except BadInput as exc:
        report.rejected[name] = exc.reason
        return
    digest = sha256_file(path)
    if digest in known:
        report.already.append(name)
        earlier = known[digest]
        if earlier != _readable_name(path.name) and digest[:8] not in earlier:
            what = "clip" if clip else "picture"
            report.duplicates[name] = f"the same {what} as {earlier}, already an asset; ingested once"
        return
    target_name = asset_name(path.name, digest, taken, limit)
    target = assets_dir / target_name
    if target.exists():
        target = assets_dir / asset_name(path.name, digest, {stem_key(target_name): target_name}, limit)
    with open(path, "rb") as src, atomic_file(target) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    if target.name != path.name:
        report.renamed[name] = target.name
    known[digest] = target.name
    taken[stem_key(target.name)] = target.name
    report.added.append(Asset(name=target.name, asset_id=digest, path=target))
    note = left_out(target) if facts is not None and facts.format in JPEG_FORMATS else None
    if note:
        report.left_out[target.name] = note


def settle_asset_names(assets_dir: Path) -> dict[str, str]:
    """Rename assets whose names cannot be asset names, from before names were kept apart: old name -> new.

    A name that is not UTF-8 gets its readable form (as ingest gives it).
    Assets sharing a stem (``twin.jpg`` and ``twin.png``, ``Sea.jpg`` and
    ``sea.jpg``): the one its sidecar names keeps its name (else the first by
    name); each other one gets ``<stem>_<hash 8><ext>`` and is its own asset from then on.
    """
    renamed: dict[str, str] = {}
    limit = name_max(assets_dir)
    for path in iter_asset_files(assets_dir):
        if not _utf8(path.name):
            taken = {stem_key(p.name): p.name for p in iter_asset_files(assets_dir)}
            new = assets_dir / asset_name(path.name, sha256_file(path), taken, limit)
            os.rename(path, new)
            renamed[shown(path.name)] = new.name
    groups: dict[str, list[Path]] = {}
    for path in iter_asset_files(assets_dir):
        groups.setdefault(stem_key(path.name), []).append(path)
    for paths in groups.values():
        if len(paths) < 2:
            continue
        described = {s.name for s in map(read_sidecar, {p.with_suffix(".json") for p in paths}) if s is not None}
        keeper = next((p for p in paths if p.name in described), paths[0])
        taken = {stem_key(p.name): p.name for p in iter_asset_files(assets_dir)}
        for path in paths:
            if path != keeper:
                new = assets_dir / asset_name(path.name, sha256_file(path), taken, limit)
                os.rename(path, new)
                taken[stem_key(new.name)] = new.name
                renamed[shown(path.name)] = new.name
    return renamed
