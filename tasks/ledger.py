"""The plain-text upload ledger: one line per *confirmed* upload.

Format (INTERFACE.md): ``#`` comment lines, then one line per upload with five
tab-separated fields — UTC timestamp, agency, filename, SHA-256 of the asset's
source image, remote path. The key is agency + SHA-256, so a renamed file or
re-packed metadata is not a new upload, and a changed image is.

Appends are one ``write`` under an exclusive ``fcntl`` lock, flushed and
fsynced, so threads and processes can share the file. Reading is tolerant: a
torn last line (a crash mid-write) is ignored and repaired by the next append,
a malformed line is reported with its number and skipped, a missing file is
an empty ledger.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HEADER = (
    "# microstock upload ledger: one line per confirmed upload.\n"
    "# fields (tab-separated): utc_timestamp  agency  filename  sha256_of_source_image  remote_path\n"
    "# delete a line to make that upload pending again.\n"
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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


@dataclass
class LedgerState:
    """What the ledger file says: entries, plus the lines it had to skip."""

    entries: list[Entry] = field(default_factory=list)
    #: (line number, reason) for every malformed line, and a torn last line.
    problems: list[tuple[int, str]] = field(default_factory=list)

    def done_keys(self) -> set[tuple[str, str]]:
        return {e.key for e in self.entries}

    def is_done(self, agency: str, sha256: str) -> bool:
        return (agency, sha256) in self.done_keys()


def _clean(value: str) -> str:
    """Fields never hold tabs or line breaks (they would break the format)."""
    return re.sub(r"[\t\r\n]+", " ", value)


def parse_line(line: str) -> Entry:
    """One ledger line to an Entry; ValueError with the reason when it is malformed."""
    fields = line.split("\t")
    if len(fields) != 5:
        raise ValueError(f"expected 5 tab-separated fields, found {len(fields)}")
    ts, agency, filename, sha, remote = fields
    if not _SHA256.match(sha):
        raise ValueError("field 4 is not a SHA-256 hex digest")
    if not agency or not filename:
        raise ValueError("agency or filename is empty")
    return Entry(ts, agency, filename, sha, remote)


class Ledger:
    """The ledger file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> LedgerState:
        """Every confirmed upload in the file; never raises for bad content."""
        state = LedgerState()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return state
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        torn = lines.pop()  # "" when the file ends with a newline
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                state.entries.append(parse_line(line.rstrip("\r")))
            except ValueError as exc:
                state.problems.append((number, str(exc)))
        if torn.strip():
            state.problems.append((len(lines) + 1, "torn last line (no newline: a write was interrupted); ignored"))
        return state

    def record(self, agency: str, filename: str, sha256: str, remote_path: str) -> Entry:
        """Append one confirmed upload: a single write under an exclusive lock, flushed and fsynced.

        A torn last line left by a crash is cut off first, so the new line
        starts on a line of its own.
        """
        entry = Entry(
            datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            _clean(agency), _clean(filename), sha256, _clean(remote_path),
        )
        line = "\t".join((entry.timestamp, entry.agency, entry.filename, entry.sha256, entry.remote_path)) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size == 0:
                os.write(fd, HEADER.encode())
            else:
                self._cut_torn_tail(fd, size)
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        return entry

    @staticmethod
    def _cut_torn_tail(fd: int, size: int) -> None:
        """If the file does not end with a newline, truncate back to the last one."""
        os.lseek(fd, max(0, size - 1), os.SEEK_SET)
        if os.read(fd, 1) == b"\n":
            return
        pos, block = size, 4096
        while pos > 0:
            start = max(0, pos - block)
            os.lseek(fd, start, os.SEEK_SET)
            chunk = os.read(fd, pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                os.ftruncate(fd, start + idx + 1)
                return
            pos = start
        os.ftruncate(fd, 0)


def pending(done: set[tuple[str, str]], agency: str, candidates: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (filename, sha256) candidates not yet uploaded to ``agency``."""
    return [(name, sha) for name, sha in candidates if (agency, sha) not in done]
