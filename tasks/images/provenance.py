"""Where an image came from, read from the image itself, and how agencies are told.

Both generators mark what they make in the file, so the file stays the record:
an image's EXIF ``Software`` names the generator and ``ImageDescription`` holds
the prompt; a clip's MP4 encoding-tool tag (``©too``, FFmpeg's ``encoder``)
names it and its ``title`` holds the prompt. Gemini's say ``prefect-microstock
via Gemini <model> (AI-generated)``; the offline demo generator's say
:data:`tasks.images.demo.DEMO_SOFTWARE`. Anything else is the contributor's own file.

Agencies and buyers read the IPTC Digital Source Type
(``Iptc4xmpExt:DigitalSourceType`` in XMP): :func:`digital_source_type` gives
``trainedAlgorithmicMedia`` for a model's image and ``algorithmicMedia`` for
the demo generator's drawings (an algorithm, no training data), and nothing
for the contributor's own files unless ``pack.label_own_files_ai`` says they
are AI-generated too.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from tasks.core.files import atomic_write_bytes
from tasks.core.records import CLIP_EXTENSIONS, Made, Provenance, Usage
from tasks.images.demo import DEMO_SOFTWARE
from tasks.images.inspect import open_image, pillow_errors

#: IPTC NewsCodes for the digital source type (https://cv.iptc.org/newscodes/digitalsourcetype/).
TRAINED_ALGORITHMIC_MEDIA = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
ALGORITHMIC_MEDIA = "http://cv.iptc.org/newscodes/digitalsourcetype/algorithmicMedia"

_GEMINI = re.compile(r"^prefect-microstock via Gemini (?P<model>\S+) \(AI-generated\)$")
_IMAGE_DESCRIPTION, _SOFTWARE = 0x010E, 0x0131


def gemini_software(model: str) -> str:
    """EXIF ``Software`` of an image made by Gemini's ``model``."""
    return f"prefect-microstock via Gemini {model} (AI-generated)"


def generation_record(image: Path) -> Path:
    """``assets/.<stem>.made.json``: what making a generated image cost (hidden from asset listings)."""
    return image.parent / f".{image.stem}.made.json"


def pending_generation(asset: Path) -> Path:
    """``assets/.<stem>.pending.json``: a paid generation started and not yet kept (a clip being made: its
    interaction), so the attempt or run after a crash or a long wait takes it up instead of paying again.
    Removed once the asset is written."""
    return asset.parent / f".{asset.stem}.pending.json"


def record_generation(image: Path, made: Made) -> None:
    """Keep ``made``'s usage and cost next to the image (nothing when it has none)."""
    if made.usage is not None:
        body = {"usage": made.usage.model_dump(), "cost_usd": made.cost_usd}
        atomic_write_bytes(generation_record(image), json.dumps(body, sort_keys=True).encode("utf-8"))


def provenance_of(path: Path) -> Provenance:
    """What the asset at ``path`` says about where it came from (an image's header, a clip's container tags).

    Raises BadInput naming the file when it cannot be read.
    """
    if path.suffix.lower() in CLIP_EXTENSIONS:
        return _clip_provenance(path)
    with open_image(path) as im, pillow_errors(path.name):
        exif = im.getexif()
        width, height = im.size
    return _provenance(path, str(exif.get(_SOFTWARE, "")), str(exif.get(_IMAGE_DESCRIPTION, "")), width, height)


def _clip_provenance(path: Path) -> Provenance:
    """A clip's: its container's encoding tool and title (a clip FFmpeg cannot open is the contributor's own)."""
    import av  # FFmpeg's libraries load when a clip is read, not with every run

    try:
        with av.open(str(path), mode="r") as container:
            tags = {str(k).lower(): str(v) for k, v in container.metadata.items()}
            video = container.streams.video
            width, height = (video[0].codec_context.width, video[0].codec_context.height) if video else (0, 0)
    except (OSError, av.FFmpegError, ValueError):
        tags, width, height = {}, 0, 0
    return _provenance(path, tags.get("encoder", ""), tags.get("title", ""), width, height)


def _provenance(path: Path, software: str, prompt: str, width: int, height: int) -> Provenance:
    recorded = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    gemini = _GEMINI.match(software)
    if gemini:
        cost = _generation_cost(path)
        return Provenance(source="generated", generator="gemini", model=gemini["model"], prompt=prompt,
                          width=width, height=height, recorded=recorded, **cost)
    if software == DEMO_SOFTWARE:
        return Provenance(source="generated", generator="offline demo", prompt=prompt, width=width, height=height,
                          recorded=recorded)
    return Provenance(source="own", width=width, height=height, recorded=recorded)


def _generation_cost(image: Path) -> dict:
    """``usage`` and ``cost_usd`` from the image's generation record; empty when there is none or it is unreadable."""
    try:
        found = json.loads(generation_record(image).read_text(encoding="utf-8"))
        return {"usage": Usage.model_validate(found["usage"]), "cost_usd": found.get("cost_usd")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def digital_source_type(provenance: Provenance, own_files_are_ai: bool = False) -> str | None:
    """The IPTC Digital Source Type to embed, or None for a file that is not labelled."""
    if provenance.source == "generated":
        return TRAINED_ALGORITHMIC_MEDIA if provenance.generator == "gemini" else ALGORITHMIC_MEDIA
    return TRAINED_ALGORITHMIC_MEDIA if own_files_are_ai else None


def is_ai_generated(provenance: Provenance, own_files_are_ai: bool = False) -> bool:
    """Made by a trained model (an agency's "AI-generated"): Gemini's images, and own files labelled so.

    The offline demo generator's drawings are made by an algorithm without
    training data: not what agencies mean by AI-generated.
    """
    return digital_source_type(provenance, own_files_are_ai) == TRAINED_ALGORITHMIC_MEDIA
