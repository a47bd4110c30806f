"""The ledger's line format: one confirmed upload per line, five tab-separated fields.

``<UTC timestamp>\t<agency>\t<filename>\t<sha256 of the source image>\t<remote path>``
(INTERFACE.md). This module knows one line; :mod:`tasks.stores.ledger` reads
and writes the file. ``known`` is the agencies of the ledger's workdir: a line
naming another agency could never match an upload.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass

HEADER = (
    "# microstock upload ledger: one line per confirmed upload.\n"
    "# fields (tab-separated): utc_timestamp  agency  filename  sha256_of_source_image  remote_path\n"
    "# delete a line to make that upload pending again; add one with `microstock ledger done AGENCY FILE`.\n"
)
SHA256_TOKEN = re.compile(r"^[0-9a-fA-F]{64}$")
#: What a damaged line may hold besides its text: NUL and other control bytes, undecodable bytes.
_DAMAGE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffd]")


@dataclass(frozen=True)
class Entry:
    """One confirmed upload."""

    timestamp: str
    agency: str
    filename: str
    sha256: str
    remote_path: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.agency, self.sha256)

    def line(self) -> str:
        """The entry as one ledger line, newline included."""
        return "\t".join((self.timestamp, self.agency, self.filename, self.sha256, self.remote_path)) + "\n"


def clean_field(value: str) -> str:
    """Fields never hold tabs or line breaks (they would break the format)."""
    return re.sub(r"[\t\r\n]+", " ", value)


def parse_line(line: str, known: Collection[str]) -> Entry:
    """One ledger line to an Entry; ValueError with the reason when it is malformed.

    Agency and digest are normalised (stripped, lower case). An agency outside
    the known ones is malformed: it would never match a pending upload.
    """
    fields = line.rstrip("\r").split("\t")
    if len(fields) != 5:
        hint = " (tabs turned into spaces?)" if len(fields) == 1 and " " in line else ""
        raise ValueError(f"expected 5 tab-separated fields, found {len(fields)}{hint}")
    ts, agency, filename, sha, remote = (f.strip() for f in fields)
    agency, sha = agency.lower(), sha.lower()
    if not SHA256_TOKEN.match(sha):
        raise ValueError("field 4 is not a SHA-256 hex digest")
    if agency not in known:
        raise ValueError(f"unknown agency {agency!r} (known: {', '.join(known)})")
    if not filename:
        raise ValueError("the filename is empty")
    return Entry(ts, agency, filename, sha, remote)


def salvage(line: str, known: Collection[str]) -> tuple[str, str] | None:
    """The (agency, sha256) a malformed line still names unambiguously, else None."""
    tokens = line.replace("\t", " ").split()
    agencies = {t.lower() for t in tokens if t.lower() in known}
    digests = {t.lower() for t in tokens if SHA256_TOKEN.match(t)}
    if len(agencies) == 1 and len(digests) == 1:
        return agencies.pop(), digests.pop()
    return None


def tail_key(tail: str, known: Collection[str]) -> tuple[str, str] | None:
    """The key of an unterminated last line, when it already holds one.

    A line is written only after its upload was confirmed, so a cut-off line
    whose agency and SHA-256 fields are complete records a real upload. The
    digest must be followed by its tab: a digest at the very end may be cut.
    """
    fields = tail.split("\t")
    if len(fields) < 5:
        return None
    agency, sha = fields[1].strip().lower(), fields[3].strip().lower()
    if agency in known and SHA256_TOKEN.match(sha):
        return agency, sha
    return None


@dataclass(frozen=True)
class Doubt:
    """A damaged line (NUL or control bytes, torn, a garbled agency) that may record an upload.

    It names the files it still can — by SHA-256 and/or by file name — for the
    agencies it may be about (every known one when its agency field is garbled
    or gone). Such a file is "maybe done": checked on the server before anything
    is sent (tasks.stages.upload), never simply sent again.
    """

    line: int
    agencies: frozenset[str]
    digests: frozenset[str]
    names: frozenset[str]

    def names_item(self, agency: str, sha256: str, name: str) -> bool:
        return agency in self.agencies and (sha256 in self.digests or name in self.names)

    def as_json(self) -> list:
        return [self.line, sorted(self.agencies), sorted(self.digests), sorted(self.names)]

    @classmethod
    def from_json(cls, value: list) -> "Doubt":
        line, agencies, digests, names = value
        return cls(int(line), frozenset(agencies), frozenset(digests), frozenset(names))


def doubt_of(number: int, line: str, known: Collection[str], torn: bool = False) -> Doubt | None:
    """The Doubt a line that neither parses nor salvages still raises, else None.

    Files: every 64-hex token, and the file name field when it is whole
    (followed by its tab on a torn line). Agencies: the known ones the agency
    field names or nearly names (``ad\\x00obe``, ``adobee``); every known one
    when that field is garbled (damage inside it) or missing. A clean agency
    field naming no known agency is another workdir's line: no doubt.
    """
    fields = line.rstrip("\r").split("\t")
    cleaned = [_DAMAGE.sub("", f).strip() for f in fields]
    digests = frozenset(t.lower() for f in cleaned for t in f.split() if SHA256_TOKEN.match(t))
    whole = len(fields) >= (4 if torn else 3)
    names = frozenset({cleaned[2]} if whole and cleaned[2] and not SHA256_TOKEN.match(cleaned[2]) else ())
    if not digests and not names:
        return None
    agency = cleaned[1].lower() if len(fields) >= 3 else ""
    if agency in known:
        agencies = frozenset({agency})
    elif agency and not _DAMAGE.search(fields[1]) and agency.isidentifier():
        close = difflib.get_close_matches(agency, list(known), n=len(known), cutoff=0.75)
        if not close:
            return None
        agencies = frozenset(close)
    else:
        agencies = frozenset(known)
    return Doubt(number, agencies, digests, names)
