"""What a video clip brings to the one path every asset takes: read and probed before it is described, then its
poster and thumbnail, its agencies and its similarity check in the pack stage.

A clip is an asset like an image (``asset_id`` = SHA-256 of the file, in ``assets/``); the stages take it through
the same functions (:mod:`tasks.stages.kinds`). Its parts: :func:`unreadable_clips` (the assets stage: a clip that
cannot be probed is rejected before anything is spent on it) and :func:`pack_clips` (the pack stage: its
upload-ready file is the clip itself — not re-encoded, not put in the batch ZIP — its poster and thumbnail are
made once, and each agency's ``[video]`` rules (:mod:`tasks.agencies.video`) and the similarity check say where
it goes). A clip an agency's video rules or the similarity check keep from an agency is in the report's
``not_taken`` for it, with the rule and its value; an agency without confirmed video rules gets no clip, nor one
whose way of taking clips is not confirmed (:meth:`VideoRules.not_sent` names what is missing).

:func:`pack_clips` writes ``reports/clips.json`` for people (every packed clip's facts and where it goes); no
stage reads it back. The poster and thumbnail go to ``packs/clips/<stem>.poster.jpg`` and ``<stem>.thumb.jpg``,
the similarity signature next to them (made once, kept).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

from tasks.agencies.catalog import Catalog
from tasks.core.errors import BadInput
from tasks.core.files import atomic_write_bytes, cannot_write, sha256_file
from tasks.core.records import Asset, Sidecar
from tasks.core.reports import PackReport
from tasks.core.settings import PackSettings
from tasks.core.workdir import Workdir
from tasks.images.clip_poster import poster_jpegs, poster_paths
from tasks.images.clip_probe import ClipFacts, probe_clip
from tasks.images.clip_signature import ClipSignature, clip_signature
from tasks.images.likeness import Signature
from tasks.stages.similarity import hold_back_similar_clips

log = logging.getLogger(__name__)

FILE_NAME = "clips.json"


def unreadable_clips(clips: list[Asset]) -> dict[str, str]:
    """clip name -> why it cannot be used (it cannot be probed: not a video a tool can read): the assets stage's
    check, before anything is spent on it."""
    unreadable = {}
    for clip in clips:
        try:
            probe_clip(clip.path)
        except BadInput as exc:
            unreadable[clip.name] = exc.reason
        except Exception as exc:  # one clip never stops the others, nor the images
            log.exception("probing clip %s failed", clip.name)
            unreadable[clip.name] = f"unexpected error ({type(exc).__name__}: {exc}); not described"
    return unreadable


def pack_clips(wd: Workdir, sidecars: list[Sidecar], agencies: list[str], known: Catalog,
               settings: PackSettings) -> PackReport:
    """The pack stage's part for the described clips of ``sidecars``: each probed, its poster and thumbnail made
    once, checked against each agency's video rules, then the similarity check (with each other and the clips
    uploaded before, their titles and keywords from the sidecars); ``reports/clips.json`` written."""
    report, facts, signatures = PackReport(), {}, {}
    for sidecar in sidecars:
        path = wd.assets / sidecar.name
        try:
            facts[sidecar.name] = probe_clip(path)
            poster, thumb = poster_paths(wd, path.name)
            if not (poster.exists() and thumb.exists()):
                made = poster_jpegs(path, settings.preview_px, settings.thumbnail_px)
                atomic_write_bytes(poster, made.poster)
                atomic_write_bytes(thumb, made.thumb)
            asset_id = sha256_file(path)  # the clip as it is now (the sidecar's may be of an earlier file)
            signatures[sidecar.name] = _kept_signature(wd, path, asset_id)
        except BadInput as exc:
            report.rejected[sidecar.name] = exc.reason
            continue
        except Exception as exc:  # one clip never stops the others, nor the images
            log.exception("checking clip %s failed", sidecar.name)
            report.rejected[sidecar.name] = f"unexpected error ({type(exc).__name__}: {exc}); not sent"
            continue
        clip = facts[sidecar.name]
        report.ready[sidecar.name], report.asset_ids[sidecar.name] = path, asset_id
        report.previews[sidecar.name], report.thumbnails[sidecar.name] = poster, thumb
        report.about[sidecar.name] = clip.words()
        for agency in agencies:
            spec = known.spec(agency)
            broken = spec.video.broken_by(
                container=clip.container, size=clip.bytes, seconds=clip.duration_s, width=clip.width,
                height=clip.height, fps=clip.frame_rate, codec=clip.codec)
            if broken is None:
                broken = spec.video.not_sent(spec.display_name)
            if broken is not None:
                report.not_taken.setdefault(agency, {})[sidecar.name] = broken
    by_name = {s.name: s for s in sidecars}
    batch = [Signature(name, report.asset_ids[name], sig.frames[len(sig.frames) // 2], by_name[name].metadata.title,
                       tuple(by_name[name].metadata.keywords), sig.frames, sig.digest)
             for name, sig in sorted(signatures.items()) if name in report.ready]
    by_rules = {agency: set(held) for agency, held in report.not_taken.items()}
    risks = hold_back_similar_clips(wd, batch, agencies, report.not_taken, settings.similar_max_distance,
                                    lambda name: poster_paths(wd, name)[1], known)
    report.risks = risks
    for agency, per in risks.items():  # held back by the check (not already by a video rule): which way
        for name, risk in per.items():
            if name in report.not_taken.get(agency, {}) and name not in by_rules.get(agency, set()):
                held = report.duplicate_held if risk.outcome == "duplicate" else report.similar_held
                held.setdefault(agency, set()).add(name)
    _write_report(wd, report, facts, agencies)
    for name, reason in sorted(report.rejected.items()):
        log.warning("clip %s: %s", name, reason)
    for agency, held in sorted(report.not_taken.items()):
        for name, reason in sorted(held.items()):
            log.warning("clip %s held back for %s: %s", name, agency, reason)
    if report.ready:
        log.info("%d clips; taken: %s", len(report.ready),
                 ", ".join(f"{a} {n}" for a in agencies
                           if (n := sum(1 for c in report.ready if c not in report.not_taken.get(a, {}))))
                 or "by no agency")
    return report


def _write_report(wd: Workdir, report: PackReport, facts: dict[str, ClipFacts], agencies: list[str]) -> None:
    """``reports/clips.json`` (for people: no stage reads it back); StageStopped when it cannot be written."""
    data = {"clips": [{"file": name, "asset_id": report.asset_ids[name], **asdict(facts[name]),
                       "taken_by": [a for a in sorted(agencies) if name not in report.not_taken.get(a, {})],
                       "held_back": {a: held[name] for a, held in sorted(report.not_taken.items()) if name in held}}
                      for name in sorted(report.ready)],
            "rejected": dict(sorted(report.rejected.items()))}
    path = wd.reports / FILE_NAME
    try:
        atomic_write_bytes(path, json.dumps(data, indent=2, ensure_ascii=False).encode())
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
