"""The digest index beside the ledger: a cache that lets a big ledger be read without parsing it.

``.uploads.ledger.index`` (hidden, next to the ledger) holds, for the
ledger's first ``covers`` bytes — always whole lines — what reading them
gave: per agency the sorted, unique 32-byte SHA-256 digests, the problems
(line number, reason) and the number of lines. It is derived, never the
truth: it is used only while the SHA-256 of the ledger's first ``covers``
bytes is the one it was made from, so *any* change before that point (a
line deleted or fixed by hand, a truncation) makes the ledger be read in
full again, and deleting the file at any time only costs that full read.
Appends after ``covers`` are read as usual (:meth:`tasks.stores.ledger.Ledger.read`).

Layout (little-endian)::

    b"microstock ledger index\\n"     magic
    u32, u32                         length of the JSON header; CRC-32 of everything after these 8 bytes
    JSON header                      version, agencies, counts, covers, prefix_sha256, lines, problems, doubts
    per agency, in header order:     fanout (2**bits + 1 u32: records before each prefix of ``bits`` bits),
                                     records (count × 32 bytes)

``bits`` follows from the count (up to 16 at a million digests, so about
five records share a prefix): a look-up is a fanout step and a few
comparisons, and nothing is loaded into Python sets. The CRC-32 is checked
on load: a corrupt index is never trusted (a lost digest would post an
upload twice). Bump :data:`VERSION` whenever the
ledger's reading rules change: an index made under other rules is then
rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Set
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import BinaryIO

from tasks.core.files import atomic_file
from tasks.stores.ledger_lines import Doubt

VERSION = 2  # 2: damaged lines kept as doubts ("maybe done"), issue 25
MAGIC = b"microstock ledger index\n"
_RECORD = 32
_HEX = "0123456789abcdef"
_CHUNK = 16 << 20  # big: hashing releases the GIL per chunk, and getting it back may wait a switch interval
_log = logging.getLogger("microstock.ledger")


def index_path(ledger: Path) -> Path:
    """Where the index of ``ledger`` lives: ``.<name>.index`` in the same folder."""
    return ledger.with_name(f".{ledger.name}.index")


class SortedDigests:
    """Sorted, unique raw SHA-256 digests (32-byte records) with a fanout over their first ``bits`` bits."""

    __slots__ = ("records", "fanout", "_shift")

    def __init__(self, records: bytes, fanout: array | None = None) -> None:
        self.records = records
        self.fanout = fanout if fanout is not None else _fanout_of(records)
        self._shift = 16 - fanout_bits(len(self))

    @classmethod
    def from_hex(cls, digests: Iterable[str]) -> "SortedDigests":
        """From unique lower-case hex digests (sorting hex sorts the bytes the same way)."""
        return cls(bytes.fromhex("".join(sorted(digests))))

    def __len__(self) -> int:
        return len(self.records) // _RECORD

    def _position(self, key: bytes) -> int:
        """Index of the first record >= ``key`` (a binary search within the key's fanout bucket)."""
        prefix = (key[0] << 8 | key[1]) >> self._shift
        lo, hi = self.fanout[prefix], self.fanout[prefix + 1]
        records = self.records
        while lo < hi:
            mid = (lo + hi) >> 1
            if records[mid * _RECORD:(mid + 1) * _RECORD] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def has(self, key: bytes) -> bool:
        at = self._position(key) * _RECORD
        return self.records[at:at + _RECORD] == key

    def merged(self, digests: Iterable[str]) -> "SortedDigests":
        """These records plus the lower-case hex ``digests`` not among them yet."""
        keys = sorted({key for key in map(bytes.fromhex, digests) if not self.has(key)})
        if not keys:
            return self
        pieces, start = [], 0
        for key in keys:
            at = self._position(key) * _RECORD
            pieces += (self.records[start:at], key)
            start = at
        pieces.append(self.records[start:])
        return SortedDigests(b"".join(pieces))

    def hex_digests(self) -> Iterator[str]:
        text = self.records.hex()
        return (text[i:i + 2 * _RECORD] for i in range(0, len(text), 2 * _RECORD))


def fanout_bits(count: int) -> int:
    """How many leading bits the fanout of ``count`` records splits on (about 4–8 records per prefix)."""
    return max(0, min(16, count.bit_length() - 3))


def _fanout_of(records: bytes) -> array:
    """fanout[p] = how many records have a prefix (their first ``bits`` bits) below p."""
    n = len(records) // _RECORD
    bits = fanout_bits(n)
    pairs = bytearray(2 * n)
    pairs[0::2], pairs[1::2] = records[0::_RECORD], records[1::_RECORD]
    prefixes = array("H", pairs)
    if sys.byteorder == "little":
        prefixes.byteswap()  # the pairs are big-endian numbers
    counts = Counter(p >> (16 - bits) for p in prefixes) if bits < 16 else Counter(prefixes)
    return array("I", accumulate((counts.get(p, 0) for p in range(1 << bits)), initial=0))


class DoneDigests(Set):
    """A read-only set of lower-case hex digests: an index's records plus the digests read after it.

    Supports ``in``, ``len``, iteration and the comparisons of
    :class:`collections.abc.Set` (so it equals a ``set`` holding the same digests).
    """

    def __init__(self, indexed: SortedDigests, later: Iterable[str] = ()) -> None:
        self._indexed = indexed
        self._later = frozenset(sha for sha in later if not self._in_index(sha))

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> frozenset[str]:  # results of &, |, - are plain frozensets
        return frozenset(it)

    def _in_index(self, sha: str) -> bool:
        if len(sha) != 2 * _RECORD or sha.strip(_HEX):  # only lower-case hex can be recorded
            return False
        return self._indexed.has(bytes.fromhex(sha))

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, str) and (sha in self._later or self._in_index(sha))

    def __len__(self) -> int:
        return len(self._indexed) + len(self._later)

    def __iter__(self) -> Iterator[str]:
        yield from self._indexed.hex_digests()
        yield from self._later

    def __repr__(self) -> str:
        return f"<DoneDigests: {len(self)} digests>"


@dataclass(frozen=True)
class IndexedPrefix:
    """What reading the ledger's first ``covers`` bytes (``lines`` whole lines) gave."""

    covers: int
    lines: int
    problems: list[tuple[int, str]]
    digests: dict[str, SortedDigests]
    #: Damaged lines of the prefix that may record uploads (tasks.stores.ledger_lines.Doubt).
    doubts: list[Doubt] = field(default_factory=list)


def load_index(path: Path, ledger: BinaryIO, agencies: tuple[str, ...]) -> tuple[IndexedPrefix, "hashlib._Hash"] | None:
    """The index at ``path`` and the SHA-256 state of the prefix it covers, if it is valid for ``ledger``.

    Valid: readable, this format version and these agencies, a body whose
    length and CRC-32 match its header, and a ledger whose first ``covers``
    bytes hash to what they hashed to when it was made. None otherwise —
    never raises for a bad index (the caller then reads the whole ledger).
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                return None
            size, crc = struct.unpack("<II", fh.read(8))
            raw_header = fh.read(size)
            header = json.loads(raw_header)
            if header["version"] != VERSION or tuple(header["agencies"]) != agencies:
                return None
            covers, counts = int(header["covers"]), [int(c) for c in header["counts"]]
            if not 0 <= covers <= os.fstat(ledger.fileno()).st_size or len(counts) != len(agencies):
                return None
            digest = _hash_prefix(ledger, covers)
            if digest is None or digest.hexdigest() != header["prefix_sha256"]:
                return None
            check, digests = zlib.crc32(raw_header), {}
            for agency, count in zip(agencies, counts, strict=True):
                fanout_size = 4 * ((1 << fanout_bits(count)) + 1)
                fanout_bytes, records = fh.read(fanout_size), fh.read(count * _RECORD)
                check = zlib.crc32(records, zlib.crc32(fanout_bytes, check))
                if len(fanout_bytes) != fanout_size or len(records) != count * _RECORD:
                    return None
                fanout = array("I", fanout_bytes)
                if sys.byteorder == "big":
                    fanout.byteswap()
                if fanout[0] != 0 or fanout[-1] != count:
                    return None
                digests[agency] = SortedDigests(records, fanout)
            if fh.read(1) or check != crc:
                return None
            problems = [(int(number), str(reason)) for number, reason in header["problems"]]
            doubts = [Doubt.from_json(d) for d in header.get("doubts", [])]
            prefix = IndexedPrefix(covers, int(header["lines"]), problems, digests, doubts)
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        if not isinstance(exc, FileNotFoundError):
            _log.debug("ledger index %s not used: %s", path, exc)
        return None
    return prefix, digest


def save_index(path: Path, prefix: IndexedPrefix, prefix_sha256: str, mode: int = 0o644) -> None:
    """Write the index whole (temp file + rename) with permissions ``mode`` (the ledger's, so whoever
    reads the ledger can use it); a failure is logged at debug level, never raised."""
    parts: list[bytes] = []
    for digests in prefix.digests.values():
        fanout = array("I", digests.fanout)
        if sys.byteorder == "big":
            fanout.byteswap()
        parts += (fanout.tobytes(), digests.records)
    header = json.dumps({
        "version": VERSION, "agencies": list(prefix.digests), "counts": [len(d) for d in prefix.digests.values()],
        "covers": prefix.covers, "prefix_sha256": prefix_sha256, "lines": prefix.lines, "problems": prefix.problems,
        "doubts": [d.as_json() for d in prefix.doubts],
    }).encode("utf-8")
    crc = zlib.crc32(header)
    for part in parts:
        crc = zlib.crc32(part, crc)
    try:
        with atomic_file(path) as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(MAGIC + struct.pack("<II", len(header), crc) + header)
            for part in parts:
                fh.write(part)
    except OSError as exc:
        _log.debug("ledger index %s not written: %s", path, exc)


def discard_index(path: Path) -> None:
    """Remove a stale or corrupt index (it would only be checked and refused again)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        _log.debug("ledger index %s not removed: %s", path, exc)


def _hash_prefix(ledger: BinaryIO, size: int) -> "hashlib._Hash | None":
    """SHA-256 of the ledger's first ``size`` bytes; None when it is shorter now."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    ledger.seek(0)
    left = size
    while left:
        got = ledger.readinto(view[:min(left, _CHUNK)])
        if not got:
            return None
        digest.update(view[:got])
        left -= got
    return digest
