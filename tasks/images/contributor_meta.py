"""What the contributor's file already says, and what of it the upload-ready copy keeps.

Reading (:func:`read_embedded`): title, description and keywords from XMP
(the main packet, then its extended XMP for what the main packet lacks), then
IPTC IIM, then EXIF (a camera's default caption, "OLYMPUS DIGITAL CAMERA",
counts as none: :mod:`tasks.images.boilerplate`), each block read on its own, so a damaged one is
skipped with a note and never discards what the others hold (a corrupt EXIF
block leaves the XMP title; Latin-1 IIM is read as Latin-1,
:mod:`tasks.images.iim`). Reading never raises for content.

Keeping (:func:`kept_segments`): the source's XMP packet and IIM block go into
the upload-ready JPEG as they are — creator, rights, credit, source, location,
instructions, By-line, Copyright Notice, every field the project does not own —
the IIM re-encoded as UTF-8 (1:90 says so), a Photoshop block split over
several APP13 segments carried whole (split again the same way), and so is
extended XMP (the segments a packet over 64 KB continues in,
:mod:`tasks.images.xmp_extension`): edited like the main packet, cut again under
its new GUID, named by the main packet. A main packet over 32 KiB (Adobe's
toolkit fills it to 65,000 bytes; a PNG's XMP has no limit) gives its largest
properties to the extension first (:func:`~tasks.images.xmp_extension.within_budget`):
exiv2 must still fit it in one segment after writing the project's fields.
:func:`tasks.images.embed.embed_metadata`
then replaces only the fields the project owns. The XMP's ``tiff:Orientation``
always goes, from the main packet and the extension alike (the pixels are made
upright). With ``strip_location`` the XMP's GPS coordinates go, as the EXIF GPS
block does (place names stay).
"""

from __future__ import annotations

import logging
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from tasks.core.printable import printable
from tasks.images import iim
from tasks.images.boilerplate import is_boilerplate
from tasks.images.inspect import WARNINGS_LOCK
from tasks.images.jpeg_segments import app_segment, metadata_segments
from tasks.images.xmp_extension import (
    POINTER_PROPERTY,
    XMP_HEADER,
    Extension,
    digest,
    extension_segments,
    has_properties,
    read_extension,
    with_pointer,
    within_budget,
    xmp_property,
)

log = logging.getLogger(__name__)

_APP1, _APP13 = 0xE1, 0xED
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_IMAGE_DESCRIPTION, _SOFTWARE = 0x010E, 0x0131


#: XMP GPS properties (``exif:GPSLatitude`` …), as elements or as attributes.
_GPS_XMP = re.compile(rb'\s*<exif:GPS\w+(?:\s[^>]*)?(?:/>|>.*?</exif:GPS\w+>)|\s+exif:GPS\w+="[^"]*"', re.DOTALL)
#: XMP ``tiff:Orientation`` (Bridge, Lightroom, digiKam, PNG editors write it), as an element or an attribute:
#: the upload-ready pixels are upright, so no orientation may stay for a reader to apply a second time.
_ORIENTATION_XMP = xmp_property(rb"tiff:Orientation")
#: The most a main packet holds in one segment (XMP Specification Part 3, JPEG: "at most 65502 bytes").
MAX_MAIN_PACKET = 65502


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
    segments = metadata_segments(data)
    packet = _main_packet(segments)
    extension = read_extension(segments, packet) if packet else Extension()
    found.notes += extension.notes
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
    if extension.packet:  # what the main packet lacks (Lightroom puts long keyword lists there)
        title, description, keywords = _xmp_fields(extension.packet)
        found.title, found.description = found.title or title, found.description or description
        found.keywords = found.keywords or keywords
    if iim_block:
        fields = iim.text_fields(iim.datasets(iim_block))
        found.title = found.title or next(iter(fields.get((2, 5), [])), "")
        found.description = found.description or next(iter(fields.get((2, 120), [])), "")
        found.keywords = found.keywords or _split(fields.get((2, 25), []))
    found.title, found.description = _caption(found.title, found.notes), _caption(found.description, found.notes)
    found.description = found.description or _caption(exif_text, found.notes)
    for note in found.notes:
        log.info("%s: %s", printable(path.name), note)
    return found


def _main_packet(segments: list[tuple[int, bytes]]) -> bytes:
    """The first XMP packet of a JPEG's segments (a second one is ignored, as readers do); b"" when none."""
    return next((p[len(XMP_HEADER):] for m, p in segments if m == _APP1 and p.startswith(XMP_HEADER)), b"")


def _edited(packet: bytes, strip_location: bool) -> bytes:
    """``packet`` without ``tiff:Orientation``, its pointer to an extension, and GPS with ``strip_location``."""
    packet = POINTER_PROPERTY.sub(b"", _ORIENTATION_XMP.sub(b"", packet))
    return _GPS_XMP.sub(b"", packet) if strip_location else packet


def _xmp_segments(packet: bytes | str, extension: bytes, strip_location: bool) -> list[bytes]:
    """The main XMP segment (naming its extension) and the extension's segments, edited (see the module)."""
    if isinstance(packet, str):
        packet = packet.encode("utf-8")
    packet = _edited(packet, strip_location)
    extension = _edited(extension, strip_location) if extension else b""
    if extension and not has_properties(extension):
        extension = b""  # all it held was what the project removes
    try:
        ET.fromstring(packet.strip(b"\x00 \r\n\t"))
    except ET.ParseError:
        return []  # broken: not carried (exiv2 could not add the project's fields)
    packet, extension = within_budget(packet, extension)  # room for exiv2 to write the project's fields
    if extension:
        packet = with_pointer(packet, digest(extension))
    if len(packet) > MAX_MAIN_PACKET:
        return []  # too big for one segment even so (its big properties are attributes): not carried
    return [app_segment(_APP1, XMP_HEADER + packet), *(extension_segments(extension) if extension else [])]


def kept_segments(data: bytes, info_xmp: bytes | str | None, strip_location: bool, name: str) -> list[bytes]:
    """The source's XMP (its extension too) and IIM as upload-ready JPEG segments (see the module); [] when it has
    none.

    ``data`` is the source's bytes (a JPEG's segments are read from it);
    ``info_xmp`` the packet Pillow found elsewhere (a PNG's ``iTXt``);
    ``name`` the source's file name, said with each note about what is not carried.
    """
    segments = metadata_segments(data)
    main = _main_packet(segments)
    out: list[bytes] = []
    if main:
        extension = read_extension(segments, main)
        for note in extension.notes:
            log.info("%s: %s", printable(name), note)
        out += _xmp_segments(main, extension.packet, strip_location)
    photoshop = iim.photoshop_block([payload for marker, payload in segments if marker == _APP13])
    kept = [r for r in iim.resources(photoshop) if r.id != iim.IIM_DIGEST]
    for i, r in enumerate(kept):
        if r.id == iim.IIM_RESOURCE:
            kept[i] = iim.Resource(r.id, r.name, iim.encode_datasets(iim.as_utf8(iim.datasets(r.data))))
    out += [app_segment(_APP13, payload) for payload in iim.app13_payloads(kept)]  # split again when large
    if info_xmp and not main:
        out += _xmp_segments(info_xmp, b"", strip_location)
    return out
