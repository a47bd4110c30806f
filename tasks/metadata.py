"""The canonical, agency-neutral metadata record of an asset, and its sidecar file.

A describer produces one :class:`Metadata` per asset; every agency's CSV row
and the embedded XMP/IPTC are derived from it (``tasks.agencies``). The
sidecar ``assets/<stem>.json`` is the proof that an asset is described.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tasks.assets import Asset
from tasks.files import atomic_write_bytes


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
    releases: list[str] = Field(default_factory=list)
    language: str = "en"
    #: Who wrote it: ``offline`` or ``gemini:<model>``.
    describer: str = "offline"
    #: Tokens the describer used (``usage_metadata.total_token_count``), 0 offline.
    tokens: int = 0


class Sidecar(BaseModel):
    """``assets/<stem>.json``: the asset and its metadata once described."""

    asset_id: str
    name: str
    metadata: Metadata


def write_sidecar(path: Path, asset: Asset, metadata: Metadata) -> None:
    """Write the sidecar atomically (temp file, fsync, rename): it exists whole or not at all."""
    body = Sidecar(asset_id=asset.asset_id, name=asset.name, metadata=metadata).model_dump_json(indent=2)
    atomic_write_bytes(path, body.encode("utf-8"))


def read_sidecar(path: Path) -> Sidecar | None:
    """The sidecar at ``path``, or None when it is missing or unreadable (then the asset is pending)."""
    try:
        return Sidecar.model_validate_json(path.read_bytes())  # pydantic parses the JSON itself: half the time
    except (OSError, ValueError, ValidationError):
        return None
