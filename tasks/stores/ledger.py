"""The plain-text upload ledger: one line per *confirmed* upload.

Format (INTERFACE.md): ``#`` comment lines, then one line per upload with five
tab-separated fields — UTC timestamp, agency, filename, SHA-256 of the asset's
source image, remote path. The key is agency + SHA-256, so a renamed file or
re-packed metadata is not a new upload, and a changed image is.

Writing: :meth:`Ledger.record` appends one line with a single ``write`` under
an exclusive ``fcntl`` lock, then fsyncs (:func:`tasks.core.files.locked_append`),
so threads and processes can share the file and a line is on disk before the
caller moves on.

Reading is tolerant and errs on the side of *not* uploading twice:

- a missing file is an empty ledger;
- a torn last line (no newline: a write was cut short) is ignored — unless it
  already names its agency and SHA-256, in which case the upload it records
  was confirmed and it counts; the next append repairs the tail either way;
- a malformed line is reported with its line number and skipped — but if it
  still holds one known agency and one SHA-256 (say an editor turned the tabs
  into spaces), it counts as done, so a typo never causes a second upload;
- a damaged line that does not (a NUL byte, a garbled agency, a torn last line
  cut inside its digest) still names files by digest or name: those are
  "maybe done" (:class:`~tasks.stores.ledger_lines.Doubt`) — the upload stage
  checks the server before anything is sent and never simply sends them;
- agency names and digests are compared case- and space-insensitively.

:meth:`Ledger.agency_lock` keeps two runs from uploading to the same agency
at once (the lock dies with the process, so a crash never leaves it held).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from tasks.agencies.catalog import agency_names
from tasks.core.errors import StoreUnavailable
from tasks.core.files import check_appendable, check_writable, exclusive_lock, locked_append
from tasks.core.workdir import Workdir
from tasks.stores.ledger_index import (
    DoneDigests,
    IndexedPrefix,
    SortedDigests,
    discard_index,
    index_path,
    load_index,
    save_index,
)
from tasks.stores.ledger_lines import (
    HEADER,
    SHA256_TOKEN,
    Doubt,
    Entry,
    clean_field,
    doubt_of,
    parse_line,
    salvage,
    tail_key,
)

_HEX = "0123456789abcdef"
_HEX_BYTES = _HEX.encode()
_TAIL_COUNTS = "last line has no newline (an append was cut short); it names its agency and SHA-256, so it counts"
_CHUNK = 1 << 20
#: A ledger this long (or this many lines longer than its index) gets its digest index (re)written.
INDEX_MIN_LINES = 20_000
_one_reader = threading.Lock()


def _new_reader_lock() -> None:
    """In a forked child, a fresh lock (the parent's may have been held by a thread that is not there)."""
    global _one_reader
    _one_reader = threading.Lock()


os.register_at_fork(after_in_child=_new_reader_lock)


@dataclass
class LedgerState:
    """What the ledger file says: the confirmed uploads, plus the lines it had to question."""

    #: agency -> SHA-256 digests of the source images uploaded there (read-only sets: a
    #: ``set``, or a :class:`~tasks.stores.ledger_index.DoneDigests` when the ledger's index was used).
    done: Mapping[str, AbstractSet[str]] = field(default_factory=dict)
    #: (line number, reason) for every malformed line and a torn last line.
    problems: list[tuple[int, str]] = field(default_factory=list)
    #: Damaged lines that may record uploads: the files they name are "maybe done".
    doubts: list[Doubt] = field(default_factory=list)

    def doubt_about(self, agency: str, sha256: str, name: str) -> Doubt | None:
        """The first damaged line that may record ``name`` (``sha256``) as uploaded to ``agency``."""
        return next((d for d in self.doubts if d.names_item(agency, sha256, name)), None)

    def done_for(self, agency: str) -> AbstractSet[str]:
        """The digests already uploaded to ``agency`` (an empty set when none)."""
        return self.done.get(agency, frozenset())

    def is_done(self, agency: str, sha256: str) -> bool:
        return sha256 in self.done_for(agency)


@dataclass
class _Scan:
    """What one pass over the ledger from byte ``start`` gave (whole lines only)."""

    done: dict[str, set[str]]
    problems: list[tuple[int, str]]
    doubts: list[Doubt]
    #: Number of the last whole line read (lines are numbered from the file's start).
    lines: int
    #: Byte offset just past the last whole line.
    end: int
    #: SHA-256 of the file's bytes [0, end).
    hash: "hashlib._Hash"
    #: What follows the last newline: a torn last line, or nothing.
    torn: bytes


def _scan(fh: BinaryIO, start: int, lines: int, prefix_hash: "hashlib._Hash", check_hex: bool,
          known: tuple[str, ...]) -> _Scan:
    """Read the whole lines from byte ``start`` (line ``lines + 1``) to the end; the fast path is a line as
    record() writes it.

    ``prefix_hash`` holds the SHA-256 of bytes [0, start) and is not
    changed. Without ``check_hex`` the digests are checked for hex
    afterwards, all at once (``read`` scans again with it when one is not).
    Blocks end at a newline, so UTF-8 decodes the same as in one piece.
    """
    done: dict[str, set[str]] = {agency: set() for agency in known}
    add_to = {agency: digests.add for agency, digests in done.items()}.get
    problems: list[tuple[int, str]] = []
    doubts: list[Doubt] = []
    digest, number, end, rest = prefix_hash.copy(), lines, start, []
    fh.seek(start)
    while chunk := fh.read(_CHUNK):
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            rest.append(chunk)
            continue
        block = b"".join((*rest, chunk[:cut])) if rest else chunk[:cut]
        rest = [chunk[cut:]]
        digest.update(block)
        end += len(block)
        text = block.decode("utf-8", errors="replace").split("\n")
        text.pop()  # after the block's last newline: nothing
        first = number + 1
        for number, line in enumerate(text, start=first):
            fields = line.split("\t")
            if len(fields) == 5:  # comments and blank lines have no tabs: they never get here
                add, sha = add_to(fields[1]), fields[3]
                if add is not None and len(sha) == 64 and not (check_hex and sha.strip(_HEX)):
                    add(sha)
                    continue
            _odd_line(done, problems, doubts, number, line, known)
    return _Scan(done, problems, doubts, number, end, digest, b"".join(rest))


def _doubted(doubt: Doubt | None, reason: str) -> str:
    """A problem's reason, told when the line makes files "maybe done"."""
    if doubt is None:
        return f"{reason}; skipped"
    files = ", ".join(sorted(doubt.names) or [f"SHA-256 {d[:12]}…" for d in sorted(doubt.digests)])
    return (f"{reason}; it may record an upload of {files} ({', '.join(sorted(doubt.agencies))}): checked on the "
            "server before anything is sent (fix or delete the line)")


def _odd_line(done: dict[str, set[str]], problems: list[tuple[int, str]], doubts: list[Doubt], number: int,
              line: str, known: tuple[str, ...]) -> None:
    """Anything the fast path did not take: blanks, hand edits, garbage."""
    if not line.strip() or line.lstrip().startswith("#"):
        return
    try:
        entry = parse_line(line, known)
    except ValueError as exc:
        key = salvage(line, known)
        if key is None:
            doubt = doubt_of(number, line, known)
            if doubt is not None:
                doubts.append(doubt)
            problems.append((number, _doubted(doubt, str(exc))))
        else:
            done[key[0]].add(key[1])
            problems.append((number, f"{exc}; it names {key[0]} and a SHA-256, so it counts as "
                                     "done (fix or delete the line)"))
        return
    done[entry.agency].add(entry.sha256)


def _torn_tail(number: int, line: str, known: tuple[str, ...]
               ) -> tuple[tuple[str, str] | None, tuple[int, str] | None, Doubt | None]:
    """An unterminated last line: the key it still names, what to report about it, the doubt it raises."""
    if not line.strip() or line.lstrip().startswith("#"):
        return None, None, None
    key = tail_key(line, known)
    if key:
        return key, (number, _TAIL_COUNTS), None
    doubt = doubt_of(number, line, known, torn=True)
    reason = "torn last line (no newline: an append was cut short)"
    return None, (number, _doubted(doubt, reason) if doubt else f"{reason}; ignored"), doubt


class Ledger:
    """The ledger file at ``path``."""

    def __init__(self, path: Path, agencies: Collection[str] | None = None) -> None:
        self.path = path
        #: The agencies it knows: ``agencies``, else the catalog of the workdir the ledger sits in.
        self.agencies = tuple(agencies) if agencies is not None else agency_names(Workdir(path.parent))

    # --- reading ----------------------------------------------------------------

    def read(self) -> LedgerState:
        """Every confirmed upload in the file; never raises for bad content.

        Streams the file: memory holds the digests, not the lines. Raises
        StoreUnavailable only when the file exists but cannot be read.

        A ledger of :data:`INDEX_MIN_LINES` lines or more keeps a digest index
        beside it (:mod:`tasks.stores.ledger_index`): while the bytes it covers are
        unchanged, only the lines appended since are parsed and the digests
        before them are looked up in the index, so a million-line ledger reads
        in about 0.15 s instead of 1.1–1.4 s (bench/ledger_bench.py). The
        result is the same either way; the index is rewritten once
        :data:`INDEX_MIN_LINES` more lines are appended, and rebuilt from a
        full read when it is missing, stale or corrupt (that read takes
        about 3 s at a million lines: the digests are sorted for the index).
        """
        try:
            with _one_reader:  # the upload stage's agencies read at once: the first one (re)builds the index
                return self._read()
        except OSError as exc:
            raise StoreUnavailable(f"{self.path}: cannot read the ledger ({exc.strerror or exc})") from exc

    def _read(self) -> LedgerState:
        """The index's prefix (when valid) plus the lines after it; writes or drops the index as needed."""
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return LedgerState()
        index_file = index_path(self.path)
        with fh:
            found = load_index(index_file, fh, self.agencies)
            base, prefix_hash = found or (None, hashlib.sha256())
            start, lines = (base.covers, base.lines) if base else (0, 0)
            scan = _scan(fh, start, lines, prefix_hash, check_hex=False, known=self.agencies)
            if not all(_all_hex("".join(shas)) for shas in scan.done.values()):
                scan = _scan(fh, start, lines, prefix_hash, check_hex=True,
                             known=self.agencies)  # a digest is not lower-case hex
            mode = os.fstat(fh.fileno()).st_mode & 0o666
        if scan.lines - lines >= INDEX_MIN_LINES:
            digests = {agency: base.digests[agency].merged(shas) if base else SortedDigests.from_hex(shas)
                       for agency, shas in scan.done.items()}
            problems = (base.problems if base else []) + scan.problems
            doubts = (base.doubts if base else []) + scan.doubts
            save_index(index_file, IndexedPrefix(scan.end, scan.lines, problems, digests, doubts),
                       scan.hash.hexdigest(), mode)
        elif base is None:
            discard_index(index_file)
        state = LedgerState()
        state.problems = (base.problems + scan.problems) if base else scan.problems
        state.doubts = (base.doubts + scan.doubts) if base else scan.doubts
        state.done = scan.done
        key, problem, doubt = _torn_tail(scan.lines + 1, scan.torn.decode("utf-8", errors="replace"), self.agencies)
        if key:
            state.done[key[0]].add(key[1])
        if problem:
            state.problems.append(problem)
        if doubt:
            state.doubts.append(doubt)
        if base:
            state.done = {agency: DoneDigests(base.digests[agency], shas) for agency, shas in state.done.items()}
        return state

    # --- writing ----------------------------------------------------------------

    def record(self, agency: str, filename: str, sha256: str, remote_path: str) -> Entry:
        """Append one confirmed upload: a single write under an exclusive lock, then fsync.

        A torn last line left by a crash is repaired first, so the new line
        starts on a line of its own: cut off when it is unreadable, completed
        with a newline when it already names its agency and SHA-256. A short
        write (disk full) is cut back, leaving the file as it was. Raises
        StoreUnavailable when the ledger cannot be written.
        """
        sha256 = sha256.strip().lower()
        agency = clean_field(agency).strip().lower()
        filename = clean_field(filename).strip()
        if not SHA256_TOKEN.match(sha256) or not agency or not filename:
            raise ValueError(f"not a ledger entry: agency={agency!r} filename={filename!r} sha256={sha256!r}")
        entry = Entry(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      agency, filename, sha256, clean_field(remote_path).strip())
        locked_append(self.path, entry.line().encode("utf-8"), "the ledger",
                      before=lambda fd, size: (HEADER if size == 0 else self._repair_tail(fd, size)).encode("utf-8"))
        return entry

    def check_recordable(self) -> None:
        """StoreUnavailable, one line naming the ledger and what to do, unless an upload could be recorded now
        (the ledger a file this process can read and append to, or, while there is none, its folder writable):
        asked before anything is sent, so no upload is made that could not be recorded (and be sent again)."""
        try:
            check_appendable(self.path)
            if not self.path.exists():
                check_writable(self.path.parent)
        except OSError as exc:
            why = "a folder, not a file" if isinstance(exc, IsADirectoryError) else exc.strerror or str(exc)
            raise StoreUnavailable(f"{self.path}: no upload could be recorded ({why}): nothing is sent — make the "
                                   "ledger a file you can read and write, and run again") from exc

    def _repair_tail(self, fd: int, size: int) -> str:
        """Fix a last line without a newline; return what must precede the new line.

        A tail that names its agency and SHA-256, or a comment, is kept
        (returns ``"\\n"`` to complete it); anything else is cut back to the
        last newline.
        """
        os.lseek(fd, size - 1, os.SEEK_SET)
        if os.read(fd, 1) == b"\n":
            return ""
        pos, block, tail = size, 4096, b""
        while pos > 0:
            start = max(0, pos - block)
            os.lseek(fd, start, os.SEEK_SET)
            chunk = os.read(fd, pos - start)
            tail = chunk + tail
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                cut = start + idx + 1
                tail = tail[idx + 1:]
                break
            pos = start
        else:
            cut = 0
        text = tail.decode("utf-8", errors="replace")
        if tail_key(text, self.agencies) or text.lstrip().startswith("#"):
            return "\n"
        os.ftruncate(fd, cut)
        return HEADER if cut == 0 else ""

    # --- one uploader per agency ---------------------------------------------------

    @contextmanager
    def agency_lock(self, agency: str, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold ``.upload-<agency>.lock`` next to the ledger while uploading to ``agency``: two runs uploading
        the same pending files would post them twice. When another run holds it, ``waiting()`` is called once
        (to say so, and to note what the ledger held then) and this run waits its turn: it then reads the
        ledger the other run wrote, and what that run uploaded is done for this one too.
        """
        with exclusive_lock(self.path.parent / f".upload-{agency}.lock", f"uploading to {agency}", waiting=waiting):
            yield


def _all_hex(text: str) -> bool:
    """True when ``text`` is only lower-case hex digits (one C pass, fast on 60 MB)."""
    try:
        return not text.encode("ascii").translate(None, _HEX_BYTES)
    except UnicodeEncodeError:
        return False


