"""The pack stage's image part (:mod:`tasks.stages.kinds`) and the batch ZIP: per described image
(``tasks.images.ready`` does the pixels) ``packs/ready/<stem>.jpg`` with the title, description and keywords
embedded (``tasks.images.embed``), ``packs/previews/<stem>.jpg`` and ``packs/thumbs/<stem>.jpg``; then each
agency's image rules: an image that breaks one is held back for that agency only, with the rule. A file that
cannot be packed is rejected with one reason and never stops the others. Once the CSVs are final, the
deterministic ``packs/batch.zip`` (ready images, previews, CSVs) and ``reports/pack.json``.

Re-running is cheap: ``packs/manifest.json`` remembers, per asset, the key
its files were made from (source SHA-256, embedded metadata, settings,
format version); an asset whose key and files are unchanged is not packed
again, and the ZIP is rewritten only when an entry changed. Everything
written is a function of its inputs, so a resumed run makes the same bytes.

Memory stays flat: a small pool of workers each holds one image at a time;
previews are decoded at reduced scale (JPEG draft mode), and a JPEG that
needs no pixel change is never decoded at full size.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from tasks.agencies.catalog import Catalog, catalog
from tasks.agencies.embedded import EmbeddedFields, embedded_fields
from tasks.agencies.protected import ProtectedNames
from tasks.core.errors import BadInput, StageStopped
from tasks.core.files import atomic_write_bytes, cannot_write, disk_full, disk_of, exclusive_lock, sha256_file
from tasks.core.printable import printable
from tasks.core.records import Sidecar, Upscaled, ready_name, record_upscaled
from tasks.core.reports import CsvReport, PackReport
from tasks.core.settings import PackSettings
from tasks.core.workdir import Workdir
from tasks.images.batch_zip import write_zip
from tasks.images.embed import embed_metadata
from tasks.images.inspect import ImageRules, image_rules, too_small
from tasks.images.provenance import digital_source_type, provenance_of
from tasks.images.ready import preview_jpegs, ready_jpeg
from tasks.observe.progress import StageProgress
from tasks.stages.pack_manifest import load_manifest, record_where, save_manifest, save_or_full, stamp, unchanged
from tasks.stages.similarity import hold_back_similar, similarity_policies

#: Bump when the bytes written for the same inputs change; every asset is then packed again.
PACK_FORMAT = 3  # 2: the contributor's XMP and IPTC kept, EXIF ImageDescription in step; 3: no keyword copies
#: Images packed at once. Each worker holds one image; two fit the 300 MB budget (docs/BENCHMARKS.md).
DEFAULT_WORKERS = min(2, os.cpu_count() or 1)
#: exiv2 is not documented as thread-safe: one embed at a time (it takes milliseconds).
_EXIV2_LOCK = threading.Lock()

#: Held in ``packs/`` while a run packs or writes the ZIP: two runs on one workdir never pack an asset twice.
PACK_LOCK = ".pack.lock"

#: Save the manifest after this many assets, so an interrupted run resumes cheaply.
_SAVE_EVERY = 16


def _return_freed_images_to_the_os() -> None:
    """Make glibc give every freed buffer of 1 MiB or more back to the OS at once.

    Pillow allocates image memory in 16 MB blocks. glibc's default raises its
    mmap threshold after the first such block is freed, so later blocks come
    from per-thread heaps that fragment and never shrink: with two workers
    re-encoding 24 MP images, peak RSS crept from 330 to 480 MB over 40
    images; with a fixed 1 MiB threshold it stays flat (docs/BENCHMARKS.md).
    Process-wide and idempotent; a no-op where the C library has no mallopt.
    """
    try:
        ctypes.CDLL(None).mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD = -3
    except (OSError, AttributeError):
        pass


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackedFiles:
    """Where one asset's three files live."""

    ready: Path
    preview: Path
    thumb: Path

    @classmethod
    def of(cls, wd: Workdir, asset_name: str) -> "PackedFiles":
        name = ready_name(asset_name)
        return cls(wd.packs / "ready" / name, wd.packs / "previews" / name, wd.packs / "thumbs" / name)

    def all(self) -> tuple[Path, Path, Path]:
        return self.ready, self.preview, self.thumb


# --- one asset ---------------------------------------------------------------------------


def _pack_key(source_sha: str, fields: EmbeddedFields, settings: PackSettings, source_type: str | None,
              upscale_to: int) -> str:
    """What an asset's packed files are a function of."""
    basis = {"format": PACK_FORMAT, "source": source_sha, "embedded": fields.model_dump(mode="json"),
             "settings": settings.model_dump(mode="json", exclude={"similar_max_distance", "label_own_files_ai",
                                                                   "upscale_to_minimum"})}
    # Each only when set, so the keys of assets packed before they existed stay as they were.
    if source_type:
        basis["digital_source_type"] = source_type
    if upscale_to:
        basis["upscale_to"] = upscale_to
    return hashlib.sha256(json.dumps(basis, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _source_sha(src: Path, previous: dict | None) -> tuple[str, dict]:
    """The source's SHA-256, reusing the manifest's when size and mtime are unchanged (as git does)."""
    try:
        st = src.stat()
    except OSError as exc:
        raise BadInput(src.name, f"cannot read file ({exc.strerror})") from exc
    seen = (previous or {}).get("source", {})
    if seen.get("size") == st.st_size and seen.get("mtime_ns") == st.st_mtime_ns and seen.get("sha256"):
        sha = seen["sha256"]
    else:
        sha = sha256_file(src)
    return sha, {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}


def _current(previous: dict | None, key: str, files: PackedFiles) -> bool:
    if not previous or previous.get("key") != key:
        return False
    stamps = previous.get("stamps", [])  # an entry from before stamps were kept: packed again once
    return len(stamps) == 3 and all(unchanged(p, kept) for p, kept in zip(files.all(), stamps, strict=True))


def pack_asset(src: Path, files: PackedFiles, fields: EmbeddedFields, settings: PackSettings,
               previous: dict | None = None, *, min_pixels: int = 0, source_type: str | None = None,
               upscale_to: int = 0, names: ProtectedNames | None = None) -> tuple[dict, bool]:
    """Write one asset's ready JPEG, preview and thumbnail, unless ``previous`` shows them current.

    Returns the asset's manifest entry and whether anything was written.
    Raises BadInput naming the file when it cannot be packed, or when it has
    fewer than ``min_pixels`` (no agency would take it), or when writing ``fields`` would make a title or
    description name one of ``names`` (:func:`tasks.images.embed.embed_metadata`'s last guard).
    """
    sha, source = _source_sha(src, previous)
    key = _pack_key(sha, fields, settings, source_type, upscale_to)
    if _current(previous, key, files):  # PACK_FORMAT is in the key: a current entry has every hash
        return {**previous, "source": source}, False
    # Previews first: the reduced-scale decode still reads every byte, so a
    # file truncated since ingest fails here, before the full-size work.
    preview, thumb, image_looks = preview_jpegs(src, settings.preview_px, settings.thumbnail_px)
    ready = ready_jpeg(src, settings, upscale_to)
    if ready.width * ready.height < min_pixels:
        raise too_small(src.name, ready.width, ready.height, min_pixels)
    with _EXIV2_LOCK:
        data = embed_metadata(ready.jpeg, fields.title, fields.description, fields.keywords, name=src.name,
                              digital_source_type=source_type, names=names)
    for path, content in zip(files.all(), (data, preview, thumb), strict=True):
        atomic_write_bytes(path, content)
    entry = {"key": key, "source": source, "width": ready.width, "height": ready.height,
             "bytes": [len(data), len(preview), len(thumb)], "stamps": [stamp(p) for p in files.all()],
             **image_looks.as_manifest()}
    if ready.upscaled_from:
        entry["upscaled_from"] = list(ready.upscaled_from)
    return entry, True


def held_back_for(entry: dict, rules: list[ImageRules], upscaled_for: set[str]) -> dict[str, str]:
    """agency -> the rule the packed image breaks there (agencies it passes are absent).

    The upload-ready copy is one file for every agency: when it was enlarged,
    an agency not in ``upscaled_for`` is judged by the original size and never
    gets the enlarged copy.
    """
    out = {}
    for r in rules:
        broken = r.broken_rule(entry["width"], entry["height"], entry["bytes"][0])
        if not broken and "upscaled_from" in entry and r.agency not in upscaled_for:
            w, h = entry["upscaled_from"]
            broken = (r.broken_rule(w, h, entry["bytes"][0]) or f"{w}×{h} passes {r.agency}'s rules") + (
                f"; the upload-ready copy was enlarged for {', '.join(sorted(upscaled_for))}, and "
                f"pack.upscale_to_minimum does not name {r.agency}")
        if broken:
            out[r.agency] = broken
    return out


# --- the batch ---------------------------------------------------------------------------


def _pack_stopped(wd: Workdir, exc: OSError, *, kept: int, recorded: bool, left: int) -> StageStopped:
    """The one line a full disk stops packing with: the disk, what was kept, what the next run does."""
    disk = disk_of(wd.packs)
    kept_where = "kept in packs/manifest.json" if recorded else "on disk, but packs/manifest.json could not be saved"
    return StageStopped(f"disk full: {disk} has no room left for {wd.packs} ({exc.strerror or exc}); pack stopped "
                        f"with {kept} asset(s) packed ({kept_where}) and {left} left for the next run — free space "
                        f"on {disk} and run again", kind="disk_full")


def _packing(wd: Workdir) -> AbstractContextManager[None]:
    """``packs/.pack.lock``, held while a run packs or writes the ZIP (both rewrite ``packs/manifest.json``); a
    second run says so and waits for it."""
    return exclusive_lock(wd.packs / PACK_LOCK, "packing", waiting=lambda: log.warning(
        "another run is packing %s: waiting for it, then packing what it left", wd.packs))


def _remove_outputs(wd: Workdir, asset_name: str) -> None:
    for p in PackedFiles.of(wd, asset_name).all():
        p.unlink(missing_ok=True)


def pack_assets(wd: Workdir, settings: PackSettings, sidecars: list[Sidecar], agencies: list[str] | None = None,
                *, rules: dict[str, ImageRules] | None = None, workers: int = DEFAULT_WORKERS,
                names: ProtectedNames | None = None, known: Catalog | None = None) -> PackReport:
    """Pack every described asset (``workers`` at a time) and check the image rules of ``agencies``.

    ``rules`` maps every agency to its image rules (default: from the spec
    files; tests pass small ones). An image below every agency's minimum is
    rejected; one that breaks a rule of some agencies is held back for those.
    ``names``: the run's protected names, whose keywords the embedded XMP/IPTC
    never carries (as the CSVs). ``known``: the run's agencies (its context's catalog; default: the workdir's,
    read now). Never raises for one file: a file that cannot be packed is rejected with
    its reason, its old packed files are removed, and the rest go on. A full
    disk stops the stage (StageStopped ``disk_full``, one line naming the disk
    and what was kept): no file is rejected for it, what was packed is kept in
    the manifest, and the next run packs only the rest.

    One run at a time packs a workdir (``packs/.pack.lock``): a second run says so and waits, then finds the
    first one's files current in the manifest and packs only what is left.
    """
    with _packing(wd):
        return _pack_what_is_left(wd, settings, sidecars, agencies, rules, workers, names, known or catalog(wd))


def _pack_what_is_left(wd: Workdir, settings: PackSettings, sidecars: list[Sidecar], agencies: list[str] | None,
                       rules: dict[str, ImageRules] | None, workers: int, names: ProtectedNames | None,
                       known: Catalog) -> PackReport:
    _return_freed_images_to_the_os()
    rules = rules if rules is not None else {a: image_rules(a, wd, known) for a in known.names}
    checked = [rules[a] for a in (rules if agencies is None else agencies)]
    min_pixels = min(r.min_pixels for r in rules.values())
    upscaled_for = {r.agency for r in checked if settings.upscales(r.agency)}
    upscale_to = max((r.min_pixels for r in checked if r.agency in upscaled_for), default=0)
    specs = list(known.specs.values())  # one file goes to every agency: the strictest text limits apply
    manifest = load_manifest(wd)
    entries: dict = manifest["assets"]
    report = PackReport()
    wanted = {s.name for s in sidecars}
    for stale in sorted(set(entries) - wanted):  # assets gone from the batch leave no files behind
        _remove_outputs(wd, stale)
        del entries[stale]

    def one(s: Sidecar) -> tuple[dict, bool]:
        src = wd.assets / s.name
        source_type = digital_source_type(s.provenance or provenance_of(src), settings.label_own_files_ai)
        return pack_asset(src, PackedFiles.of(wd, s.name), embedded_fields(s.metadata, specs, names),
                          settings, entries.get(s.name), min_pixels=min_pixels, source_type=source_type,
                          upscale_to=upscale_to, names=names)

    full: OSError | None = None  # the disk filled up: no further asset is started

    def stop_for(exc: OSError) -> None:
        nonlocal full
        full = full or exc
        for pending in futures:
            pending.cancel()

    with StageProgress("pack", len(sidecars)) as progress, ThreadPoolExecutor(max(1, workers)) as pool:
        futures = {pool.submit(one, s): s.name for s in sidecars}
        futures_sidecar = {s.name: s for s in sidecars}
        for future in as_completed(futures):
            name = futures[future]
            try:
                entry, written = future.result()
            except CancelledError:  # never started: the disk is full, it waits for the next run
                continue
            except BadInput as exc:
                report.rejected[name] = exc.reason
            except Exception as exc:  # never contagious: an unforeseen failure rejects this file only
                if disk_full(exc):  # not this file's fault: its partial files go, the next run packs it
                    stop_for(exc)
                    _remove_outputs(wd, name)
                    continue
                log.exception("packing %s failed unexpectedly", printable(name))
                report.rejected[name] = f"could not be packed ({type(exc).__name__}: {exc})"
            else:
                entries[name] = entry
                files = PackedFiles.of(wd, name)
                report.ready[name], report.previews[name], report.thumbnails[name] = files.all()
                report.asset_ids[name] = entry["source"]["sha256"]
                (report.packed_now if written else report.reused).append(name)
                upscaled = None
                if "upscaled_from" in entry:
                    w, h = entry["upscaled_from"]
                    report.upscaled[name] = f"{w}×{h} → {entry['width']}×{entry['height']}" + (
                        f" for {', '.join(sorted(upscaled_for))}"
                        if isinstance(settings.upscale_to_minimum, list) else "")
                    upscaled = Upscaled(from_size=(w, h), to_size=(entry["width"], entry["height"]),
                                        agencies=sorted(upscaled_for))
                if futures_sidecar[name].upscaled != upscaled:  # the sidecar says it too
                    try:
                        record_upscaled(wd.sidecar(name), upscaled)
                    except OSError as exc:  # written whole or not at all: the next run writes it
                        if not disk_full(exc):
                            raise
                        stop_for(exc)
                for agency, rule in held_back_for(entry, checked, upscaled_for).items():
                    report.held_back.setdefault(agency, {})[name] = rule
            if name in report.rejected:
                _remove_outputs(wd, name)
                entries.pop(name, None)
            progress.advance()
            if progress.done % _SAVE_EVERY == 0 and full is None and (unsaved := save_or_full(wd, manifest)):
                stop_for(unsaved)
    unsaved = save_or_full(wd, manifest)  # after a full disk too: what was packed is kept
    if full or unsaved:
        raise _pack_stopped(wd, full or unsaved, kept=len(report.ready), recorded=unsaved is None,
                            left=len(sidecars) - len(report.ready) - len(report.rejected))
    try:
        hold_back_similar(wd, report, entries, {s.name: s for s in sidecars}, checked, settings.similar_max_distance,
                          similarity_policies(known, [r.agency for r in checked]))
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise _pack_stopped(wd, exc, kept=len(report.ready), recorded=True, left=0) from None
    # Workers finish in any order; the report does not show it.
    report.ready = dict(sorted(report.ready.items()))
    report.rejected = dict(sorted(report.rejected.items()))
    report.held_back = {a: dict(sorted(held.items())) for a, held in sorted(report.held_back.items())}
    report.packed_now.sort()
    report.reused.sort()
    return report


def write_batch_zip(wd: Workdir, report: PackReport, csvs: CsvReport) -> Path:
    """``packs/batch.zip`` (the packed images and previews ``csvs`` accepted somewhere, the CSVs; rewritten only when
    changed) and where each file goes (:func:`~tasks.stages.pack_manifest.record_where`), under the pack lock."""
    with _packing(wd):
        return _write_zip_if_changed(wd, report, csvs)


def _write_zip_if_changed(wd: Workdir, report: PackReport, csvs: CsvReport) -> Path:
    manifest = load_manifest(wd)
    moved = record_where(wd, manifest, report, csvs)
    entries: dict[str, Path] = {}
    identity, accepted = {}, csvs.accepted_somewhere()
    for name in report.ready:
        if name not in accepted or name not in manifest["assets"]:  # a clip is sent as it is: not packed, not zipped
            continue
        files = PackedFiles.of(wd, name)
        key = manifest["assets"][name]["key"]
        for folder, path in (("ready", files.ready), ("previews", files.preview)):
            entries[f"{folder}/{path.name}"] = path
            identity[f"{folder}/{path.name}"] = key
    for path in sorted(wd.csv.glob("*.csv")):
        entries[f"csv/{path.name}"] = path
        identity[f"csv/{path.name}"] = sha256_file(path)
    target = wd.packs / "batch.zip"
    key = hashlib.sha256(json.dumps([PACK_FORMAT, sorted(identity.items())]).encode()).hexdigest()
    done = manifest.get("zip", {})
    if not (done.get("key") == key and unchanged(target, done.get("stamp"))):
        write_zip(target, entries)
        manifest["zip"] = {"key": key, "stamp": stamp(target)}
        moved = True
    if moved:
        save_manifest(wd, manifest)
    return target


def finish_batch(wd: Workdir, report: PackReport, csvs: CsvReport) -> PackReport:
    """Log each rejected and held-back asset, write the batch ZIP and where each file goes by ``csvs`` (the final
    CSVs: :func:`write_batch_zip`) and ``reports/pack.json``; returns ``report`` with ``zip_path`` set. A full disk:
    StageStopped ``disk_full`` (each written whole or not at all; the packed files kept); another cause (a
    read-only folder): StageStopped ``unwritable`` naming the file."""
    log.info("%d packed now, %d already current from an earlier run", len(report.packed_now), len(report.reused))
    for name, reason in report.rejected.items():
        log.warning("rejected %s: %s", printable(name), printable(reason))
    for agency, held in report.held_back.items():
        for name, rule in held.items():
            log.warning("held back from %s: %s: %s", agency, printable(name), rule)
    writing = wd.packs / "batch.zip"
    try:
        report.zip_path = write_batch_zip(wd, report, csvs)
        writing = wd.reports / "pack.json"
        atomic_write_bytes(writing, json.dumps(report.as_json(), indent=2, ensure_ascii=False).encode("utf-8"))
    except OSError as exc:
        if not disk_full(exc):
            raise cannot_write(writing, exc, f"the {len(report.ready)} packed asset(s) are kept, nothing "
                                             "uploaded") from None
        disk = disk_of(wd.packs)
        raise StageStopped(f"disk full: {disk} has no room left for {wd.packs / 'batch.zip'} ({exc.strerror or exc});"
                           f" the {len(report.ready)} packed asset(s) are kept, the ZIP and reports/pack.json not "
                           f"written — free space on {disk} and run again", kind="disk_full") from None
    return report
