"""The pack stage: upload-ready JPEG, preview and thumbnail per asset, and a batch ZIP."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageOps

from tasks.config import PackSettings
from tasks.files import atomic_write_bytes
from tasks.metadata import Sidecar
from tasks.progress import StageProgress
from tasks.workdir import Workdir


@dataclass
class PackReport:
    """Upload-ready files per asset name, and what was held back or rejected."""

    ready: dict[str, Path] = field(default_factory=dict)
    #: agency -> asset name -> rule it broke (held back for that agency only)
    held_back: dict[str, dict[str, str]] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    zip_path: Path | None = None


def ready_name(asset_name: str) -> str:
    """The upload-ready file name: the asset's stem with ``.jpg``."""
    return Path(asset_name).stem + ".jpg"


def _jpeg(im: Image.Image, quality: int) -> bytes:
    buf = BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def pack_asset(sidecar: Sidecar, wd: Workdir, settings: PackSettings) -> Path:
    """Write the upload-ready JPEG, preview and thumbnail of one described asset."""
    src = wd.assets / sidecar.name
    name = ready_name(sidecar.name)
    with Image.open(src) as im:
        im = ImageOps.exif_transpose(im).convert("RGB")
        ready = wd.packs / "ready" / name
        atomic_write_bytes(ready, _jpeg(im, settings.jpeg_quality))
        for folder, px in (("previews", settings.preview_px), ("thumbs", settings.thumbnail_px)):
            small = im.copy()
            small.thumbnail((px, px))
            atomic_write_bytes(wd.packs / folder / name, _jpeg(small, 85))
    return ready


def pack_batch(wd: Workdir, settings: PackSettings, sidecars: list[Sidecar]) -> PackReport:
    """Pack every described asset, then the batch ZIP."""
    report = PackReport()
    with StageProgress("pack", len(sidecars)) as progress:
        for s in sidecars:
            report.ready[s.name] = pack_asset(s, wd, settings)
            progress.advance()
    zip_path = wd.packs / "batch.zip"
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_STORED) as zf:
        for path in sorted(report.ready.values()):
            zf.write(path, f"ready/{path.name}")
        for path in sorted(wd.csv.glob("*.csv")):
            zf.write(path, f"csv/{path.name}")
    report.zip_path = zip_path
    return report
