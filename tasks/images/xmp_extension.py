"""Extended XMP in a JPEG: the packet an XMP too big for one APP1 segment continues in.

Layout (Adobe XMP Specification Part 3, "Storage in files", 2020, 1.1.3.1 "Extended XMP in JPEG"; Adobe's
XMP-Toolkit-SDK ``XMPFiles/source/FileHandlers/JPEG_Handler.cpp``, read
2026-12-03): the main packet (``http://ns.adobe.com/xap/1.0/\\0`` + packet)
names the extension in ``xmpNote:HasExtendedXMP`` by a GUID, 32 uppercase hex
digits of the MD5 of the whole extended packet. That packet is cut into
portions, each in its own APP1 segment: ``http://ns.adobe.com/xmp/extension/\\0``,
the GUID, the full length and the portion's offset (4 bytes each, big-endian),
then the portion (at most 65,458 bytes). Readers must take portions in any
order and only the extension whose GUID the main packet names; the toolkit merges the extension over the main packet
(``XMPUtils::MergeFromJPEG``: its properties replace the main packet's).

Reading (:func:`read_extension`) keeps only the extension the main packet names,
complete (every byte from offset 0 to the full length, no gap). Neither Adobe's
toolkit nor exiftool checks the digest, so a complete extension whose MD5 is not
its GUID is still read and carried (with a note, and under its true digest).

Writing (:func:`extension_segments`) cuts a packet into segments again under a
new GUID; :func:`with_pointer` names it in the main packet; :func:`within_budget`
moves properties from a main packet too big to stay where it is, in the order
the specification recommends (1.1.3.2 "Partitioning XMP").
"""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.parsers import expat
from xml.sax.saxutils import quoteattr

from tasks.images.jpeg_segments import MAX_PAYLOAD, app_segment, metadata_segments, with_segments

XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"
EXTENSION_HEADER = b"http://ns.adobe.com/xmp/extension/\x00"
#: Header, GUID, full length and offset before each portion.
_PREFIX = len(EXTENSION_HEADER) + 32 + 4 + 4
#: The most one extension segment carries (the specification's 65,458).
MAX_PORTION = MAX_PAYLOAD - _PREFIX
_APP1 = 0xE1
#: ``xmpNote:HasExtendedXMP`` as an attribute or an element, and its GUID (as exiftool finds it).
_POINTER = re.compile(rb"""xmpNote:HasExtendedXMP\s*(?:=\s*["']|>)\s*([0-9A-Fa-f]{32})""")
_XMP_NOTE = "http://ns.adobe.com/xmp/note/"
_RDF_NS = b"http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_CAMERA_RAW, _PHOTOSHOP = "http://ns.adobe.com/camera-raw-settings/1.0/", "http://ns.adobe.com/photoshop/1.0/"
#: The most of a carried main packet that stays in it. exiv2 then writes the project's fields and serializes the
#: packet again, indented (a compact packet, as Adobe's toolkit writes one beside an extension, grows by a quarter
#: with short list items: measured with exiv2 0.27.6), and refuses one over a segment ("Size of XMP JPEG segment
#: is larger than 65535 bytes"). Half a segment leaves room for both.
MAIN_BUDGET = 32 * 1024
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"


def xmp_property(name: bytes) -> re.Pattern[bytes]:
    """One XMP property ``name`` (``prefix:Name``), as an element or an attribute, with the space before it."""
    return re.compile(rb"\s*<" + name + rb"(?:\s[^>]*)?(?:/>|>.*?</" + name + rb">)|\s+" + name
                      + rb"""=(?:"[^"]*"|'[^']*')""", re.DOTALL)


#: The main packet's pointer to its extension (a new one is written for what is carried).
POINTER_PROPERTY = xmp_property(rb"xmpNote:HasExtendedXMP")


@dataclass
class Extension:
    """The extended packet the main packet names (``b""`` when there is none to use), and what was wrong."""

    packet: bytes = b""
    notes: list[str] = field(default_factory=list)


def pointer(main: bytes) -> str:
    """The GUID the main packet names in ``xmpNote:HasExtendedXMP``, uppercase; "" when it names none."""
    found = _POINTER.search(main)
    return found.group(1).decode("ascii").upper() if found else ""


def read_extension(segments: list[tuple[int, bytes]], main: bytes) -> Extension:
    """The extension ``main`` names, put together from the APP1 ``segments`` of a JPEG (see the module)."""
    guid = pointer(main)
    portions: dict[str, list[tuple[int, int, bytes]]] = {}
    for marker, payload in segments:
        if marker == _APP1 and payload.startswith(EXTENSION_HEADER) and len(payload) >= _PREFIX:
            at = len(EXTENSION_HEADER)
            key = payload[at:at + 32].decode("latin-1").upper()
            full = int.from_bytes(payload[at + 32:at + 36], "big")
            offset = int.from_bytes(payload[at + 36:_PREFIX], "big")
            portions.setdefault(key, []).append((offset, full, payload[_PREFIX:]))
    found = Extension()
    for other in sorted(set(portions) - {guid}):
        found.notes.append(f"extended XMP {other} that the main XMP packet does not name: left out")
    if not guid:
        return found
    if guid not in portions:
        found.notes.append(f"the main XMP packet names extended XMP {guid} that the file does not have: ignored")
        return found
    packet, full = _joined(portions[guid])
    if packet is None:
        found.notes.append(f"extended XMP {guid} is incomplete ({full} bytes announced, a portion is missing or "
                           "overlaps): ignored, the main XMP packet is used")
        return found
    try:
        ET.fromstring(packet.strip(b"\x00 \r\n\t"))
    except ET.ParseError as exc:
        found.notes.append(f"extended XMP {guid} is not well-formed XML ({exc}): ignored")
        return found
    if digest(packet) != guid:
        found.notes.append(f"extended XMP {guid} is complete but its MD5 is {digest(packet)}: used (readers do not "
                           "check it), carried under its true digest")
    found.packet = packet
    return found


def _joined(parts: list[tuple[int, int, bytes]]) -> tuple[bytes | None, int]:
    """The portions laid end to end from offset 0, or None with a gap, an overlap (a portion repeated too), a
    length other than the announced one, or portions that disagree on it."""
    full = parts[0][1]
    out = bytearray()
    for offset, announced, portion in sorted(parts, key=lambda p: p[0]):
        if announced != full or offset != len(out):
            return None, full
        out += portion
    return (bytes(out), full) if len(out) == full else (None, full)


def digest(packet: bytes) -> str:
    """The GUID of an extended packet: the MD5 of all of it, 32 uppercase hex digits."""
    return hashlib.md5(packet, usedforsecurity=False).hexdigest().upper()


def extension_segments(packet: bytes) -> list[bytes]:
    """``packet`` as extension APP1 segments (portions in order, each at most :data:`MAX_PORTION` bytes)."""
    head = EXTENSION_HEADER + digest(packet).encode("ascii") + len(packet).to_bytes(4, "big")
    return [app_segment(_APP1, head + at.to_bytes(4, "big") + packet[at:at + MAX_PORTION])
            for at in range(0, len(packet), MAX_PORTION)]


def has_properties(packet: bytes) -> bool:
    """Whether an extended packet still holds a property (after the project's edits it may hold none)."""
    try:
        root = ET.fromstring(packet.strip(b"\x00 \r\n\t"))
    except ET.ParseError:
        return False
    return any(len(desc) or any(not name.startswith(_RDF) for name in desc.attrib)
               for desc in root.iter(f"{_RDF}Description"))


def with_pointer(main: bytes, guid: str) -> bytes:
    """``main`` naming extension ``guid`` (any earlier pointer removed), or naming none when ``guid`` is "".

    The pointer goes in an ``rdf:Description`` of its own (as exiftool writes it), so no
    namespace the packet already declares is declared twice.
    """
    main = POINTER_PROPERTY.sub(b"", main)
    if not guid:
        return main
    about = re.search(rb"""rdf:about=("[^"]*"|'[^']*')""", main)
    description = (b"<rdf:Description rdf:about=" + (about.group(1) if about else b'""') + b' xmlns:xmpNote="'
                   + _XMP_NOTE.encode() + b'" xmpNote:HasExtendedXMP="' + guid.encode("ascii") + b'"/>')
    end = main.rfind(b"</rdf:RDF>")
    return main if end < 0 else main[:end] + description + main[end:]


def edit_carried(jpeg: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    """``jpeg`` (as the project writes it: one main XMP segment, its extension complete) with ``edit`` applied to
    the extended packet, cut again under its new GUID and named by the main packet; the extension and its
    pointer go when nothing is left in it. A ``jpeg`` with no extension comes back unchanged."""
    segments = metadata_segments(jpeg)
    main = next((p[len(XMP_HEADER):] for m, p in segments if m == _APP1 and p.startswith(XMP_HEADER)), b"")
    extension = read_extension(segments, main).packet
    if not extension:
        return jpeg
    edited = edit(extension)
    kept = has_properties(edited)
    found = _POINTER.search(main)  # there: read_extension found the extension by it
    if kept and found:  # the new GUID over the old one, in place: the main packet keeps its length
        main = main[:found.start(1)] + digest(edited).encode("ascii") + main[found.end(1):]
    else:
        main = with_pointer(main, "")
    jpeg = with_segments(jpeg, _APP1, [app_segment(_APP1, XMP_HEADER + main)], XMP_HEADER)
    return with_segments(jpeg, _APP1, extension_segments(edited) if kept else [], EXTENSION_HEADER)


def within_budget(main: bytes, extension: bytes, budget: int = MAIN_BUDGET) -> tuple[bytes, bytes]:
    """``main`` and ``extension`` with the main packet's largest top-level properties moved to the extension, each
    in an ``rdf:Description`` of its own, until the main packet holds at most ``budget`` bytes: the Camera Raw
    settings first, then ``photoshop:History``, then the largest first, as the specification recommends and
    Adobe's toolkit does (``XMPUtils::PackageForJPEG``), so the small, usual properties (creator, rights …) stay
    where every reader finds them. Unchanged when within already; properties written as attributes, or a
    packet expat cannot parse, are not moved."""
    if len(main) <= budget:
        return main, extension
    moved, size = [], len(main)
    for start, stop, declared, _ in sorted(_top_level(main), key=lambda p: (p[3], p[0] - p[1])):
        if size <= budget:
            break
        moved.append((start, stop, declared))
        size -= stop - start
    end = extension.rfind(b"</rdf:RDF>")
    if not moved or (extension and end < 0):
        return main, extension
    if not extension:
        extension = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="' + _RDF_NS + b'"></rdf:RDF></x:xmpmeta>'
        end = extension.rfind(b"</rdf:RDF>")
    descriptions = b"".join(b"<rdf:Description" + declared + b">" + main[start:stop] + b"</rdf:Description>"
                            for start, stop, declared in sorted(moved))
    for start, stop, _ in sorted(moved, reverse=True):
        main = main[:start] + main[stop:]
    return main, extension[:end] + descriptions + extension[end:]


def _top_level(packet: bytes) -> list[tuple[int, int, bytes, int]]:
    """(start, end, attributes for its own ``rdf:Description``: ``rdf:about`` and every namespace in scope, rank)
    of each top-level property written as an element. The rank is the specification's order of moving (Part 3,
    1.1.3.2 "Partitioning XMP"): 0 for the Camera Raw namespace, 1 for ``photoshop:History``, 2 for the rest."""
    body = packet.strip(b"\x00 \r\n\t")
    lead = len(packet) - len(packet.lstrip(b"\x00 \r\n\t"))
    parser = expat.ParserCreate()  # names as written (prefix:local): the byte spans are what is moved
    stack: list[tuple[str, dict[str, str], int]] = []
    found: list[tuple[int, int, bytes, int]] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        stack.append((name, attrs, parser.CurrentByteIndex))

    def end(name: str) -> None:
        _, own, at = stack.pop()
        closing = parser.CurrentByteIndex  # an end tag's start; right after an empty element's tag
        if len(stack) < 2 or stack[-1][0] != "rdf:Description" or stack[-2][0] != "rdf:RDF":
            return  # not top-level
        scope: dict[str, str] = {}
        for _, attrs, _ in stack:
            scope.update((k, v) for k, v in attrs.items() if k.startswith("xmlns"))
        scope["rdf:about"] = stack[-1][1].get("rdf:about", "")
        declared = "".join(f" {k}={quoteattr(v)}" for k, v in scope.items()).encode("utf-8")
        stop = body.index(b">", closing) + 1 if body.startswith(b"</", closing) else closing
        uri = own.get(f"xmlns:{name.partition(':')[0]}") or scope.get(f"xmlns:{name.partition(':')[0]}")
        rank = 0 if uri == _CAMERA_RAW else 1 if (uri, name.partition(":")[2]) == (_PHOTOSHOP, "History") else 2
        found.append((at + lead, stop + lead, declared, rank))

    parser.StartElementHandler, parser.EndElementHandler = start, end
    try:
        parser.Parse(body, True)
    except expat.ExpatError:
        return []
    return found
