"""Swap a JPEG's metadata segments without touching its compressed pixels.

An upload-ready JPEG that needs no pixel change (already upright RGB in
sRGB) keeps the contributor's exact compressed data: no second lossy
encode, no full decode. Only the metadata around it is replaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_SOI, _EOI, _SOS = 0xD8, 0xD9, 0xDA
_APP0, _APP14, _COM = 0xE0, 0xEE, 0xFE
#: Markers without a length field.
_STANDALONE = {0x01, *range(0xD0, 0xD8)}
#: In entropy-coded data, 0xFF is followed by 0x00 (stuffing), a restart
#: marker or more 0xFF fill; anything else starts the next marker.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
#: The most payload one marker segment holds (its 2-byte length counts itself).
MAX_PAYLOAD = 65533


def app_segment(marker: int, payload: bytes) -> bytes:
    """One marker segment (``0xFF``, marker, 2-byte length, payload); ValueError if too long."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"segment payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return bytes((0xFF, marker)) + (len(payload) + 2).to_bytes(2, "big") + payload


def exif_segment(exif: bytes) -> bytes:
    """APP1 segment for ``exif`` as Pillow's ``Exif.tobytes()`` returns it (``Exif\\0\\0`` + TIFF)."""
    return app_segment(0xE1, exif)


def icc_segment(icc: bytes) -> bytes:
    """APP2 segment carrying a whole ICC profile (one chunk of one)."""
    return app_segment(0xE2, b"ICC_PROFILE\x00\x01\x01" + icc)


def metadata_segments(data: bytes) -> list[tuple[int, bytes]]:
    """(marker, payload) of every APPn and comment segment before the first scan.

    Never raises: a damaged stream gives the segments before the damage
    (a picture's metadata is read for what it has, not judged here).
    """
    if data[:2] != b"\xff\xd8":
        return []
    return [(marker, data[body:end]) for _, marker, body, end in _header_segments(data)
            if 0xE0 <= marker <= 0xEF or marker == _COM]


def _header_segments(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """``(start, marker, body start, end)`` of each segment before the first scan (after SOI; fill bytes and
    standalone markers skipped); a damaged header ends the walk."""
    pos, n = 2, len(data)
    while pos + 4 <= n and data[pos] == 0xFF:
        start = pos
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            return
        marker = data[pos]
        pos += 1
        if marker in _STANDALONE:
            continue
        if marker in (_SOS, _EOI) or pos + 2 > n:
            return
        length = int.from_bytes(data[pos:pos + 2], "big")
        if length < 2 or pos + length > n:
            return
        yield start, marker, pos + 2, pos + length
        pos += length


def with_segments(data: bytes, marker: int, segments: list[bytes], prefix: bytes = b"") -> bytes:
    """``data`` with its ``marker`` segments (before the first scan) whose payload starts with ``prefix`` replaced
    by ``segments``: where the first was, else after the last APPn (else right after SOI). Every other byte is
    kept; a damaged header ends the search (what follows is kept as it is)."""
    spans: list[tuple[int, int]] = []
    after_app = 2
    for start, found, body, end in _header_segments(data):
        if found == marker and data.startswith(prefix, body, end):
            spans.append((start, end))
        elif 0xE0 <= found <= 0xEF:
            after_app = end
    at = spans[0][0] if spans else after_app
    kept, cur = [], 0
    for start, end in spans:
        kept.append(data[cur:start])
        cur = end
    stripped = b"".join([*kept, data[cur:]])
    return stripped[:at] + b"".join(segments) + stripped[at:]


def replace_metadata(data: bytes, segments: list[bytes]) -> bytes:
    """``data`` with its metadata replaced by ``segments``; the image data is copied byte for byte.

    Keeps APP0 (JFIF), APP14 (Adobe colour transform) and every segment the
    decoder needs; drops every other APPn (EXIF, XMP, ICC, IPTC, maker data)
    and comments, and anything after the end-of-image marker (appended
    images, trailers). ``segments`` go right after SOI/APP0. Raises
    ValueError when the stream is not a complete JPEG.
    """
    if data[:2] != b"\xff\xd8":
        raise ValueError("no JPEG start-of-image marker")
    head: list[bytes] = [data[:2]]
    body: list[bytes] = []
    pos, n = 2, len(data)
    scanned = False
    while True:
        if pos + 1 >= n or data[pos] != 0xFF:
            raise ValueError(f"expected a marker at byte {pos}")
        while pos < n and data[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= n:
            raise ValueError("stream ends inside a marker")
        marker = data[pos]
        pos += 1
        if marker == _EOI:
            if not scanned:
                raise ValueError("end of image before any scan")
            body.append(b"\xff\xd9")
            break
        if marker in _STANDALONE:
            body.append(bytes((0xFF, marker)))
            continue
        if pos + 2 > n:
            raise ValueError("stream ends inside a segment length")
        length = int.from_bytes(data[pos:pos + 2], "big")
        if length < 2 or pos + length > n:
            raise ValueError(f"segment 0x{marker:02X} runs past the end of the file")
        segment = bytes((0xFF, marker)) + data[pos:pos + length]
        pos += length
        if marker == _APP0 and not body:
            head.append(segment)
        elif marker == _COM or (0xE0 <= marker <= 0xEF and marker not in (_APP0, _APP14)):
            continue
        else:
            body.append(segment)
        if marker == _SOS:
            scanned = True
            found = _NEXT_MARKER.search(data, pos)
            if found is None:
                raise ValueError("scan data is truncated (no end-of-image marker)")
            body.append(data[pos:found.start()])
            pos = found.start()
    return b"".join(head + segments + body)
