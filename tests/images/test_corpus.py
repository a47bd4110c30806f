"""Files that cameras, phones and editing tools made (tests/images/corpus/README.md), through the upload-ready path
(issue 37): read back with exiftool and exiv2, the independent readers. exiftool starts twice for the whole module:
once to make the edited copies a case needs, once to read every delivered file; exiv2 once, to read them all."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageOps, ImageStat

from tasks.core.errors import BadInput
from tasks.core.records import Asset
from tasks.core.settings import PackSettings
from tasks.images.boilerplate import is_boilerplate
from tasks.images.camera_colour import ADOBE_RGB_COMPATIBLE
from tasks.images.contributor_meta import read_embedded
from tasks.images.embed import embed_metadata
from tasks.images.inspect import inspect_image
from tasks.images.jpeg_segments import metadata_segments
from tasks.images.mpf import left_out
from tasks.images.ready import ready_jpeg
from tasks.stages.assets import gather
from tasks.stages.ingest_report import write_ingest_report
from tasks.stages.offline_describer import OfflineDescriber

CORPUS = Path(__file__).parent / "corpus"
#: Pillow says so of the Nintendo 3DS file with a damaged MPF index; the test says what it means instead.
pytestmark = pytest.mark.filterwarnings("ignore:Image appears to be a malformed MPO file")
FLOWER = CORPUS / "flower.jpg"  # Canon PowerShot S40, 480×360, EXIF Orientation 1

#: Contacts enough for a Photoshop block over one APP13 segment (exiftool splits it in two, as Photoshop does): a field
#: the project does not own (supplemental categories, a copy of the keywords, go: tests/stages/test_pack_names.py).
CONTACTS = [f"contact {i:04d} of the set" for i in range(2600)]
#: Edited copies: name -> (corpus file, exiftool arguments); exiftool writes EXIF text as UTF-8.
EDITED = {
    "flower_words.jpg": ("flower.jpg", ["-Artist=José Müller", "-Copyright=© 2024 José Müller", "-Model=测试-相机",
                                        "-LensModel=Objektiv Ä", "-XMP-dc:Creator=José Müller",
                                        "-IPTC:CodedCharacterSet=UTF8", "-IPTC:By-line=José Müller"]),
    "flower_xmp_turned.jpg": ("flower.jpg", ["-XMP-tiff:Orientation#=6"]),  # EXIF says upright: EXIF wins (MWG)
    "flower_xmp_only.jpg": ("flower.jpg", ["-EXIF:Orientation=", "-XMP-tiff:Orientation#=8"]),  # only XMP: turned
    "flower_time.jpg": ("flower.jpg", [f"-IPTC<={CORPUS / 'xmp_test.iptc'}"]),  # a Canon's IIM, no time zone
    "flower_adobe_rgb.jpg": ("flower.jpg", ["-EXIF:ColorSpace#=65535", "-InteropIndex=R03"]),  # as a camera set so
    "iptc_split.jpg": ("iptc.jpg", ["-m", *(f"-IPTC:Contact+={c}" for c in CONTACTS)]),
}
#: The description the project embeds: EXIF, XMP and IPTC must say it alike, accents included.
DESCRIPTION = "Une fleur rouge, décrite à Zürich"
#: Corpus files delivered as they are.
DELIVERED = ["frozenpond.mpo", "sugarshack_bad_mpo_header.jpg", "hopper_orientation_6.jpg", "empty_gps_ifd.jpg",
             "xmp_tags_orientation_exiftool.png", "pil_sample_cmyk.jpg", "iptc.jpg", "broken_exif_dpi.jpg",
             "photoshop-200dpi.jpg", "truncated_exif_dpi.jpg", "flower.jpg"]


def _exiftool(args: list[str]) -> str:
    if shutil.which("exiftool") is None:
        pytest.fail("exiftool is not installed: `make test` installs it (Debian's libimage-exiftool-perl)")
    return subprocess.run(["exiftool", *args], capture_output=True, text=True, check=True).stdout


def _exiv2(paths: list[Path]) -> dict[str, dict[str, str]]:
    """Path -> key -> value of every Exif, IPTC and XMP key exiv2 reads (``-PEIXkv``: raw values; the first of a
    repeated key), in one exiv2 run for every file."""
    if shutil.which("exiv2") is None:
        pytest.fail("exiv2 is not installed: `make test` installs it (Debian's exiv2)")
    out = subprocess.run(["exiv2", "-q", "-PEIXkv", *map(str, paths)], capture_output=True, text=True,
                         errors="replace").stdout
    found: dict[str, dict[str, str]] = {str(p): {} for p in paths}
    for line in out.splitlines():
        path, key, *value = line.split(maxsplit=2)
        found[path].setdefault(key, value[0] if value else "")
    return found


@pytest.fixture(scope="module")
def delivered(tmp_path_factory) -> dict[str, dict]:
    """Source name -> every tag exiftool reads in its upload-ready JPEG (``-G1 -a``), ``path`` to it, and under
    ``exiv2`` every key exiv2 reads there."""
    root = tmp_path_factory.mktemp("corpus")
    args: list[str] = []
    for name, (source, edits) in EDITED.items():
        args += ["-q", "-o", str(root / name), *edits, str(CORPUS / source), "-execute"]
    _exiftool(args[:-1])
    split = [p for m, p in metadata_segments((root / "iptc_split.jpg").read_bytes()) if m == 0xED]
    assert len(split) == 2, "the edited copy must hold a Photoshop block split over two APP13 segments"
    sources = [CORPUS / n for n in DELIVERED] + [root / n for n in EDITED]
    out = root / "out"
    out.mkdir()
    for source in sources:
        ready = ready_jpeg(source, PackSettings())
        jpeg = embed_metadata(ready.jpeg, "A title", DESCRIPTION, ["one", "two"], name=source.name)
        (out / f"{source.name}.jpg").write_bytes(jpeg)
    read = json.loads(_exiftool(["-j", "-G1", "-a", *sorted(map(str, out.iterdir()))]))
    seen = _exiv2(sorted(out.iterdir()))
    return {Path(tags["SourceFile"]).name.removesuffix(".jpg"):
            {**tags, "path": tags["SourceFile"], "exiv2": seen[tags["SourceFile"]]} for tags in read}


def test_a_jpeg_with_an_mpf_index_delivers_its_primary_image_as_an_ordinary_jpeg(delivered):
    for name in ("frozenpond.mpo", "sugarshack_bad_mpo_header.jpg"):  # Nintendo 3DS: two views; a damaged index
        tags = delivered[name]
        assert tags["File:FileType"] == "JPEG"
        assert not [k for k in tags if k.startswith(("MPF", "MPImage"))], name
        with Image.open(tags["path"]) as im:
            assert (im.format, getattr(im, "n_frames", 1), im.size) == ("JPEG", 1, (640, 480))
    assert "lists 2 images" in left_out(CORPUS / "frozenpond.mpo")
    assert "the 1 other" in left_out(CORPUS / "frozenpond.mpo")
    assert "cannot be read" in left_out(CORPUS / "sugarshack_bad_mpo_header.jpg")
    assert left_out(FLOWER) is None


def test_only_a_file_with_no_usable_primary_image_is_refused_saying_so():
    # A Pixel 6 Ultra HDR file cut short in Pillow's tests: its gain map is listed, its primary image is truncated.
    with pytest.raises(BadInput, match="its primary image is unusable, so there is nothing to deliver"):
        inspect_image(CORPUS / "ultrahdr.jpg", min_pixels=0)


def test_orientation_is_in_one_place_after_the_pixels_are_upright(delivered):
    for name in [*DELIVERED, *EDITED]:
        tags = delivered[name]
        assert not [k for k in tags if k.endswith(":Orientation")], name  # EXIF, XMP, any other group
        assert not [k for k in tags["exiv2"] if k.endswith(".Orientation")], name  # the second reader agrees
        with Image.open(tags["path"]) as im:
            turned = ImageOps.exif_transpose(im)
            assert (turned.size, turned.tobytes()) == (im.size, im.tobytes()), name
    with Image.open(delivered["flower_xmp_only.jpg"]["path"]) as only_xmp, \
            Image.open(delivered["flower_xmp_turned.jpg"]["path"]) as exif_wins:
        assert (only_xmp.size, exif_wins.size) == ((360, 480), (480, 360))


def test_non_ascii_exif_text_reads_back_as_written_and_xmp_and_iptc_agree(delivered):
    tags = delivered["flower_words.jpg"]
    assert tags["IFD0:Artist"] == tags["XMP-dc:Creator"] == tags["IPTC:By-line"] == "José Müller"
    assert tags["IFD0:Copyright"] == "© 2024 José Müller"
    assert (tags["IFD0:Make"], tags["IFD0:Model"]) == ("Canon", "测试-相机")
    assert tags["ExifIFD:LensModel"] == "Objektiv Ä"
    assert tags["IFD0:ImageDescription"] == tags["IPTC:Caption-Abstract"] == tags["XMP-dc:Description"] == DESCRIPTION
    seen = tags["exiv2"]  # the second reader reads the same characters
    assert seen["Exif.Image.Artist"] == seen["Iptc.Application2.Byline"] == "José Müller"
    assert (seen["Exif.Image.Copyright"], seen["Exif.Image.Model"]) == ("© 2024 José Müller", "测试-相机")
    assert seen["Exif.Image.ImageDescription"] == seen["Iptc.Application2.Caption"] == DESCRIPTION



def test_iptc_is_carried_as_written_a_split_photoshop_block_whole_and_no_time_zone_invented(delivered):
    split = delivered["iptc_split.jpg"]
    assert split["IPTC:Contact"] == CONTACTS  # the tail in the second segment included
    assert (split["IPTC:City"], split["IPTC:Country-PrimaryLocationName"]) == ("Budapest", "Hungary")
    assert split["IPTC:Keywords"] == split["XMP-dc:Subject"] == ["one", "two"]
    timed = delivered["flower_time.jpg"]
    assert (timed["IPTC:TimeCreated"], timed["IPTC:DigitalCreationTime"]) == ("13:27:23", "13:27:23")
    assert timed["IPTC:DateCreated"] == "2018:10:27"


def _saturation(path: str) -> float:
    with Image.open(path) as im:
        return ImageStat.Stat(im.convert("HSV")).mean[1]


def test_in_camera_adobe_rgb_is_converted_and_colour_space_says_srgb(delivered):
    if not ADOBE_RGB_COMPATIBLE.is_file():
        pytest.fail(f"{ADOBE_RGB_COMPATIBLE} is missing: `make test` installs Debian's icc-profiles-free")
    adobe, plain = delivered["flower_adobe_rgb.jpg"], delivered["flower.jpg"]
    for tags in (adobe, plain):
        assert (tags["ExifIFD:ColorSpace"], tags["ICC_Profile:ProfileDescription"]) == ("sRGB", "sRGB built-in")
        assert "InteropIFD:InteropIndex" not in tags  # it named the camera's colour space, not the file's
    # The same pixels read as Adobe RGB and converted come out more saturated than when taken for sRGB.
    assert _saturation(adobe["path"]) > 1.1 * _saturation(plain["path"])


def test_every_rejected_file_is_in_reports_with_its_real_cause_and_what_to_do(tmp_path, workdir):
    source = tmp_path / "card"
    source.mkdir()
    for name in ("unknown_compression_method.png", "png_decompression_dos.png", "ultrahdr.jpg", "iptc.jpg",
                 "frozenpond.mpo"):
        shutil.copy(CORPUS / name, source / name)
    gathered = gather(workdir.assets, 0, source, [], 0, make=None, unusable=lambda assets: {})
    write_ingest_report(workdir, gathered)
    report = json.loads((workdir.reports / "ingest.json").read_text(encoding="utf-8"))
    rows = {row["file"]: row for row in report["rejected"]}
    assert sorted(rows) == sorted(p.name for p in source.iterdir())  # the 0.3 MP Nokia photo too: too small
    assert rows["unknown_compression_method.png"]["reason"].startswith("PNG uses an unknown compression method")
    assert rows["png_decompression_dos.png"]["reason"].startswith("decompression bomb refused")
    assert rows["ultrahdr.jpg"]["reason"].startswith("its primary image is unusable")
    assert rows["iptc.jpg"]["reason"].startswith("too small")
    assert rows["frozenpond.mpo"]["reason"].startswith("too small")  # read like any JPEG: only its size is short
    assert "upscale_to_minimum" in rows["iptc.jpg"]["what_to_do"]
    assert rows["unknown_compression_method.png"]["what_to_do"] == "re-save it as PNG or JPEG from an image editor"
    assert all(row["what_to_do"] for row in rows.values())


def test_a_cameras_default_caption_counts_as_no_caption(tmp_path):
    source = tmp_path / "harbour_at_dusk.jpg"
    _exiftool(["-q", "-o", str(source), "-ImageDescription=OLYMPUS DIGITAL CAMERA         ",
               "-XMP-dc:Description=olympus  digital camera", str(FLOWER)])  # padded as an Olympus pads it
    found = read_embedded(source)
    assert (found.title, found.description) == ("", "")
    assert any("the caption the camera writes by default" in note for note in found.notes)
    meta = OfflineDescriber().describe(Asset(name=source.name, asset_id="0" * 64, path=source))
    assert (meta.title, meta.keywords) == ("Harbour dusk", ["harbour", "dusk"])  # from the file name
    assert not is_boilerplate("An Olympus digital camera on a table")  # a real caption that mentions one


def test_an_mpo_above_the_minimum_is_ingested_and_the_report_names_what_its_copy_leaves_out(tmp_path, workdir):
    """Every corpus MPO is below every agency's minimum: this one is the Nintendo 3DS file's two views at 1920×1440
    (2.8 MP), written as an MPO by Pillow (an MPF index listing both), so ingest takes it and must say so."""
    source = tmp_path / "card"
    source.mkdir()
    with Image.open(CORPUS / "frozenpond.mpo") as im:
        views = []
        for frame in range(im.n_frames):
            im.seek(frame)
            views.append(im.convert("RGB").resize((1920, 1440)))
    views[0].save(source / "pond_3d.jpg", "MPO", save_all=True, append_images=views[1:], quality=90)
    assert "lists 2 images" in (left_out(source / "pond_3d.jpg") or "")  # the index Pillow wrote lists both
    gathered = gather(workdir.assets, 0, source, [], 0, make=None, unusable=lambda assets: {})
    write_ingest_report(workdir, gathered)
    report = json.loads((workdir.reports / "ingest.json").read_text(encoding="utf-8"))
    assert report["rejected"] == [] and gathered.new == ["pond_3d.jpg"]
    [row] = report["left_out"]
    assert row["file"] == "pond_3d.jpg"
    assert "lists 2 images" in row["what"] and "the 1 other" in row["what"] and "is left out" in row["what"]
    delivered = ready_jpeg(workdir.assets / "pond_3d.jpg", PackSettings())
    assert (delivered.width, delivered.height) == (1920, 1440)
    assert not [m for m, p in metadata_segments(delivered.jpeg) if p.startswith(b"MPF\x00")]
