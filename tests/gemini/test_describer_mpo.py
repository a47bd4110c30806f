"""A JPEG with an MPF index (Pillow: "MPO") to Gemini: the real google-genai SDK against the fake Gemini server
gets its primary image only, as an ordinary JPEG (issue 37 item 3)."""

from __future__ import annotations

from io import BytesIO

from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.describer import GeminiDescriber, image_for_model
from tasks.images.jpeg_segments import metadata_segments, replace_metadata
from tasks.images.mpf import MPF_HEADER
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401

PRIMARY = (2400, 1600)  # large enough that the describer sends it reduced (1024 px on the long side)
SECOND = (600, 900)  # another size and colour, so a frame mix-up shows


def _mpo(path) -> Asset:
    """A 2-image MPO as Pillow writes it (an MPF APP2 index, the second image after the primary's EOI)."""
    primary = Image.new("RGB", PRIMARY, (30, 120, 200))
    for x in range(0, PRIMARY[0], 50):  # fine stripes: a decode at another scale gives other pixels
        primary.paste((250, 200, 60), (x, 0, x + 7, PRIMARY[1]))
    second = Image.new("RGB", SECOND, (220, 30, 30))
    primary.save(path, "MPO", save_all=True, append_images=[second], quality=90)
    return Asset(name=path.name, asset_id=sha256_file(path), path=path)


def _primary_alone(mpo: Asset, path) -> Asset:
    """The MPO's primary image as pack delivers it (tasks/images/mpf.py): its compressed data as it is, without
    the MPF index and without what follows its end-of-image marker."""
    path.write_bytes(replace_metadata(mpo.path.read_bytes(), []))
    return Asset(name=path.name, asset_id=sha256_file(path), path=path)


def test_an_mpo_reaches_gemini_as_its_primary_image_in_an_ordinary_jpeg(fake_gemini, tmp_path):
    asset = _mpo(tmp_path / "stereo.jpg")
    GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    [(mime, data)] = fake_gemini.requests[0].inline_images()
    assert mime == "image/jpeg"
    assert not [p for m, p in metadata_segments(data) if m == 0xE2 and p.startswith(MPF_HEADER)]
    with Image.open(BytesIO(data)) as sent:
        assert (sent.format, getattr(sent, "n_frames", 1), sent.size) == ("JPEG", 1, (1024, 683))  # the primary's
        assert sent.getpixel((12, 300))[2] > 150  # the blue (striped) primary, not the red second image


def test_the_model_gets_from_an_mpo_what_it_gets_from_its_primary_as_an_ordinary_jpeg(tmp_path):
    # Same decode (reduced-scale, as for any JPEG), same pixels, same bytes.
    mpo = _mpo(tmp_path / "stereo.jpg")
    alone = _primary_alone(mpo, tmp_path / "primary.jpg")
    with Image.open(mpo.path) as im, Image.open(alone.path) as primary:
        assert (im.format, im.n_frames, primary.format, primary.size) == ("MPO", 2, "JPEG", PRIMARY)
    assert image_for_model(mpo) == image_for_model(alone)
