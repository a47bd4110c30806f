"""IPTC IIM inside a JPEG's Photoshop segment: read in its own charset, rewritten as UTF-8.

Older keywording tools write IIM (IPTC's binary records: 2:05 title, 2:80
By-line, 2:116 Copyright Notice, …) in Latin-1 or CP1252 without saying so;
newer ones declare UTF-8 in 1:90 ``CodedCharacterSet`` (``ESC % G``). The text
is decoded in the declared charset when there is one, else as UTF-8 when
every text dataset is valid UTF-8, else as CP1252, else as Latin-1 (which
never fails): reading never raises for content.

Layout: APP13 payload ``Photoshop 3.0\\0`` + image resources (``8BIM``, 2-byte
id, Pascal name padded to even, 4-byte size, data padded to even); resource
0x0404 holds the IIM datasets (``0x1C``, record, dataset, 2-byte size, or an
extended size when its top bit is set).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tasks.images.jpeg_segments import MAX_PAYLOAD

PHOTOSHOP = b"Photoshop 3.0\x00"
IIM_RESOURCE = 0x0404
#: Photoshop's MD5 of the IIM block: stale once the block changes, so it is dropped then.
IIM_DIGEST = 0x0425
UTF8_ESCAPE = b"\x1b%G"
#: Datasets that hold numbers or binary values, not text (never re-encoded).
BINARY = {(1, 0), (1, 20), (1, 22), (1, 90), (1, 100), (2, 0), (2, 125), (2, 150), (2, 200), (2, 201), (2, 202)}


@dataclass(frozen=True)
class Resource:
    """One Photoshop image resource."""

    id: int
    name: bytes
    data: bytes


def resources(payload: bytes) -> list[Resource]:
    """The image resources of an APP13 payload (stops quietly at the first damaged one)."""
    found: list[Resource] = []
    if not payload.startswith(PHOTOSHOP):
        return found
    pos = len(PHOTOSHOP)
    while pos + 8 <= len(payload) and payload[pos:pos + 4] == b"8BIM":
        rid = int.from_bytes(payload[pos + 4:pos + 6], "big")
        name_len = payload[pos + 6]
        name_end = pos + 7 + name_len
        name_end += (name_end - pos - 6) % 2  # the Pascal name (length byte included) is padded to even
        if name_end + 4 > len(payload):
            break
        size = int.from_bytes(payload[name_end:name_end + 4], "big")
        start = name_end + 4
        if start + size > len(payload):
            break
        found.append(Resource(rid, payload[pos + 7:pos + 7 + name_len], payload[start:start + size]))
        pos = start + size + size % 2
    return found


def photoshop_block(payloads: list[bytes]) -> bytes:
    """The Photoshop block held by a JPEG's APP13 payloads, in file order (b"" when none holds one).

    A block larger than one segment is split over several, each starting with
    the ``Photoshop 3.0`` signature, the data running on from one to the next
    (as Photoshop and exiftool write it): joined here, it is read whole.
    """
    parts = [p[len(PHOTOSHOP):] for p in payloads if p.startswith(PHOTOSHOP)]
    return PHOTOSHOP + b"".join(parts) if parts else b""


def app13_payloads(kept: list[Resource]) -> list[bytes]:
    """``kept`` as APP13 payloads: one when it fits, else split as :func:`photoshop_block` joins them."""
    body = app13_payload(kept)[len(PHOTOSHOP):]
    room = MAX_PAYLOAD - len(PHOTOSHOP)
    return [PHOTOSHOP + body[i:i + room] for i in range(0, len(body), room)]


def app13_payload(kept: list[Resource]) -> bytes:
    """The Photoshop block holding ``kept``, in order (one APP13 payload when it fits one segment)."""
    out = [PHOTOSHOP]
    for r in kept:
        name = bytes((len(r.name),)) + r.name
        if len(name) % 2:
            name += b"\x00"
        out += [b"8BIM", r.id.to_bytes(2, "big"), name, len(r.data).to_bytes(4, "big"), r.data,
                b"\x00" * (len(r.data) % 2)]
    return b"".join(out)


def datasets(block: bytes) -> list[tuple[int, int, bytes]]:
    """(record, dataset, value) of every IIM dataset in ``block``, in order (stops at damage)."""
    found = []
    pos = 0
    while pos + 5 <= len(block) and block[pos] == 0x1C:
        record, number = block[pos + 1], block[pos + 2]
        size = int.from_bytes(block[pos + 3:pos + 5], "big")
        pos += 5
        if size & 0x8000:  # extended dataset: the size's size, then the size
            width = size & 0x7FFF
            if width > 4 or pos + width > len(block):
                break
            size = int.from_bytes(block[pos:pos + width], "big")
            pos += width
        if pos + size > len(block):
            break
        found.append((record, number, block[pos:pos + size]))
        pos += size
    return found


def encode_datasets(items: list[tuple[int, int, bytes]]) -> bytes:
    """IIM bytes for ``items`` (extended sizes past 32 767 bytes)."""
    out = []
    for record, number, value in items:
        if len(value) < 0x8000:
            out.append(struct.pack(">BBBH", 0x1C, record, number, len(value)) + value)
        else:
            out.append(struct.pack(">BBBHI", 0x1C, record, number, 0x8004, len(value)) + value)
    return b"".join(out)


def charset(items: list[tuple[int, int, bytes]]) -> str:
    """The Python codec the text datasets are in (see the module)."""
    declared = next((v for r, n, v in items if (r, n) == (1, 90)), None)
    if declared is not None and declared.startswith(UTF8_ESCAPE):
        return "utf-8"
    texts = [v for r, n, v in items if (r, n) not in BINARY]
    for codec in ("utf-8", "cp1252"):
        try:
            for value in texts:
                value.decode(codec)
        except UnicodeDecodeError:
            continue
        return codec
    return "latin-1"


def decode(value: bytes, codec: str) -> str:
    """One dataset's text in ``codec`` (a declared UTF-8 that is not, read as CP1252/Latin-1 instead)."""
    for c in dict.fromkeys((codec, "cp1252", "latin-1")):
        try:
            return value.decode(c).replace("\x00", "")
        except UnicodeDecodeError:
            continue
    raise AssertionError("unreachable: latin-1 decodes every byte")


def text_fields(items: list[tuple[int, int, bytes]]) -> dict[tuple[int, int], list[str]]:
    """(record, dataset) -> its values as text, repeatable datasets (keywords) in order."""
    codec = charset(items)
    fields: dict[tuple[int, int], list[str]] = {}
    for record, number, value in items:
        if (record, number) not in BINARY:
            fields.setdefault((record, number), []).append(decode(value, codec).strip())
    return fields


def with_fields(items: list[tuple[int, int, bytes]],
                fields: dict[tuple[int, int], list[str]]) -> list[tuple[int, int, bytes]]:
    """``items`` in UTF-8 (:func:`as_utf8`) with the datasets named in ``fields`` replaced by its values (an
    empty list removes them); 2:00 RecordVersion added when missing; datasets in number order within each record,
    repeated ones (keywords) in their order. Every other dataset keeps its bytes (a TimeCreated without a time
    zone stays without one)."""
    out = [item for item in as_utf8(items) if (item[0], item[1]) not in fields]
    out += [(record, number, value.encode("utf-8")) for (record, number), values in fields.items() for value in values]
    if any(record == 2 for record, _, _ in out) and not any((r, n) == (2, 0) for r, n, _ in out):
        out.append((2, 0, (4).to_bytes(2, "big")))  # IIM 4
    out.sort(key=lambda item: (item[0], item[1]))
    return out


def as_utf8(items: list[tuple[int, int, bytes]]) -> list[tuple[int, int, bytes]]:
    """``items`` with every text dataset re-encoded as UTF-8 and 1:90 saying so."""
    codec = charset(items)
    out = [(1, 90, UTF8_ESCAPE)]
    for record, number, value in items:
        if (record, number) == (1, 90):
            continue
        if (record, number) not in BINARY:
            value = decode(value, codec).encode("utf-8")
        out.append((record, number, value))
    out.sort(key=lambda item: item[0])  # record 1 (the envelope) before record 2; order within a record kept
    return out
