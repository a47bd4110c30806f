"""The words a clip's own file carries: the container's ``title``, ``description`` / ``comment`` and ``keywords``
tags (PyAV's ``container.metadata``, what FFmpeg reads from an MP4's or MOV's ``udta``/``meta`` boxes).

What the offline describer takes for a clip (:class:`~tasks.images.contributor_meta.Embedded`, as for an
image's XMP/IPTC). A camera's default caption (``tasks/images/camera_boilerplate.toml``) is no caption. A clip
FFmpeg cannot read gives nothing (the clips stage already said why), never an error.
"""

from __future__ import annotations

import re
from pathlib import Path

from tasks.images.boilerplate import is_boilerplate
from tasks.images.contributor_meta import Embedded


def _tag(tags: dict[str, str], *names: str) -> str:
    for name in names:
        text = " ".join(str(tags.get(name, "")).split())
        if text and not is_boilerplate(text):
            return text
    return ""


def read_clip_tags(path: Path) -> Embedded:
    """The clip's title, description and keywords from its container tags (empty when it has none)."""
    import av  # FFmpeg's libraries load when a clip is read, not with every run

    try:
        with av.open(str(path), mode="r") as container:
            tags = {str(k).lower(): str(v) for k, v in container.metadata.items()}
    except (OSError, av.FFmpegError, ValueError):
        return Embedded()
    keywords = [k.strip() for k in re.split(r"[,;]", tags.get("keywords", "")) if k.strip()]
    return Embedded(title=_tag(tags, "title"), description=_tag(tags, "description", "comment", "synopsis"),
                    keywords=keywords)
