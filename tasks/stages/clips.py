"""The batch's video clips after ingest: probed, a poster and thumbnail each, and per agency taken or held back.

A clip is an asset like an image (``asset_id`` = SHA-256 of the file, in ``assets/``), but it takes its own
path: checked here in the assets stage (:func:`clips_stage`), then described in the describe stage with the
images (:func:`clip_assets`: Gemini from the clip itself, else the offline describer from its tags and name),
then checked for similar content once its title and keywords are known (:func:`similar_clips_stage`); it is not
packed into an upload-ready JPEG and not put in the batch ZIP; it is uploaded as it is, where its CSV row is.

Each agency's ``[video]`` rules (:mod:`tasks.agencies.video`) say whether it is taken; a clip breaking one is
held back for that agency with the rule and its value, as an image breaking an image rule is
(``PackReport.held_back``'s shape: agency → clip → rule). An agency without confirmed video rules gets no clip,
nor one whose way of taking clips is not confirmed (:meth:`VideoRules.not_sent` names what is missing).
Everything is written to ``reports/clips.json`` each run; the poster and thumbnail to
``packs/clips/<stem>.poster.jpg`` and ``<stem>.thumb.jpg`` (made once, kept).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tasks.agencies.catalog import catalog
from tasks.core.errors import BadInput
from tasks.core.files import atomic_write_bytes, cannot_write, sha256_file
from tasks.core.records import (
    CLIP_EXTENSIONS,
    Asset,
    iter_asset_files,
    read_sidecar,
)
from tasks.core.workdir import Workdir
from tasks.images.clip_poster import poster_jpegs, poster_paths
from tasks.images.clip_probe import ClipFacts, probe_clip
from tasks.images.clip_signature import ClipSignature, clip_signature
from tasks.images.likeness import Signature
from tasks.stages.run_context import RunContext
from tasks.stages.similarity import hold_back_similar_clips
from tasks.stores.pending import taken_clips

log = logging.getLogger(__name__)

FILE_NAME = "clips.json"


@dataclass
class ClipsReport:
    """What the clips of the workdir are, and where each may go."""

    facts: dict[str, ClipFacts] = field(default_factory=dict)
    asset_ids: dict[str, str] = field(default_factory=dict)
    #: agency -> clips taken there (every rule of its ``[video]`` table met)
    taken: dict[str, list[str]] = field(default_factory=dict)
    #: agency -> clip -> the rule it breaks there (held back for that agency only)
    held_back: dict[str, dict[str, str]] = field(default_factory=dict)
    #: clip -> why nothing is done with it (it cannot be read any more)
    rejected: dict[str, str] = field(default_factory=dict)
    #: clip -> its similarity signature (kept in ``packs/clips/<stem>.signature.json``; not in the report)
    signatures: dict[str, ClipSignature] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"clips": [{"file": name, "asset_id": self.asset_ids[name], **asdict(facts),
                           "taken_by": sorted(a for a, names in self.taken.items() if name in names),
                           "held_back": {a: held[name] for a, held in sorted(self.held_back.items()) if name in held}}
                          for name, facts in sorted(self.facts.items())],
                "rejected": dict(sorted(self.rejected.items()))}


def check_clips(wd: Workdir, agencies: list[str], poster_px: int, thumbnail_px: int) -> ClipsReport:
    """Probe every clip in ``assets/``, make its poster once, and check it against each agency's video rules."""
    report = ClipsReport()
    specs = catalog(wd)
    for path in iter_asset_files(wd.assets, CLIP_EXTENSIONS):
        try:
            facts = probe_clip(path)
            poster, thumb = poster_paths(wd, path.name)
            if not (poster.exists() and thumb.exists()):
                made = poster_jpegs(path, poster_px, thumbnail_px)
                atomic_write_bytes(poster, made.poster)
                atomic_write_bytes(thumb, made.thumb)
            asset_id = sha256_file(path)
            signature = _kept_signature(wd, path, asset_id)
        except BadInput as exc:
            report.rejected[path.name] = exc.reason
            continue
        except Exception as exc:  # one clip never stops the others, nor the images
            log.exception("checking clip %s failed", path.name)
            report.rejected[path.name] = f"unexpected error ({type(exc).__name__}: {exc}); not sent"
            continue
        report.facts[path.name] = facts
        report.asset_ids[path.name], report.signatures[path.name] = asset_id, signature
        for agency in agencies:
            spec = specs.spec(agency)
            broken = spec.video.broken_by(
                container=facts.container, size=facts.bytes, seconds=facts.duration_s, width=facts.width,
                height=facts.height, fps=facts.frame_rate, codec=facts.codec)
            if broken is None:
                broken = spec.video.not_sent(spec.display_name)
            if broken is None:
                report.taken.setdefault(agency, []).append(path.name)
            else:
                report.held_back.setdefault(agency, {})[path.name] = broken
    _write_report(wd, report)
    return report


def _write_report(wd: Workdir, report: ClipsReport) -> None:
    """``reports/clips.json``; StageStopped when it cannot be written: the CSV and upload stages take the clips
    it names, so an older one must not stand for this run's check."""
    path = wd.reports / FILE_NAME
    try:
        atomic_write_bytes(path, json.dumps(report.as_json(), indent=2, ensure_ascii=False).encode())
    except OSError as exc:
        raise cannot_write(path, exc, "the clips are checked again by the next run, nothing uploaded") from None


def _signature_file(wd: Workdir, path: Path) -> Path:
    return poster_paths(wd, path.name)[0].with_name(f"{path.stem}.signature.json")


def _read_signature(wd: Workdir, path: Path, asset_id: str) -> ClipSignature | None:
    """The clip's kept signature when it is of this content and can be read, else None."""
    try:
        data = json.loads(_signature_file(wd, path).read_text(encoding="utf-8"))
        return ClipSignature.from_json(data) if data.get("asset_id") == asset_id else None
    except (OSError, ValueError, AttributeError):
        return None


def _kept_signature(wd: Workdir, path: Path, asset_id: str) -> ClipSignature:
    """The clip's similarity signature, made once and kept next to its poster (made again when the clip's
    content changed or the kept file cannot be read)."""
    signature = _read_signature(wd, path, asset_id)
    if signature is None:
        signature = clip_signature(path)
        kept = json.dumps({"asset_id": asset_id, **signature.as_json()})
        atomic_write_bytes(_signature_file(wd, path), kept.encode())
    return signature


def similar_clips(wd: Workdir, report: ClipsReport, agencies: list[str], same_motif_bits: int) -> None:
    """The similarity check of the clips (with each other and the clips uploaded before; their titles and
    keywords from their sidecars): a clip it holds back leaves ``report.taken`` there; the report written again."""
    batch = []
    for name, sig in sorted(report.signatures.items()):
        sidecar = read_sidecar(wd.sidecar(name))
        md = sidecar.metadata if sidecar is not None and sidecar.name == name else None
        batch.append(Signature(name, report.asset_ids[name], sig.frames[len(sig.frames) // 2],
                               md.title if md else "", tuple(md.keywords) if md else (), sig.frames, sig.digest))
    hold_back_similar_clips(wd, batch, agencies, report.held_back, same_motif_bits,
                            lambda name: poster_paths(wd, name)[1])
    for agency, held in report.held_back.items():
        if agency in report.taken:
            report.taken[agency] = [n for n in report.taken[agency] if n not in held]
    _write_report(wd, report)


def clip_assets(wd: Workdir) -> list[Asset]:
    """The clips the last check (``reports/clips.json``) read, still in ``assets/``, as assets of the describe
    stage (described whether or not an agency takes them now, as images held back are: a held-back clip can be
    released, ``microstock similar release``, and then needs its row)."""
    return [Asset(name=name, asset_id=item.sha256, path=item.path) for name, item, _ in taken_clips(wd)]


def read_clips_report(wd: Workdir) -> ClipsReport:
    """The last check's report (``reports/clips.json``) with each clip's kept signature; the clips no longer in
    ``assets/`` and those without a kept signature left out. Empty when the report is missing or damaged."""
    report = ClipsReport()
    try:
        data = json.loads((wd.reports / FILE_NAME).read_text(encoding="utf-8"))
        names = [f.name for f in fields(ClipFacts)]
        for entry in data["clips"]:
            name = entry["file"]
            signature = _read_signature(wd, wd.assets / name, entry["asset_id"])
            if signature is None or not (wd.assets / name).is_file():
                continue
            report.facts[name] = ClipFacts(**{k: entry[k] for k in names})
            report.asset_ids[name], report.signatures[name] = entry["asset_id"], signature
            for agency in entry["taken_by"]:
                report.taken.setdefault(agency, []).append(name)
            for agency, why in entry["held_back"].items():
                report.held_back.setdefault(agency, {})[name] = why
        report.rejected = dict(data.get("rejected", {}))
    except FileNotFoundError:  # no clips check yet (a workdir older than clips, or a replay before any run)
        return ClipsReport()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("reports/%s cannot be read (%s): the clips are checked again by the next run", FILE_NAME,
                    type(exc).__name__)
        return ClipsReport()
    return report


def clips_stage(ctx: RunContext) -> ClipsReport:
    """The clips of the run's workdir checked against the run's agencies (the assets stage); each outcome logged.
    The describe stage describes them next (:func:`clip_assets`)."""
    pack = ctx.settings.pack
    report = check_clips(ctx.wd, list(ctx.agencies), pack.preview_px, pack.thumbnail_px)
    for name, reason in sorted(report.rejected.items()):
        log.warning("clip %s: %s", name, reason)
    for agency, held in sorted(report.held_back.items()):
        for name, reason in sorted(held.items()):
            log.warning("clip %s held back for %s: %s", name, agency, reason)
    if report.facts:
        log.info("%d clips; taken: %s", len(report.facts),
                 ", ".join(f"{a} {len(n)}" for a, n in sorted(report.taken.items())) or "by no agency")
    return report


def similar_clips_stage(ctx: RunContext) -> ClipsReport:
    """After describe: the clips of the last check compared for similar content with their titles and keywords
    (:func:`similar_clips`); the clips it holds back logged."""
    report = read_clips_report(ctx.wd)
    before = {a: set(held) for a, held in report.held_back.items()}
    similar_clips(ctx.wd, report, list(ctx.agencies), ctx.settings.pack.similar_max_distance)
    for agency, held in sorted(report.held_back.items()):
        for name, reason in sorted(held.items()):
            if name not in before.get(agency, set()):
                log.warning("clip %s held back for %s: %s", name, agency, reason)
    return report
