"""The kinds of asset — image and clip — and the parts each brings, behind one small interface: :class:`AssetKind`.

Every asset takes one path of stage functions: gathered (ingested or generated) → described → packed →
CSV rows → review → upload. The stages name no kind; where kinds differ, the stage asks the asset's kind
(:func:`kind_of`) for its part:

=============  ====================================================  ===================================================
part           image                                                 clip
=============  ====================================================  ===================================================
extensions     ``.jpg .jpeg .mpo .png .tif .tiff .webp .avif .heic   ``.mp4 .mov .avi .mpg .mpeg``
               .heif .hif`` (``tasks.images.formats``)
unusable       unreadable, or too small for every chosen agency      cannot be probed
               (:func:`tasks.images.inspect.too_small_for_all`)      (:func:`tasks.stages.clips.unreadable_clips`)
pack           the JPEG with the metadata embedded, preview and      the clip as it is, a poster and thumbnail, each
               thumbnail, each agency's ``[image]`` rules, the       agency's ``[video]`` rules, the similarity check
               similarity check (:func:`tasks.stages.pack.           (:func:`tasks.stages.clips.pack_clips`)
               pack_assets`)
what the       the image, reduced (:mod:`tasks.gemini.describer`;    the clip itself (inline or through the Files API);
describer      the offline describer: prompt, EXIF/XMP/IPTC)         the offline describer: its container's tags
is shown
=============  ====================================================  ===================================================

Each kind's pack part fills the same :class:`~tasks.core.reports.PackReport` (upload-ready file, source hash,
thumbnail, what holds it back where); the CSV, review and upload stages read that report alike for every kind.
Adding a kind is writing its parts (and its agency rules table), and one entry in :data:`KINDS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tasks.agencies.protected import ProtectedNames
from tasks.core.records import ACCEPTED_EXTENSIONS, CLIP_EXTENSIONS, Asset, Sidecar, described_sidecars, ready_name
from tasks.core.reports import NOT_SEEN_WHY, PackReport
from tasks.core.workdir import Workdir
from tasks.images.inspect import image_rules, too_small_for_all
from tasks.stages.clips import pack_clips, unreadable_clips
from tasks.stages.pack import pack_assets
from tasks.stages.run_context import RunContext


class AssetKind(Protocol):
    """What one kind of asset brings to the stages."""

    #: ``image``, ``clip``: the word the summary and the logs use.
    name: str
    #: The file extensions of the kind in ``assets/`` (lower case, with the dot).
    extensions: frozenset[str]
    #: Does its upload-ready file carry the metadata embedded (an image's JPEG: XMP/IPTC), so that a CSV row is
    #: checked against what the file says too? A clip is sent as it is.
    embeds_metadata: bool

    def ready_file(self, wd: Workdir, name: str) -> Path:
        """Where the upload-ready file of the asset ``name`` is once packed."""
        ...

    def unusable(self, ctx: RunContext, assets: list[Asset]) -> dict[str, str]:
        """asset name -> why nothing is to be spent on it (read and probed before it is described): it stays in
        ``assets/`` and is not described while the run's agencies are these. Never raises for one file."""
        ...

    def pack(self, ctx: RunContext, sidecars: list[Sidecar]) -> PackReport:
        """The pack stage's part for the described assets of this kind: each one's upload-ready file, thumbnail
        and source hash, what the run's agencies' rules for the kind and the similarity check hold back where,
        what cannot be used (rejected). StageStopped when the workdir's disk is full."""
        ...


class ImageKind:
    name = "image"
    extensions = frozenset(ACCEPTED_EXTENSIONS)
    embeds_metadata = True

    def ready_file(self, wd: Workdir, name: str) -> Path:
        return wd.packs / "ready" / ready_name(name)

    def unusable(self, ctx: RunContext, assets: list[Asset]) -> dict[str, str]:
        if any(ctx.settings.pack.upscales(a) for a in ctx.agencies):  # enlarged to the minimum when packed
            return too_small_for_all(assets, [])
        return too_small_for_all(assets, [image_rules(a, ctx.wd, ctx.catalog) for a in ctx.agencies])

    def pack(self, ctx: RunContext, sidecars: list[Sidecar]) -> PackReport:
        return pack_assets(ctx.wd, ctx.settings.pack, sidecars, ctx.agencies,
                           names=ProtectedNames.of(ctx.settings.keywords), known=ctx.catalog)


class ClipKind:
    name = "clip"
    extensions = frozenset(CLIP_EXTENSIONS)
    embeds_metadata = False

    def ready_file(self, wd: Workdir, name: str) -> Path:
        return wd.assets / name

    def unusable(self, ctx: RunContext, assets: list[Asset]) -> dict[str, str]:
        return unreadable_clips(assets)

    def pack(self, ctx: RunContext, sidecars: list[Sidecar]) -> PackReport:
        return pack_clips(ctx.wd, sidecars, ctx.agencies, ctx.catalog, ctx.settings.pack)


#: Every kind of asset, in the order their assets are listed (images first, as the summary counts them).
KINDS: tuple[AssetKind, ...] = (ImageKind(), ClipKind())

#: The extensions of every kind: what ``assets/`` holds as assets.
ASSET_EXTENSIONS = set().union(*(kind.extensions for kind in KINDS))


def kind_of(name: str) -> AssetKind:
    """The kind of the asset named ``name`` (by its extension); ValueError for a name of no kind."""
    suffix = Path(name).suffix.lower()
    for kind in KINDS:
        if suffix in kind.extensions:
            return kind
    raise ValueError(f"{name}: no kind of asset has the extension {suffix!r}")


def unusable_assets(ctx: RunContext, assets: list[Asset]) -> dict[str, str]:
    """asset name -> why it cannot be used, each asset checked by its kind (the assets stage)."""
    found: dict[str, str] = {}
    for kind in KINDS:
        found.update(kind.unusable(ctx, [a for a in assets if kind_of(a.name) is kind]))
    return found


def pack_described(ctx: RunContext) -> PackReport:
    """The pack stage: every described asset of the workdir packed by its kind, one report for all."""
    sidecars = described_sidecars(ctx.wd, ASSET_EXTENSIONS)
    report = PackReport()
    for kind in KINDS:
        report = report.joined(kind.pack(ctx, [s for s in sidecars if kind_of(s.name) is kind]))
    return held_back_unseen(report, sidecars, ctx.agencies)


def held_back_unseen(report: PackReport, sidecars: list[Sidecar], agencies: list[str]) -> PackReport:
    """``report`` with every packed asset whose words come from nothing but its file name
    (``Metadata.from_file_name``) held back at each of ``agencies`` (:data:`~tasks.core.reports.NOT_SEEN_WHY`,
    before any other hold of it): no row, no upload anywhere, until a describer that sees it or the contributor
    writes its title and keywords."""
    unseen = sorted(s.name for s in sidecars if s.metadata.from_file_name and s.name in report.ready)
    report.not_seen = {name: NOT_SEEN_WHY for name in unseen}
    for agency in agencies if unseen else ():
        held = report.held_back.setdefault(agency, {})
        held.update(report.not_seen)
        report.held_back[agency] = dict(sorted(held.items()))
    return report
