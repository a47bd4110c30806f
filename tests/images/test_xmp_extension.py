"""Extended XMP (issue 37 item 1): a packet over 64 KB that continues in ``http://ns.adobe.com/xmp/extension/``
segments is read and carried whole, edited like the main packet. The source is written by exiftool (an independent
writer: it moves the largest properties to the extension, as Lightroom's toolkit does) and read back by exiftool;
exiv2 0.27.6 reads the main packet only (it does not read extended XMP), so it checks that one."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from io import BytesIO
from pathlib import Path

import pytest
from PIL import Image, ImageOps
from PIL.PngImagePlugin import PngInfo

from tasks.core.records import Asset
from tasks.core.settings import PackSettings
from tasks.gemini.describer import image_for_model
from tasks.images.contributor_meta import read_embedded
from tasks.images.embed import embed_metadata
from tasks.images.jpeg_segments import metadata_segments
from tasks.images.ready import preview_jpegs, ready_jpeg
from tests.fakes.photo_library import jpeg, picture, segment

SMALL = (64, 48)
EXTENSION = b"http://ns.adobe.com/xmp/extension/\x00"
MAIN = b"http://ns.adobe.com/xap/1.0/\x00"
KEYWORDS = [f"keyword {i:04d} of the shoot" for i in range(1300)]
HIERARCHY = [f"places|harbour|pier {i:04d}" for i in range(1100)]
#: exiftool fills the main packet smallest property first, so these three (over the room left) go to the extension,
#: and photoshop:History (smaller) stays in the main packet with the rest.
FIX = "fix from the phone; " * 2300
HISTORY = "step; " * 3300


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: `make test` installs it (Debian's libimage-exiftool-perl, exiv2)")
    return found


def exiftool(path: Path) -> dict:
    """Every XMP tag exiftool reads (``-G1 -a``: duplicates too, main packet and extension alike; ``-m``: lists
    past 1000 items too), and its warnings (an incomplete or unnamed extension is one)."""
    out = subprocess.run([_tool("exiftool"), "-j", "-m", "-G1", "-a", "-struct", "-XMP:all", "-Warning", str(path)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def exiv2(path: Path) -> dict[str, str]:
    out = subprocess.run([_tool("exiv2"), "-q", "-PXkv", str(path)], capture_output=True, text=True).stdout
    return dict((line.split(maxsplit=1) + [""])[:2] for line in out.splitlines())


@pytest.fixture(scope="module")
def lightroom(tmp_path_factory) -> Path:
    """A photo with a ~150 KB extended XMP, written by exiftool."""
    root = tmp_path_factory.mktemp("extended")
    (root / "plain.jpg").write_bytes(jpeg(3, size=SMALL))
    args = [f"-XMP-dc:Subject={k}" for k in KEYWORDS] + [f"-XMP-lr:HierarchicalSubject={h}" for h in HIERARCHY]
    args += [f"-XMP-exif:GPSProcessingMethod={FIX}", f"-XMP-photoshop:History={HISTORY}",
             "-XMP-exif:GPSLatitude=51.5 N", "-XMP-exif:GPSLongitude=0.12 W", "-XMP-dc:Title=Pier at dawn",
             "-XMP-dc:Creator=José Müller", "-XMP-dc:Rights=© 2026 José Müller", "-XMP-tiff:Orientation#=1"]
    (root / "args.txt").write_text("\n".join(args) + "\n", encoding="utf-8")
    subprocess.run([_tool("exiftool"), "-q", "-@", str(root / "args.txt"), "-o",
                    str(root / "pier.jpg"), str(root / "plain.jpg")], check=True)
    path = root / "pier.jpg"
    parts = _parts(path.read_bytes())
    assert len(parts) >= 2 and 140_000 < parts[0][1] < 200_000, "exiftool must have written a ~150 KB extension"
    return path


def _parts(data: bytes) -> list[tuple[str, int, int, bytes]]:
    """(GUID, full length, offset, portion) of each extension segment, read here on their own."""
    n = len(EXTENSION)
    return [(p[n:n + 32].decode(), int.from_bytes(p[n + 32:n + 36], "big"), int.from_bytes(p[n + 36:n + 40], "big"),
             p[n + 40:]) for m, p in metadata_segments(data) if m == 0xE1 and p.startswith(EXTENSION)]


def _extension_is_sound(data: bytes) -> bytes:
    """The extended packet of ``data``, after checking its layout: portions in order, full, GUID = its MD5, and the
    main packet names it."""
    parts = _parts(data)
    whole = b"".join(p for _, _, _, p in sorted(parts, key=lambda p: p[2]))
    [guid] = {g for g, _, _, _ in parts}
    assert {full for _, full, _, _ in parts} == {len(whole)}
    assert [off for _, _, off, _ in parts] == sorted(off for _, _, off, _ in parts)
    assert all(len(p) <= 65458 for _, _, _, p in parts)
    assert guid == hashlib.md5(whole).hexdigest().upper()
    [main] = [p for m, p in metadata_segments(data) if m == 0xE1 and p.startswith(MAIN)]
    assert guid.encode() in main
    return whole


def test_keywords_in_the_extension_are_read(lightroom):
    found = read_embedded(lightroom)
    assert found.title == "Pier at dawn"  # from the main packet
    assert found.keywords == KEYWORDS  # the main packet has none: all 1300 from the extension, in order
    assert found.notes == []


def test_the_kept_copy_carries_the_extension_whole_without_gps_or_orientation(lightroom, tmp_path):
    for strip in (True, False):
        out = tmp_path / f"kept-{strip}.jpg"
        out.write_bytes(ready_jpeg(lightroom, PackSettings(strip_location=strip)).jpeg)
        tags = exiftool(out)
        assert "ExifTool:Warning" not in tags  # exiftool found the extension the main packet names, complete
        assert tags["XMP-dc:Subject"] == KEYWORDS and tags["XMP-lr:HierarchicalSubject"] == HIERARCHY
        assert (tags["XMP-dc:Title"], tags["XMP-dc:Creator"]) == ("Pier at dawn", ["José Müller"])
        assert tags["XMP-photoshop:History"] == HISTORY
        assert not [k for k in tags if k.endswith(":Orientation")]
        gps = sorted(k for k in tags if k.startswith("XMP-exif:GPS"))
        if strip:  # from the main packet (latitude, longitude) and from the extension (processing method)
            assert gps == []
        else:
            assert gps == ["XMP-exif:GPSLatitude", "XMP-exif:GPSLongitude", "XMP-exif:GPSProcessingMethod"]
        whole = _extension_is_sound(out.read_bytes())
        assert (b"GPSProcessingMethod" in whole) is not strip  # a new GUID: the extension changed
    assert "Xmp.tiff.Orientation" not in exiv2(tmp_path / "kept-True.jpg")


def test_the_packed_copy_keeps_the_extension_but_not_the_fields_the_project_writes(lightroom, tmp_path):
    ready = ready_jpeg(lightroom, PackSettings())
    out = tmp_path / "packed.jpg"
    out.write_bytes(embed_metadata(ready.jpeg, "Pier at dawn", "A wooden pier at dawn", ["pier", "dawn"]))
    tags = exiftool(out)
    assert "ExifTool:Warning" not in tags
    # One dc:subject, the project's: left in the extension, the old list would be merged over it (Adobe's toolkit).
    assert tags["XMP-dc:Subject"] == ["pier", "dawn"]
    # Lightroom's keyword hierarchy is another copy of the keywords: it goes, from the extension too (embed.py)
    assert "XMP-lr:HierarchicalSubject" not in tags and tags["XMP-photoshop:History"] == HISTORY
    assert tags["XMP-dc:Rights"] == "© 2026 José Müller"
    assert not [k for k in tags if k.endswith(":Orientation") or k.startswith("XMP-exif:GPS")]
    # what the extension held was keywords and their hierarchy: nothing is left of it, or only other properties
    whole = _extension_is_sound(out.read_bytes()) if _parts(out.read_bytes()) else b""
    assert b"dc:subject" not in whole and b"lr:hierarchicalSubject" not in whole
    seen = exiv2(out)  # the main packet, as exiv2 reads it
    assert seen["Xmp.dc.subject"] == "pier, dawn" and seen["Xmp.dc.creator"] == "José Müller"
    assert not [k for k in seen if k.endswith(".Orientation") or k.startswith("Xmp.exif.GPS")]


def test_an_extension_left_empty_by_the_edits_goes_with_its_pointer(tmp_path):
    main, extension = _pair(b"<exif:GPSLatitude>51,30.0N</exif:GPSLatitude><tiff:Orientation>6</tiff:Orientation>")
    source = tmp_path / "gps.jpg"
    source.write_bytes(jpeg(4, main, *extension, size=SMALL))
    before = exiftool(source)
    assert before["XMP-tiff:Orientation"] == "Rotate 90 CW" and "XMP-exif:GPSLatitude" in before  # read there
    out = tmp_path / "kept.jpg"
    ready = ready_jpeg(source, PackSettings())
    out.write_bytes(ready.jpeg)
    tags = exiftool(out)
    assert not [k for k in tags if k.endswith(":Orientation") or k.startswith("XMP-exif:GPS")]
    assert "XMP-xmpNote:HasExtendedXMP" not in tags and _parts(ready.jpeg) == []
    assert tags["XMP-dc:Title"] == "Harbour wall"


def _pair(properties: bytes, guid: str | None = None) -> tuple[bytes, list[bytes]]:
    """A main XMP segment (a title) naming an extension that holds ``properties``, as the specification lays it
    out (built here, in 100-byte portions, so that one file has several)."""
    packet = (b"<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>"
              b"<rdf:Description rdf:about='' xmlns:exif='http://ns.adobe.com/exif/1.0/'"
              b" xmlns:tiff='http://ns.adobe.com/tiff/1.0/'>" + properties
              + b"</rdf:Description></rdf:RDF></x:xmpmeta>")
    guid = guid or hashlib.md5(packet).hexdigest().upper()
    main = (b"<?xpacket begin='\xef\xbb\xbf' id='W5M0MpCehiHzreSzNTczkc9d'?><x:xmpmeta xmlns:x='adobe:ns:meta/'>"
            b"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description rdf:about=''"
            b" xmlns:dc='http://purl.org/dc/elements/1.1/' xmlns:xmpNote='http://ns.adobe.com/xmp/note/'"
            b" xmpNote:HasExtendedXMP='" + guid.encode() + b"'><dc:title><rdf:Alt><rdf:li xml:lang='x-default'>"
            b"Harbour wall</rdf:li></rdf:Alt></dc:title></rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end='w'?>")
    portions = [segment(0xE1, EXTENSION + guid.encode() + len(packet).to_bytes(4, "big") + at.to_bytes(4, "big")
                        + packet[at:at + 100]) for at in range(0, len(packet), 100)]
    return segment(0xE1, MAIN + main), portions[::-1]  # readers must take portions in any order


@pytest.mark.parametrize(("damage", "note"), [
    ("missing", "is incomplete"),
    ("digest", "its MD5 is"),
    ("named", "that the file does not have"),
])
def test_a_damaged_extension_is_a_note_and_the_main_packet_still_counts(tmp_path, caplog, damage, note):
    properties = b"<exif:UserComment>kept whole</exif:UserComment>"
    main, extension = _pair(properties, guid="0" * 32 if damage == "digest" else None)
    if damage == "missing":
        extension = extension[1:]
    if damage == "named":
        extension = []
    source = tmp_path / "damaged.jpg"
    source.write_bytes(jpeg(5, main, *extension, size=SMALL))
    found = read_embedded(source)
    assert found.title == "Harbour wall" and any(note in n for n in found.notes), found.notes
    out = tmp_path / "kept.jpg"
    caplog.clear()
    with caplog.at_level("INFO", logger="tasks.images.contributor_meta"):
        out.write_bytes(ready_jpeg(source, PackSettings()).jpeg)
    packing = [r.getMessage() for r in caplog.records if note in r.getMessage()]  # said when packing too …
    assert packing and all(m.startswith("damaged.jpg: ") for m in packing), packing  # … naming the photo
    tags = exiftool(out)
    assert tags["XMP-dc:Title"] == "Harbour wall" and "ExifTool:Warning" not in tags
    if damage == "digest":  # complete and well-formed: carried, under its true digest
        assert tags["XMP-exif:UserComment"] == "kept whole"
        _extension_is_sound(out.read_bytes())
    else:  # nothing whole to carry: neither the portions left nor a pointer to them
        assert "XMP-exif:UserComment" not in tags and "XMP-xmpNote:HasExtendedXMP" not in tags
        assert _parts(out.read_bytes()) == []


def _compact(properties: str) -> bytes:
    """A main packet serialized compact, without whitespace, as Adobe's toolkit writes one for a JPEG."""
    return ("<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?><x:xmpmeta xmlns:x='adobe:ns:meta/'>"
            "<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description rdf:about=''"
            " xmlns:dc='http://purl.org/dc/elements/1.1/' xmlns:lr='http://ns.adobe.com/lightroom/1.0/'"
            " xmlns:crs='http://ns.adobe.com/camera-raw-settings/1.0/' xmlns:photoshop='http://ns.adobe.com/photoshop/1.0/'>"
            "<dc:creator><rdf:Seq><rdf:li>José Müller</rdf:li></rdf:Seq></dc:creator>" + properties
            + "</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end='w'?>").encode("utf-8")


def test_a_full_compact_main_packet_gives_its_largest_property_to_the_extension(tmp_path):
    """Regression: a 60 KB compact main packet (one segment) made exiv2 refuse the file when it wrote the project's
    fields ("Size of XMP JPEG segment is larger than 65535 bytes"), so the photo could not be packed. What moves
    is what the specification says: Camera Raw settings, then photoshop:History, then the largest."""
    hierarchy = [f"p|{i}" for i in range(2700)]
    main = _compact("<crs:Exposure2012>+0.35</crs:Exposure2012><photoshop:History>cropped</photoshop:History>"
                    "<photoshop:Credit>Harbour Press</photoshop:Credit><lr:hierarchicalSubject><rdf:Bag>"
                    + "".join(f"<rdf:li>{h}</rdf:li>" for h in hierarchy) + "</rdf:Bag></lr:hierarchicalSubject>")
    assert 50_000 < len(main) < 65_000
    source = tmp_path / "full.jpg"
    source.write_bytes(jpeg(6, segment(0xE1, MAIN + main), size=SMALL))
    out = tmp_path / "packed.jpg"
    out.write_bytes(embed_metadata(ready_jpeg(source, PackSettings()).jpeg, "Pier", "A pier", ["pier"]))
    tags = exiftool(out)
    assert "ExifTool:Warning" not in tags and "XMP-lr:HierarchicalSubject" not in tags  # a keyword copy: goes
    assert (tags["XMP-crs:Exposure2012"], tags["XMP-photoshop:History"]) == ("+0.35", "cropped")
    whole = _extension_is_sound(out.read_bytes())
    assert all(p in whole for p in (b"crs:Exposure2012", b"photoshop:History"))
    seen = exiv2(out)  # the other properties stayed in the main packet, where every reader finds them
    assert seen["Xmp.dc.creator"] == "José Müller" and seen["Xmp.dc.subject"] == "pier"
    assert seen["Xmp.photoshop.Credit"] == "Harbour Press"
    assert not {"Xmp.lr.hierarchicalSubject", "Xmp.crs.Exposure2012", "Xmp.photoshop.History"} & set(seen)


def test_a_png_xmp_too_big_for_one_segment_is_carried_whole(tmp_path):
    """Regression: a PNG's 100 KB XMP (an iTXt chunk has no 64 KB limit) was left out of the upload-ready JPEG."""
    info = PngInfo()
    info.add_itxt("XML:com.adobe.xmp", _compact("<dc:subject><rdf:Bag>" + "".join(
        f"<rdf:li>{k}</rdf:li>" for k in KEYWORDS[:1000]) + "</rdf:Bag></dc:subject>").decode("utf-8"))
    for seed, name in enumerate(("first.png", "second.png")):
        picture(seed, SMALL).save(tmp_path / name, pnginfo=info)
    out = tmp_path / "kept.jpg"
    out.write_bytes(ready_jpeg(tmp_path / "first.png", PackSettings()).jpeg)
    tags = exiftool(out)
    assert tags["XMP-dc:Subject"] == KEYWORDS[:1000] and tags["XMP-dc:Creator"] == ["José Müller"]
    assert b"dc:subject" in _extension_is_sound(out.read_bytes())


def test_a_digital_source_type_in_the_extension_goes_only_when_the_project_writes_one(tmp_path):
    kind = "http://cv.iptc.org/newscodes/digitalsourcetype/"
    main, extension = _pair(b"<exif:UserComment>kept whole</exif:UserComment><Iptc4xmpExt:DigitalSourceType"
                            b" xmlns:Iptc4xmpExt='http://iptc.org/std/Iptc4xmpExt/2008-02-29/'>" + kind.encode()
                            + b"digitalCapture</Iptc4xmpExt:DigitalSourceType>")
    source = tmp_path / "camera.jpg"
    source.write_bytes(jpeg(7, main, *extension, size=SMALL))
    ready = ready_jpeg(source, PackSettings()).jpeg
    for given in (None, kind + "trainedAlgorithmicMedia"):
        out = tmp_path / f"packed-{bool(given)}.jpg"
        out.write_bytes(embed_metadata(ready, "Wall", "A harbour wall", ["wall"], digital_source_type=given))
        tags = exiftool(out)
        assert tags["XMP-iptcExt:DigitalSourceType"] == (given or kind + "digitalCapture")
        assert tags["XMP-exif:UserComment"] == "kept whole" and "ExifTool:Warning" not in tags
        assert (b"DigitalSourceType" in _extension_is_sound(out.read_bytes())) is (given is None)


def _difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference per channel value of two same-size RGB images (0–255)."""
    assert a.size == b.size
    return sum(abs(x - y) for x, y in zip(a.convert("RGB").tobytes(), b.convert("RGB").tobytes(), strict=True)) / (
        a.width * a.height * 3)


def test_an_orientation_only_in_the_extension_turns_the_pixels_and_no_reader_turns_them_again(tmp_path):
    """exiftool writes one rdf:Description per namespace and moves the largest ones to the extension: a tiff
    namespace bigger than the others (long Artist, Copyright, Make, Model) takes its Orientation along."""
    plain = tmp_path / "plain.jpg"
    plain.write_bytes(jpeg(5, size=SMALL))
    long = "x" * 9000  # each under exiftool's 10 kB for a property of its own description
    args = [f"-XMP-tiff:{tag}={tag} {long}" for tag in ("Artist", "Copyright", "Make", "Model")]
    args += ["-XMP-tiff:Orientation#=6", *(f"-XMP-{tag}={long}" for tag in (
        "dc:Title", "dc:Source", "dc:Rights", "photoshop:Headline", "photoshop:Instructions", "photoshop:Credit"))]
    source = tmp_path / "turned.jpg"
    subprocess.run([_tool("exiftool"), "-q", "-o", str(source), *args, str(plain)], check=True)
    whole = _extension_is_sound(source.read_bytes())
    assert b"tiff:Orientation" in whole and exiftool(source)["XMP-tiff:Orientation"] == "Rotate 90 CW"
    [main] = [p for m, p in metadata_segments(source.read_bytes()) if m == 0xE1 and p.startswith(MAIN)]
    assert b"Orientation" not in main  # only the extension records it: Pillow alone would not see it
    with Image.open(plain) as im:
        upright = im.transpose(Image.Transpose.ROTATE_270)  # what "Rotate 90 CW" asks of a reader
        wrong_way = im.transpose(Image.Transpose.ROTATE_90)
    out = tmp_path / "delivered.jpg"
    out.write_bytes(embed_metadata(ready_jpeg(source, PackSettings()).jpeg, "Pier", "A pier", ["pier"]))
    tags = exiftool(out)
    assert not [k for k in tags if k.endswith(":Orientation")]
    assert not [k for k in exiv2(out) if k.endswith(".Orientation")]
    with Image.open(out) as delivered:
        turned = ImageOps.exif_transpose(delivered)
        assert (turned.size, turned.tobytes()) == (delivered.size, delivered.tobytes())  # nothing left to apply
        assert delivered.size == (SMALL[1], SMALL[0])
        assert _difference(delivered, upright) < 4 < _difference(delivered, wrong_way)
    preview = Image.open(BytesIO(preview_jpegs(source, 640, 64).preview))
    assert preview.size == (SMALL[1], SMALL[0]) and _difference(preview, upright) < 4
    sent = Image.open(BytesIO(image_for_model(Asset(name=source.name, asset_id="0" * 64, path=source))))
    assert sent.size == (SMALL[1], SMALL[0]) and _difference(sent, upright) < 4  # what Gemini is shown, upright too
