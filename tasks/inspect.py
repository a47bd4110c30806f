"""Is this file an image we can use? One clear reason when it is not.

Runs before anything is spent on a file (a Gemini call, a pack, an upload),
so a bad file is named once and never reaches a CSV or an outbox. Pillow's
``MAX_IMAGE_PIXELS`` guard stays on: a decompression bomb is rejected, not
decoded.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from tasks.failures import BadInput

SUPPORTED_FORMATS = {"JPEG", "PNG"}
#: Extensions that look like images; anything else in a source folder is ignored.
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".tif", ".tiff", ".webp", ".gif", ".bmp", ".heic", ".heif", ".avif"}
ACCEPTED_EXTENSIONS = {".jpg", ".jpeg", ".png"}
#: Below this no agency takes the image (Dreamstime's 3 MP is the lowest minimum).
MIN_PIXELS = 3_000_000


@dataclass(frozen=True)
class ImageFacts:
    width: int
    height: int
    format: str
    mode: str

    @property
    def megapixels(self) -> float:
        return self.width * self.height / 1e6


def inspect_image(path: Path) -> ImageFacts:
    """Open, decode and size-check ``path``; raise BadInput naming the reason.

    Decodes at reduced scale (JPEG draft mode) so a truncated file is caught
    without holding the full-size pixels in memory.
    """
    shown = path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BadInput(shown, f"cannot read file ({exc.strerror})") from None
    if size == 0:
        raise BadInput(shown, "empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                facts = ImageFacts(im.width, im.height, im.format or "?", im.mode)
                if facts.format not in SUPPORTED_FORMATS:
                    raise BadInput(shown, f"unsupported format {facts.format} (only JPEG and PNG are accepted)")
                if facts.format == "JPEG":
                    im.draft("RGB", (max(1, im.width // 8), max(1, im.height // 8)))
                im.load()
    except BadInput:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadInput(shown, f"decompression bomb refused ({exc})") from None
    except UnidentifiedImageError:
        raise BadInput(shown, "not an image (the content is no JPEG or PNG, whatever the extension says)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise BadInput(shown, f"truncated or corrupt image data ({exc})") from None
    if facts.width * facts.height < MIN_PIXELS:
        raise BadInput(
            shown,
            f"too small: {facts.width}×{facts.height} = {facts.megapixels:.1f} MP, "
            f"below every agency's minimum ({MIN_PIXELS / 1e6:.0f} MP)",
        )
    return facts
