"""The ledger's line format: one confirmed upload per line, five tab-separated fields.

``<UTC timestamp>\t<agency>\t<filename>\t<sha256 of the source image>\t<remote path>``
(INTERFACE.md). This module knows one line; :mod:`tasks.stores.ledger` reads
and writes the file. ``known`` is the agencies of the ledger's workdir: a line
naming another agency could never match an upload.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

HEADER = (
    "# microstock upload ledger: one line per confirmed upload.\n"
    "# fields (tab-separated): utc_timestamp  agency  filename  sha256_of_source_image  remote_path\n"
    "# delete a line to make that upload pending again; add one with `microstock ledger done AGENCY FILE`.\n"
)
SHA256_TOKEN = re.compile(r"^[0-9a-fA-F]{64}$")


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
