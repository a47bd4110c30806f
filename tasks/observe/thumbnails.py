"""A small inline image for markdown the Prefect UI renders (a review form's description, an artifact)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image, UnidentifiedImageError


def inline_thumbnail(path: Path, px: int, alt: str = "thumbnail") -> str:
    """``![alt](data:image/jpeg;base64,…)`` of the image at ``path`` fitted in ``px``×``px``, or "" when it cannot
    be read (gone, not an image): a missing thumbnail never stops what shows it."""
    try:
        with Image.open(path) as im:
            im.thumbnail((px, px))
            buf = io.BytesIO()
            im.convert("RGB").save(buf, "JPEG", quality=70)
    except (OSError, UnidentifiedImageError):
        return ""
    return f"![{alt}](data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()})"
