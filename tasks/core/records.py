"""The records every stage shares: an asset, its canonical metadata and sidecar, an upload item.

An asset's identity is its content: ``asset_id`` is the SHA-256 of the
source image. A describer produces one :class:`Metadata` per asset; every
agency's CSV row and the embedded XMP/IPTC are derived from it
(``tasks.agencies``). The sidecar ``assets/<stem>.json`` is the proof that an
asset is described. An :class:`UploadItem` is what the upload stage and
``microstock ledger`` agree an upload is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tasks.core.files import atomic_write_bytes, exclusive_lock, sha256_file
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir

#: The image files an asset can be (what ingest accepts and every stage lists; the formats: tasks.images.formats).
ACCEPTED_EXTENSIONS = {".jpg", ".jpeg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".avif", ".heic", ".heif", ".hif"}
#: The video clips taken from ``--source`` (MP4, QuickTime MOV, AVI and MPEG: the containers Adobe Stock takes);
#: they sit in ``assets/`` next to the images. How each is read: tasks.images.clip_probe.CONTAINERS.
CLIP_EXTENSIONS = {".mp4", ".mov", ".avi", ".mpg", ".mpeg"}


class Asset(BaseModel, frozen=True):
    """One image or clip of the batch, as it sits in ``assets/``."""

    name: str
    asset_id: str
    path: Path

    @property
    def is_clip(self) -> bool:
        """A video clip (:data:`CLIP_EXTENSIONS`), not an image."""
        return Path(self.name).suffix.lower() in CLIP_EXTENSIONS


class Usage(BaseModel):
    """Tokens of the model calls behind one result (``usage_metadata``; 0 when absent)."""

    prompt_tokens: int = 0
    #: The answer's tokens (``candidates_token_count``), thinking not included.
    output_tokens: int = 0
    #: Thinking tokens (``thoughts_token_count``), billed as output.
    thought_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.output_tokens + self.thought_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     thought_tokens=self.thought_tokens + other.thought_tokens)


class Metadata(BaseModel):
    """What a describer knows about an image, before any agency's rules."""

    title: str
    description: str
    #: Most important first.
    keywords: list[str] = Field(default_factory=list)
    #: Adobe Stock category id (1–21) when the describer has one.
    adobe_category: int | None = None
    #: Dreamstime category ids, most fitting first.
    dreamstime_categories: list[int] = Field(default_factory=list)
    #: Free-form subject words ("landscape", "food") that agencies map onto their ids.
    category_hints: list[str] = Field(default_factory=list)
    editorial: bool = False
    #: Made with a generative AI tool: agencies that refuse AI content never get the asset,
    #: the others get their disclosure (tasks/agencies/<agency>.toml ``[ai]``).
    ai_generated: bool = False
    releases: list[str] = Field(default_factory=list)
    #: Keywords the contributor's rules took out (``tasks.agencies.keyword_rules``): keyword -> why
    #: (``protected name 'Nike' (brand)``, ``excluded``), shown in review and ``batch-assets``; empty in
    #: sidecars written before it was kept.
    removed_keywords: dict[str, str] = Field(default_factory=dict)
    language: str = "en"
    #: Who wrote it: ``offline``, ``gemini:<model>`` or ``openai:<model>``.
    describer: str = "offline"
    #: Its words come from nothing but the file name: no describer saw the picture, the file embeds no title or
    #: keywords and it is no demo image with its prompt. Held back at every agency until a describer that sees it
    #: or a person (``microstock review edit``) writes them (docs/FAILURES.md, "No describer saw it").
    from_file_name: bool = False
    #: Tokens the describer used (``usage_metadata.total_token_count``), 0 offline (kept for older readers).
    tokens: int = 0
    #: Tokens of every call made for this asset (retries included), split as Google bills them.
    usage: Usage = Field(default_factory=Usage)
    #: What those calls cost in USD (``tasks/gemini/prices.toml``); None when the price is unknown.
    cost_usd: float | None = None


class Provenance(BaseModel):
    """Where an asset came from (:func:`tasks.images.provenance.provenance_of` reads it from the image)."""

    #: ``generated`` (by a model or the offline demo generator) or ``own`` (the contributor's file).
    source: Literal["generated", "own"]
    #: ``gemini`` or ``offline demo`` for a generated image.
    generator: str = ""
    model: str = ""
    prompt: str = ""
    width: int = 0
    height: int = 0
    #: When this was recorded (UTC, ISO 8601).
    recorded: str = ""
    #: What generating the image cost (Gemini's images; None for a free or unknown maker).
    usage: Usage | None = None
    cost_usd: float | None = None


class ReviewDecision(BaseModel):
    """The contributor's answer about one asset, when ``[review]`` is on: sent (approved) or never sent (rejected)."""

    decision: Literal["approved", "rejected"]
    #: When it was decided (ISO 8601, UTC).
    at: str
    #: Where it came from: ``review`` (the paused run's form), ``review timeout`` (``on_timeout = "approve"``).
    by: str = "review"


class Upscaled(BaseModel):
    """The upload-ready copy was enlarged (``pack.upscale_to_minimum``): from what size, to what, for whom."""

    from_size: tuple[int, int]
    to_size: tuple[int, int]
    #: The agencies the enlarged copy may go to (the others judge the original size).
    agencies: list[str]


class Sidecar(BaseModel):
    """``assets/<stem>.json``: the asset and its metadata once described, and the review decision if any."""

    asset_id: str
    name: str
    metadata: Metadata
    #: Recorded when the asset is described; None in sidecars written before provenance was kept.
    provenance: Provenance | None = None
    review: ReviewDecision | None = None
    #: Set by the pack stage when it enlarged the upload-ready copy; None when it did not.
    upscaled: Upscaled | None = None

    @property
    def rejected(self) -> bool:
        """Rejected in review: no CSV row, never uploaded."""
        return self.review is not None and self.review.decision == "rejected"


def write_sidecar(path: Path, asset: Asset, metadata: Metadata, provenance: Provenance | None = None) -> None:
    """Write the asset's sidecar as just described, atomically (temp file, fsync, rename: whole or not at all),
    under ``assets/.sidecars.lock`` as every change of a sidecar (:func:`update_sidecar`): a review decision
    recorded for this content (the same asset and ``asset_id``) while it was described again is kept, never
    written over; a sidecar of other content is replaced whole (its decision was about other pixels)."""
    described = Sidecar(asset_id=asset.asset_id, name=asset.name, metadata=metadata, provenance=provenance)
    with exclusive_lock(path.parent / SIDECARS_LOCK, "changing a sidecar"):
        now = read_sidecar(path) if path.exists() else None
        if now is not None and (now.asset_id, now.name) == (asset.asset_id, asset.name):
            described = described.model_copy(update={"review": now.review})
        save_sidecar(path, described)


def read_sidecar(path: Path) -> Sidecar | None:
    """The sidecar at ``path``, or None when it is missing or damaged (then set aside, named in one warning, and
    the asset is pending: described again)."""
    # pydantic parses the JSON itself: half the time of json.loads first
    return read_file(path, Sidecar.model_validate_json, "the asset is described again")


#: Held while a sidecar is read, changed and written back (in the sidecar's folder, ``assets/``).
SIDECARS_LOCK = ".sidecars.lock"


def update_sidecar(path: Path, change: Callable[[Sidecar], Sidecar | None]) -> Sidecar | None:
    """Read the sidecar at ``path``, ``change`` it and write it back, under ``assets/.sidecars.lock``: two
    processes changing one sidecar at once (a review decision in the form while ``similar distinct`` or the
    pack stage rewrites it) both keep their change. ``change`` returns the sidecar to write, or None to leave
    it as it is. The sidecar as it is now; None when there is none."""
    with exclusive_lock(path.parent / SIDECARS_LOCK, "changing a sidecar"):
        sidecar = read_sidecar(path)
        if sidecar is None:
            return None
        changed = change(sidecar)
        if changed is None:
            return sidecar
        save_sidecar(path, changed)
        return changed


def record_review(path: Path, decision: Literal["approved", "rejected"] | None, by: str = "review") -> Sidecar | None:
    """Write a review decision into the sidecar at ``path`` (atomically, :func:`update_sidecar`), or drop it
    (``None``: asked again by the next run); None when there is no sidecar."""
    review = None if decision is None else ReviewDecision(
        decision=decision, at=datetime.now(timezone.utc).isoformat(timespec="seconds"), by=by)
    return update_sidecar(path, lambda sidecar: sidecar.model_copy(update={"review": review}))


def save_sidecar(path: Path, sidecar: Sidecar) -> None:
    """Write a sidecar as it is (atomically); without a ``review`` or ``upscaled`` field while it has none."""
    absent = {field for field in ("review", "upscaled") if getattr(sidecar, field) is None}
    body = sidecar.model_dump_json(indent=2, exclude=absent or None)
    atomic_write_bytes(path, body.encode("utf-8"))


def record_upscaled(path: Path, upscaled: Upscaled | None) -> None:
    """Write (or clear, with None) the pack stage's enlargement into the sidecar at ``path`` when it changed
    (:func:`update_sidecar`)."""
    update_sidecar(path, lambda sidecar: None if sidecar.upscaled == upscaled
                   else sidecar.model_copy(update={"upscaled": upscaled}))


def iter_asset_files(assets_dir: Path, extensions: set[str] = ACCEPTED_EXTENSIONS) -> list[Path]:
    """The image files in ``assets_dir`` (or, with ``extensions=CLIP_EXTENSIONS``, the clips), sorted by name
    (sidecars and temp files excluded).

    One ``scandir`` (its entries know their type without a stat each): at
    thousands of assets this listing is part of every ``ledger`` command.
    """
    try:
        with os.scandir(assets_dir) as entries:
            names = sorted(e.name for e in entries
                           if not e.name.startswith(".") and os.path.splitext(e.name)[1].lower() in extensions
                           and e.is_file())
    except FileNotFoundError:
        return []
    return [assets_dir / name for name in names]


def list_assets(assets_dir: Path, extensions: set[str] = ACCEPTED_EXTENSIONS) -> list[Asset]:
    """Every asset in ``assets_dir`` (the images; with ``extensions=CLIP_EXTENSIONS`` the clips) with its content
    hash."""
    return [Asset(name=p.name, asset_id=sha256_file(p), path=p) for p in iter_asset_files(assets_dir, extensions)]


def described_sidecars(wd: Workdir, extensions: set[str] = ACCEPTED_EXTENSIONS) -> list[Sidecar]:
    """The sidecars of every described asset whose image is in ``assets/`` (with ``extensions=CLIP_EXTENSIONS``:
    of every described clip), in file-name order."""
    found = []
    for path in iter_asset_files(wd.assets, extensions):
        sidecar = read_sidecar(wd.sidecar(path.name))
        # assets/a.jpg and assets/a.png share assets/a.json: it describes only the file it names.
        if sidecar is not None and sidecar.name == path.name:
            found.append(sidecar)
    return found


def ready_name(asset_name: str) -> str:
    """The upload-ready file name: the asset's stem with ``.jpg``; a clip's is its own (it is sent as it is)."""
    if Path(asset_name).suffix.lower() in CLIP_EXTENSIONS:
        return asset_name
    return Path(asset_name).stem + ".jpg"


@dataclass(frozen=True)
class UploadItem:
    """A file to upload: the upload-ready file and the SHA-256 of its source image."""

    name: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class FileOutcome:
    """What one file's upload came to: ``uploaded``, ``reconciled`` or ``failed`` (left pending), and why."""

    kind: str
    detail: str


@dataclass(frozen=True)
class Made:
    """A generated asset and what making it cost (``usage`` None when nothing was billed)."""

    #: The file: a JPEG image, or an MP4 clip.
    data: bytes
    usage: Usage | None = None
    cost_usd: float | None = None
