"""Provenance from the image itself, and the IPTC Digital Source Type embedded for generated images."""

from __future__ import annotations

from io import BytesIO

from PIL import Image

from tasks.gemini.images import to_jpeg
from tasks.images.demo import DEMO_PROMPTS, demo_jpeg_bytes
from tasks.images.embed import embed_metadata
from tasks.images.provenance import (
    ALGORITHMIC_MEDIA,
    TRAINED_ALGORITHMIC_MEDIA,
    digital_source_type,
    gemini_software,
    provenance_of,
)


def png(size=(64, 48)) -> bytes:
    buf = BytesIO()
    Image.new("RGB", size, (20, 120, 200)).save(buf, "PNG")
    return buf.getvalue()


def xmp_source_type(jpeg: bytes) -> str | None:
    """Read back with Pillow's own XMP parser (defusedxml), independent of exiv2."""
    with Image.open(BytesIO(jpeg)) as im:
        description = im.getxmp().get("xmpmeta", {}).get("RDF", {}).get("Description", {})
    if isinstance(description, list):
        description = {k: v for d in description for k, v in d.items()}
    return description.get("DigitalSourceType")


def test_a_gemini_image_is_generated_by_its_model_with_its_prompt(tmp_path):
    path = tmp_path / "g.jpg"
    path.write_bytes(to_jpeg(png(), "a red fox in snow", gemini_software("gemini-x-image")))
    p = provenance_of(path)
    assert (p.source, p.generator, p.model, p.prompt, p.width, p.height) == (
        "generated", "gemini", "gemini-x-image", "a red fox in snow", 64, 48)
    assert digital_source_type(p) == TRAINED_ALGORITHMIC_MEDIA


def test_the_demo_generator_is_an_algorithm_and_an_own_file_is_not_labelled_unless_configured(tmp_path):
    demo = tmp_path / "d.jpg"
    demo.write_bytes(demo_jpeg_bytes(DEMO_PROMPTS[0], 0, 0))
    assert digital_source_type(provenance_of(demo)) == ALGORITHMIC_MEDIA
    own = tmp_path / "own.jpg"
    Image.new("RGB", (10, 10)).save(own)
    p = provenance_of(own)
    assert p.source == "own" and digital_source_type(p) is None
    assert digital_source_type(p, own_files_are_ai=True) == TRAINED_ALGORITHMIC_MEDIA


def test_the_source_type_is_embedded_in_xmp_only_when_given():
    jpeg = to_jpeg(png(), "p", gemini_software("m"))
    labelled = embed_metadata(jpeg, "A fox", "A red fox.", ["fox"], digital_source_type=TRAINED_ALGORITHMIC_MEDIA)
    assert xmp_source_type(labelled) == TRAINED_ALGORITHMIC_MEDIA
    assert xmp_source_type(embed_metadata(jpeg, "A fox", "A red fox.", ["fox"])) is None
