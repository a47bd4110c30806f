"""The contributor's own metadata: read whatever its age or damage (issue 25, point 3), kept in the upload-ready
JPEG with only the project's fields replaced and EXIF in step (point 4). Read back with exiftool."""

from __future__ import annotations

import json
import shutil
import subprocess
from io import BytesIO

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from tasks.core.records import Asset
from tasks.core.settings import PackSettings
from tasks.images import iim
from tasks.images.contributor_meta import read_embedded
from tasks.images.embed import embed_metadata
from tasks.images.ready import ready_jpeg
from tasks.stages.offline_describer import OfflineDescriber
from tests.fakes.photo_library import (
    LEGACY_IIM,
    LIGHTHOUSE_IIM,
    LIGHTHOUSE_XMP,
    corrupt_exif_segment,
    exif_with,
    iim_segment,
    jpeg,
    picture,
    xmp_segment,
)

SMALL = (64, 48)
AI = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"


def exiftool(data: bytes, tmp_path) -> dict:
    """Every tag exiftool finds, as ``group:name`` (``-G1``), duplicates included (``-a``)."""
    if shutil.which("exiftool") is None:
        pytest.fail("exiftool is not installed: `make test` installs it (Debian's libimage-exiftool-perl)")
    path = tmp_path / "read.jpg"
    path.write_bytes(data)
    out = subprocess.run(["exiftool", "-j", "-G1", "-a", str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def describe(tmp_path, data: bytes, name: str = "photo.jpg"):
    path = tmp_path / name
    path.write_bytes(data)
    return OfflineDescriber().describe(Asset(name=name, asset_id="0" * 64, path=path))


def test_latin1_iim_without_a_charset_is_read_as_latin1(tmp_path):
    """Regression: the offline describer failed with UnicodeDecodeError and the photo was parked."""
    meta = describe(tmp_path, jpeg(1, iim_segment(LEGACY_IIM, encoding="latin-1", declare=False), size=SMALL))
    assert meta.title == "Café crème on a zinc bar"
    assert meta.keywords[:2] == ["café", "crème"]


def test_cp1252_and_a_false_utf8_declaration_are_read_too():
    euro = [(2, 5, "Price 5 € only")]
    assert iim.text_fields(iim.datasets(_block(euro, "cp1252")))[(2, 5)] == ["Price 5 € only"]
    lying = iim.datasets(_block([(2, 5, "Tête")], "latin-1", declare=True))  # says UTF-8, is Latin-1
    assert iim.text_fields(lying)[(2, 5)] == ["Tête"]


def _block(datasets, encoding, declare=False) -> bytes:
    segment = iim_segment(datasets, encoding=encoding, declare=declare)
    [resource] = iim.resources(segment[4:])
    return resource.data


def test_a_corrupt_exif_block_is_a_note_and_the_xmp_title_is_used(tmp_path):
    """Regression: exiv2 refused the whole file, so the photo was parked as bad_input (its pixels are fine)."""
    data = jpeg(2, corrupt_exif_segment(), xmp_segment(title="Red fishing boat", keywords=("boat", "red")),
                size=SMALL)
    (tmp_path / "boat.jpg").write_bytes(data)
    found = read_embedded(tmp_path / "boat.jpg")
    assert found.title == "Red fishing boat" and "EXIF block is corrupt" in found.notes[0]
    assert describe(tmp_path, data, "boat.jpg").title == "Red fishing boat"


def test_a_broken_xmp_packet_does_not_discard_the_iim_title(tmp_path):
    broken = b"\xff\xe1" + (len(b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta><oops>") + 2).to_bytes(2, "big") + \
        b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta><oops>"
    path = tmp_path / "x.jpg"
    path.write_bytes(jpeg(3, broken, iim_segment([(2, 5, "Harbour at night")]), size=SMALL))
    found = read_embedded(path)
    assert found.title == "Harbour at night" and "XMP" in found.notes[0]


def _ready(tmp_path, data: bytes, name="src.jpg", **embed) -> dict:
    path = tmp_path / name
    path.write_bytes(data)
    ready = ready_jpeg(path, PackSettings())
    out = embed_metadata(ready.jpeg, "New title", "A new description, écrite", ["harbour", "boat"], **embed)
    return exiftool(out, tmp_path)


CONTRIBUTORS = {
    "XMP-dc:Creator": "Ana Fotógrafa", "XMP-dc:Rights": "© 2026 Ana Fotógrafa, all rights reserved",
    "XMP-photoshop:Credit": "Ana Fotógrafa / Studio Norte", "XMP-photoshop:Source": "Studio Norte archive",
    "XMP-photoshop:City": "Porto", "XMP-photoshop:Instructions": "No use in political campaigns",
    "XMP-iptcCore:Location": "Porto harbour", "IPTC:By-line": "Ana Fotógrafa",
    "IPTC:CopyrightNotice": "© 2026 Ana Fotógrafa", "IPTC:Credit": "Studio Norte",
    "IPTC:Source": "Studio Norte archive",
}
OURS = {"XMP-dc:Title": "New title", "XMP-dc:Description": "A new description, écrite",
        "XMP-dc:Subject": ["harbour", "boat"], "IPTC:ObjectName": "New title",
        "IPTC:Caption-Abstract": "A new description, écrite", "IPTC:Keywords": ["harbour", "boat"],
        "IFD0:ImageDescription": "A new description, écrite"}


@pytest.mark.parametrize("orientation", [1, 6], ids=["kept pixels", "re-encoded"])
def test_the_contributors_fields_are_kept_only_ours_replaced_and_exif_in_step(tmp_path, orientation):
    """Regression: dc:creator, dc:rights, By-line and Copyright Notice were dropped, and EXIF ImageDescription
    kept the raw prompt while XMP said something else."""
    exif = Image.Exif()
    exif.load(exif_with("8k, --ar 4:3 --v 6", xp_title="raw title", xp_keywords="raw;tags"))
    exif[0x0112] = orientation
    tags = _ready(tmp_path, jpeg(4, xmp_segment(**LIGHTHOUSE_XMP), iim_segment(LIGHTHOUSE_IIM), exif=exif.tobytes(),
                                 size=SMALL))
    assert {k: tags.get(k) for k in CONTRIBUTORS} == CONTRIBUTORS
    assert {k: tags.get(k) for k in OURS} == OURS
    assert not [k for k in tags if k.startswith("IFD0:XP")], tags  # the Windows copies would contradict ours
    assert not [k for k in tags if "GPS" in k], tags  # strip_location: the XMP coordinates go like EXIF's
    assert "8k, --ar" not in json.dumps(tags)


def test_legacy_iim_is_kept_as_utf8_saying_so(tmp_path):
    tags = _ready(tmp_path, jpeg(5, iim_segment(LEGACY_IIM, encoding="latin-1", declare=False), size=SMALL))
    assert tags["IPTC:CodedCharacterSet"] == "UTF8"
    assert tags["IPTC:By-line"] == "Jürgen Müller" and tags["IPTC:CopyrightNotice"] == "© Jürgen Müller"
    assert tags["IPTC:Keywords"] == ["harbour", "boat"]  # ours, the old ones replaced


def test_a_pngs_xmp_is_kept_in_the_jpeg(tmp_path):
    info = PngInfo()
    packet = xmp_segment(creator="Ana Fotógrafa", rights="CC BY-NC")[4 + len(b"http://ns.adobe.com/xap/1.0/\x00"):]
    info.add_itxt("XML:com.adobe.xmp", packet.decode("utf-8"))
    buf = BytesIO()
    picture(6, SMALL).save(buf, "PNG", pnginfo=info)
    tags = _ready(tmp_path, buf.getvalue(), name="src.png")
    assert tags["XMP-dc:Creator"] == "Ana Fotógrafa" and tags["XMP-dc:Rights"] == "CC BY-NC"
    assert tags["XMP-dc:Title"] == "New title"


def test_the_contributors_own_ai_label_stays_when_the_project_sets_none(tmp_path):
    label = xmp_segment(title="x")[:-len(b"</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end='w'?>")]
    label += (f"<Iptc4xmpExt:DigitalSourceType xmlns:Iptc4xmpExt='http://iptc.org/std/Iptc4xmpExt/2008-02-29/'>"
              f"{AI}</Iptc4xmpExt:DigitalSourceType></rdf:Description></rdf:RDF></x:xmpmeta>"
              "<?xpacket end='w'?>").encode()
    label = label[:2] + (len(label) - 2).to_bytes(2, "big") + label[4:]
    tags = _ready(tmp_path, jpeg(7, label, size=SMALL))
    assert tags["XMP-iptcExt:DigitalSourceType"] == AI
