"""What the contributor's file already says, and what of it the upload-ready copy keeps.

Reading (:func:`read_embedded`): title, description and keywords from XMP,
then IPTC IIM, then EXIF (a camera's default caption, "OLYMPUS DIGITAL CAMERA",
counts as none: :mod:`tasks.images.boilerplate`), each block read on its own, so a damaged one is
skipped with a note and never discards what the others hold (a corrupt EXIF
block leaves the XMP title; Latin-1 IIM is read as Latin-1,
:mod:`tasks.images.iim`). Reading never raises for content.

Keeping (:func:`kept_segments`): the source's XMP packet and IIM block go into
the upload-ready JPEG as they are — creator, rights, credit, source, location,
instructions, By-line, Copyright Notice, every field the project does not own —
the IIM re-encoded as UTF-8 (1:90 says so), a Photoshop block split over
several APP13 segments carried whole (split again the same way). Extended XMP
(the ``xmpNote:HasExtendedXMP`` segments a packet over 64 KB continues in) is
not carried: the main packet is, without its pointer to them. :func:`tasks.images.embed.embed_metadata`
then replaces only the fields the project owns. The XMP's ``tiff:Orientation``
always goes (the pixels are made upright). With ``strip_location`` the XMP's
GPS coordinates go, as the EXIF GPS block does (place names stay).
"""

from __future__ import annotations

import logging
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from tasks.images import iim
from tasks.images.boilerplate import is_boilerplate
from tasks.images.inspect import WARNINGS_LOCK
from tasks.images.jpeg_segments import app_segment, metadata_segments

log = logging.getLogger(__name__)

XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"
_APP1, _APP13 = 0xE1, 0xED
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_IMAGE_DESCRIPTION, _SOFTWARE = 0x010E, 0x0131


def _xmp_property(name: bytes) -> re.Pattern[bytes]:
    """One XMP property ``name`` (``prefix:Name``), as an element or an attribute, with the space before it."""
    return re.compile(rb"\s*<" + name + rb"(?:\s[^>]*)?(?:/>|>.*?</" + name + rb">)|\s+" + name
                      + rb"""=(?:"[^"]*"|'[^']*')""", re.DOTALL)


#: XMP GPS properties (``exif:GPSLatitude`` …), as elements or as attributes.
_GPS_XMP = re.compile(rb'\s*<exif:GPS\w+(?:\s[^>]*)?(?:/>|>.*?</exif:GPS\w+>)|\s+exif:GPS\w+="[^"]*"', re.DOTALL)
#: XMP ``tiff:Orientation`` (Bridge, Lightroom, digiKam, PNG editors write it), as an element or an attribute:
#: the upload-ready pixels are upright, so no orientation may stay for a reader to apply a second time.
_ORIENTATION_XMP = _xmp_property(rb"tiff:Orientation")
#: The main packet's pointer to extended XMP, which is not carried (the module says why).
_EXTENDED_XMP = _xmp_property(rb"xmpNote:HasExtendedXMP")


@dataclass
class Embedded:
    """The words already in a file, and a note for each block that could not be read."""

    title: str = ""
    description: str = ""
    keywords: list[str] = field(default_factory=list)
    #: EXIF ``Software`` (the offline generator marks its images there).
    software: str = ""
    notes: list[str] = field(default_factory=list)


def _xmp_fields(packet: bytes) -> tuple[str, str, list[str]]:
    root = ET.fromstring(packet.strip(b"\x00 \r\n\t"))
    title = description = ""
    keywords: list[str] = []
    for desc in root.iter(f"{_RDF}Description"):
        for prop in desc:
            items = [li for li in prop.iter(f"{_RDF}li")]
            if prop.tag in (f"{_DC}title", f"{_DC}description"):
                chosen = next((li for li in items if li.get(_XML_LANG) == "x-default"), items[0] if items else None)
                text = (chosen.text if chosen is not None else prop.text) or ""
                if prop.tag == f"{_DC}title":
                    title = title or text.strip()
                else:
                    description = description or text.strip()
            elif prop.tag == f"{_DC}subject":
                keywords += [li.text.strip() for li in items if li.text and li.text.strip()]
    return title, description, keywords


def _split(values: list[str]) -> list[str]:
    """IIM keywords: one dataset each, or (older tools) all of them in one, separated by commas or semicolons."""
    out = []
    for v in values:
        out += [k.strip() for k in re.split(r"[,;]", v) if k.strip()] if len(values) == 1 else [v]
    return [k for k in out if k]


def _caption(text: str, notes: list[str]) -> str:
    """``text`` stripped, or "" (with a note) when it is a camera's default caption."""
    if is_boilerplate(text):
        notes.append(f"{text.strip()!r} is the caption the camera writes by default: counted as none")
        return ""
    return text.strip()


def read_embedded(path: Path) -> Embedded:
    """Title, description and keywords embedded in ``path`` (XMP, then IIM, then EXIF), notes for damage."""
    found = Embedded()
    try:
        data = path.read_bytes()
    except OSError as exc:
        found.notes.append(f"cannot read the file ({exc.strerror or exc})")
        return found
    packet = b""
    segments = metadata_segments(data)
    for marker, payload in segments:
        if marker == _APP1 and payload.startswith(XMP_HEADER) and not packet:  # the first: extended XMP is not read
            packet = payload[len(XMP_HEADER):]
    photoshop = iim.photoshop_block([payload for marker, payload in segments if marker == _APP13])
    iim_block = next((r.data for r in iim.resources(photoshop) if r.id == iim.IIM_RESOURCE), b"")
    exif_text = ""
    try:
        with WARNINGS_LOCK, warnings.catch_warnings(record=True) as caught, Image.open(path) as im:
            warnings.simplefilter("always")
            packet = packet or (im.info.get("XML:com.adobe.xmp") or im.info.get("xmp") or b"")
            exif = im.getexif()
            exif_text, found.software = str(exif.get(_IMAGE_DESCRIPTION) or ""), str(exif.get(_SOFTWARE) or "")
        if any("EXIF" in str(w.message) for w in caught):
            found.notes.append("the EXIF block is corrupt: ignored (the pixels and the other metadata are used)")
    except Exception as exc:  # Pillow's many ways of refusing a damaged EXIF: the other blocks still count
        found.notes.append(f"the EXIF block could not be read ({type(exc).__name__}): ignored")
    if isinstance(packet, str):
        packet = packet.encode("utf-8")
    if packet:
        try:
            found.title, found.description, found.keywords = _xmp_fields(packet)
        except ET.ParseError as exc:
            found.notes.append(f"the XMP packet is not well-formed XML ({exc}): ignored")
    if iim_block:
        fields = iim.text_fields(iim.datasets(iim_block))
        found.title = found.title or next(iter(fields.get((2, 5), [])), "")
        found.description = found.description or next(iter(fields.get((2, 120), [])), "")
        found.keywords = found.keywords or _split(fields.get((2, 25), []))
    found.title, found.description = _caption(found.title, found.notes), _caption(found.description, found.notes)
    found.description = found.description or _caption(exif_text, found.notes)
    for note in found.notes:
        log.info("%s: %s", path.name, note)
    return found


def _xmp_segment(packet: bytes | str, strip_location: bool) -> bytes | None:
    if isinstance(packet, str):
        packet = packet.encode("utf-8")
    packet = _EXTENDED_XMP.sub(b"", _ORIENTATION_XMP.sub(b"", packet))
    if strip_location:
        packet = _GPS_XMP.sub(b"", packet)
    try:
        ET.fromstring(packet.strip(b"\x00 \r\n\t"))
        return app_segment(_APP1, XMP_HEADER + packet)
    except (ET.ParseError, ValueError):
        return None  # broken or too big for one segment: not carried (exiv2 could not add the project's fields)


def kept_segments(data: bytes, info_xmp: bytes | str | None, strip_location: bool) -> list[bytes]:
    """The source's XMP and IIM as upload-ready JPEG segments (see the module); [] when it has none.

    ``data`` is the source's bytes (a JPEG's segments are read from it);
    ``info_xmp`` the packet Pillow found elsewhere (a PNG's ``iTXt``).
    """
    out: list[bytes] = []
    xmp_seen = False
    segments = metadata_segments(data)
    for marker, payload in segments:
        if marker == _APP1 and payload.startswith(XMP_HEADER) and not xmp_seen:
            xmp_seen = True
            segment = _xmp_segment(payload[len(XMP_HEADER):], strip_location)
            if segment:
                out.append(segment)
    photoshop = iim.photoshop_block([payload for marker, payload in segments if marker == _APP13])
    kept = [r for r in iim.resources(photoshop) if r.id != iim.IIM_DIGEST]
    for i, r in enumerate(kept):
        if r.id == iim.IIM_RESOURCE:
            kept[i] = iim.Resource(r.id, r.name, iim.encode_datasets(iim.as_utf8(iim.datasets(r.data))))
    out += [app_segment(_APP13, payload) for payload in iim.app13_payloads(kept)]  # split again when large
    if info_xmp and not xmp_seen:
        segment = _xmp_segment(info_xmp, strip_location)
        if segment:
            out.append(segment)
    return out
