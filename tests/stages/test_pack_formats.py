"""Pictures from phones and editors (issue 55): a 16-bit Adobe RGB TIFF, a WebP, an AVIF and a HEIC reach Adobe as
upright sRGB JPEGs with the contributor's words, the originals untouched; a multi-page TIFF and a HEIC without its
optional reader are refused with what to do. Real files (tests/images/corpus/README.md), edited by exiftool in a
temporary folder; exiftool reads back what is delivered, once for the module's delivered files."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Metadata, list_assets, write_sidecar
from tasks.core.workdir import Workdir
from tasks.images.camera_colour import ADOBE_RGB_COMPATIBLE
from tasks.images.contributor_meta import read_embedded
from tasks.images.inspect import ImageRules
from tasks.stages.ingest import ingest
from tasks.stages.ingest_report import what_to_do
from tests.stages.test_pack_motifs import pack_and_upload

CORPUS = Path(__file__).parents[1] / "images" / "corpus"
#: The corpus files are a few hundred pixels at most: an agency minimum they pass.
RULES = {"adobe": ImageRules("adobe", 1000)}
#: HEIC is read through the optional extra pillow-heif (tasks.images.formats); the other formats by Pillow.
HEIF_READER = importlib.util.find_spec("pillow_heif") is not None
#: corpus file -> exiftool arguments for its edited copy (the contributor's words, as an editor writes them)
EDITED = {
    "tiff_16bit_RGB.tiff": [f"-ICC_Profile<={ADOBE_RGB_COMPATIBLE}"],  # 16 bit per channel, made Adobe RGB
    "hopper.webp": [],
    "exif.avif": [],
    **({"L_exif_xmp_iptc.heic": []} if HEIF_READER else {}),  # a Sony ILCE-7SM3 photo through Lightroom
}


def _words(name: str) -> list[str]:
    stem = Path(name).stem.replace("_", " ")
    return [f"-XMP-dc:Title=Harbour crane {stem}", "-XMP-dc:Subject=harbour", "-XMP-dc:Subject=crane",
            "-XMP-dc:Subject=dusk", "-XMP-dc:Creator=Ana Fotógrafa", "-EXIF:Artist=Ana Fotógrafa"]


def _exiftool(*args: str) -> str:
    return subprocess.run([shutil.which("exiftool") or "exiftool", *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    """Every edited copy packed and uploaded to Adobe in one workdir: (workdir, source hashes before, the upload,
    exiftool's reading of each delivered JPEG by name)."""
    root = tmp_path_factory.mktemp("formats")
    wd = Workdir(root / "w").prepare()
    for name, args in EDITED.items():
        shutil.copy(CORPUS / name, wd.assets / name)
        _exiftool("-q", "-overwrite_original", *args, *_words(name), str(wd.assets / name))
    before = {p.name: sha256_file(p) for p in wd.assets.iterdir()}
    for asset in list_assets(wd.assets):  # described as the offline describer does: the file's own words
        found = read_embedded(asset.path)
        write_sidecar(wd.sidecar(asset.name), asset, Metadata(title=found.title, description=found.title,
                                                             keywords=found.keywords))
    report, sent = pack_and_upload(wd, rules=RULES)
    ready = sorted((wd.packs / "ready").iterdir())
    tags = {Path(t["SourceFile"]).name: t for t in json.loads(_exiftool("-j", "-G1", "-a", *map(str, ready)))}
    return wd, before, sent["adobe"], tags


def test_a_16_bit_adobe_rgb_tiff_a_webp_and_an_avif_reach_adobe_as_srgb_jpegs_with_their_words(delivered):
    wd, _before, sent, tags = delivered
    assert sorted(sent.uploaded) == sorted(Path(n).stem + ".jpg" for n in EDITED)
    assert {"exif.jpg", "hopper.jpg", "tiff_16bit_RGB.jpg"} <= set(sent.uploaded)
    for name in EDITED:
        t = tags[Path(name).stem + ".jpg"]
        assert t["File:FileType"] == "JPEG" and t["File:BitsPerSample"] == 8, name
        assert t["ICC_Profile:ProfileDescription"] == "sRGB built-in", name
        assert t["XMP-dc:Title"].startswith("Harbour crane"), name
        assert t["XMP-dc:Subject"] == ["harbour", "crane", "dusk"], name
        assert t["XMP-dc:Creator"] == "Ana Fotógrafa" and t["IFD0:Artist"] == "Ana Fotógrafa", name


@pytest.mark.skipif(not HEIF_READER, reason="HEIC is read through the optional extra pillow-heif")
def test_a_heic_reaches_adobe_as_a_jpeg_with_its_words_and_its_cameras_exif(delivered):
    _wd, _before, sent, tags = delivered
    t = tags["L_exif_xmp_iptc.jpg"]
    assert "L_exif_xmp_iptc.jpg" in sent.uploaded and t["File:FileType"] == "JPEG"
    assert t["XMP-dc:Title"].startswith("Harbour crane") and t["XMP-dc:Subject"] == ["harbour", "crane", "dusk"]
    assert (t["IFD0:Make"], t["IFD0:Model"]) == ("SONY", "ILCE-7SM3")  # the camera's EXIF kept
    assert t["ICC_Profile:ProfileDescription"] == "sRGB built-in"


def test_the_adobe_rgb_tiff_is_converted_to_srgb_not_relabelled(delivered):
    wd, _before, _sent, _tags = delivered
    with Image.open(wd.assets / "tiff_16bit_RGB.tiff") as src, Image.open(wd.packs / "ready" /
                                                                          "tiff_16bit_RGB.jpg") as out:
        assert src.info["icc_profile"] != out.info["icc_profile"]
        raw, sent = src.convert("RGB").getpixel((50, 20)), out.getpixel((50, 20))
    assert raw != sent  # the same numbers read as sRGB would be Adobe RGB's colours shown wrong


def test_the_originals_are_left_untouched(delivered):
    wd, before, _sent, _tags = delivered
    assert {p.name: sha256_file(p) for p in wd.assets.iterdir() if p.name in before} == before


def test_a_multi_page_tiff_is_refused_naming_its_pages_and_what_to_do(tmp_path):
    source, assets = tmp_path / "source", tmp_path / "assets"
    source.mkdir(), assets.mkdir()
    shutil.copy(CORPUS / "multipage.tiff", source / "scan.tiff")  # Pillow's three-page test TIFF
    report = ingest(source, assets)
    reason = report.rejected["scan.tiff"]
    assert reason.startswith("a multi-page TIFF (3 pages): which page is the picture cannot be told")
    assert "save the page you mean" in what_to_do(reason) and not list(assets.iterdir())


def test_a_heic_without_its_optional_reader_is_refused_naming_what_to_install(tmp_path, monkeypatch):
    """The extra is installed here or not; its absence is made by taking Pillow's HEIF opener away."""
    from tasks.images import formats

    monkeypatch.setattr(formats, "HEIF_READER", False)
    monkeypatch.setattr(Image, "ID", [i for i in Image.ID if i != "HEIF"])
    source, assets = tmp_path / "source", tmp_path / "assets"
    source.mkdir(), assets.mkdir()
    shutil.copy(CORPUS / "zPug_3.heic", source / "IMG_0001.HEIC")
    reason = ingest(source, assets).rejected["IMG_0001.HEIC"]
    assert reason.startswith("a HEIC/HEIF picture, and its reader is an optional extra not installed")
    assert "pip install 'prefect-microstock[heif]'" in reason and "GPL-2" in reason
    assert "install the extra" in what_to_do(reason)


@pytest.mark.skipif(not HEIF_READER, reason="HEIC is read through the optional extra pillow-heif")
def test_a_heic_recorded_as_turned_is_delivered_upright_turned_once(tmp_path):
    """pillow-heif turns the pixels itself and reports EXIF Orientation 1: the upload-ready copy must not turn them
    a second time by the orientation the file's EXIF still records (6: turn 90° clockwise)."""
    from tasks.core.settings import PackSettings
    from tasks.images.ready import ready_jpeg

    picture = Image.new("RGB", (200, 100), (200, 0, 0))
    picture.paste((0, 0, 200), (0, 0, 50, 50))  # a blue square top left
    exif = Image.Exif()
    exif[0x0112] = 6
    picture.save(tmp_path / "IMG_0002.HEIC", format="HEIF", exif=exif.tobytes(), quality=90)
    ready = ready_jpeg(tmp_path / "IMG_0002.HEIC", PackSettings())
    (tmp_path / "ready.jpg").write_bytes(ready.jpeg)
    with Image.open(tmp_path / "ready.jpg") as out:
        assert out.size == (100, 200) and out.getexif().get(0x0112) in (None, 1)
        r, _g, b = out.getpixel((80, 10))  # the blue square is top right once turned clockwise
        assert b > 150 and r < 60
