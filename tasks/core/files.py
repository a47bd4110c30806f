"""Whole-or-nothing file writes, locked appends and content hashes: the file facts every stage relies on."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tasks.core.errors import StageStopped, StoreUnavailable
from tasks.core.state_files import set_aside

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file to fill that appears at ``path`` only whole.

    Writes go to a temp file in the same folder; on success it is fsynced and
    renamed over ``path``; on any error it is removed and ``path`` is untouched.
    A reader sees the old file or the new one, never a partial one. The temp
    name fits the folder's name limit whatever the length of ``path``'s name
    (a long name's temp file is named by its hash instead). A folder in
    ``path``'s place is set aside (``<name>.damaged-<UTC>``, kept with what it
    holds; one warning) and the file written: every file written here is
    rewritten whole, so nothing the folder stood for is lost. So is a file
    where its folder belongs (:func:`make_folder`).
    """
    make_folder(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.replace(tmp, path)
        except IsADirectoryError:
            log.warning("%s is a folder where a file belongs: set aside as %s (kept: look in it, then delete it); "
                        "the file is written anew", path, set_aside(path).name)
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_folder(folder: Path) -> None:
    """``folder`` and its parents made; a file where one of them belongs is set aside first
    (``<name>.damaged-<UTC>``, kept; one warning)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return
    except (FileExistsError, NotADirectoryError):
        pass
    for at in reversed([folder, *folder.parents]):
        if at.exists() and not at.is_dir():
            try:
                log.warning("%s is a file where a folder belongs: set aside as %s", at, set_aside(at).name)
            except FileNotFoundError:  # another run set it aside at the same moment
                pass
            break
    folder.mkdir(parents=True, exist_ok=True)


#: What mkstemp adds to a prefix: 8 random characters, then ``.tmp``.
_TEMP_EXTRA = 8 + len(".tmp")


def name_max(folder: Path) -> int:
    """The longest file name, in bytes, ``folder``'s file system takes (255 when it cannot say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def temp_prefix(path: Path, room: int = _TEMP_EXTRA) -> str:
    """The start of a temp file's name beside ``path``: ``.<name>.``, or ``.<16 hex of the name's hash>.``
    when that plus ``room`` more bytes would not fit the folder's name limit (the target keeps its name)."""
    prefix = f".{path.name}."
    if len(os.fsencode(prefix)) + room <= name_max(path.parent):
        return prefix
    return f".{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:16]}."


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_file`)."""
    with atomic_file(path) as fh:
        fh.write(data)


def check_writable(folder: Path) -> None:
    """OSError unless a file can be made in ``folder``: this process's own temporary file, made and removed, so
    commands checking the same folder at the same moment never remove each other's probe."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test."):
        pass


def check_appendable(path: Path) -> None:
    """OSError unless ``path`` is missing or a file this process can open to read and append to: a folder in its
    place raises IsADirectoryError, a file its modes, an immutable flag or a read-only mount protect raise theirs."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        return
    os.close(fd)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (memory stays flat)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fsync_dir(folder: Path) -> None:
    """Make a new or renamed file's name in ``folder`` survive a power cut (best effort: a folder that
    cannot be opened or synced, as on some network file systems, is left as it is)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: What ``errno`` says when a file may be read but not written: its modes, an immutable flag, a read-only mount.
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@contextmanager
def exclusive_lock(path: Path, what: str, *, waiting: Callable[[], None] | None = None,
                   busy: Exception | None = None) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on ``path`` (created when missing) while ``what`` is done.

    When another process holds it: ``busy`` is raised at once when given (a
    second run must not wait: it leaves the work to the first), else
    ``waiting()`` is called once (to say so) and this one waits its turn.
    Closing the file releases the lock, so a crash never leaves it held.
    A lock is only held, never written: a read-only lock file (its modes,
    an immutable flag, a read-only mount) is opened to read and locked the
    same (``flock`` needs no write access; every process locks the same
    inode). StoreUnavailable naming ``path`` and ``what`` when the lock
    cannot be opened at all (a folder in its place, say).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno not in _READ_ONLY_ERRNOS:
                raise
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # none there, and its folder takes no new file
                raise exc from None
    except OSError as exc:
        raise StoreUnavailable(f"{path}: cannot open the lock for {what} ({exc.strerror or exc})") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if busy is not None:
                raise busy from None
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def locked_append(path: Path, record: bytes, what: str, *, before: Callable[[int, int], bytes]) -> None:
    """Append ``record`` to ``path`` as one ``write`` under an exclusive ``fcntl`` lock, then ``fsync``.

    The file (and its folder) is created when missing. Under the lock,
    ``before(fd, size)`` returns what must precede the record (a header for
    an empty file, a newline after a torn last line); it may cut the file
    back with ``os.ftruncate`` first. A short write (disk full) or a failed
    ``fsync`` cuts the file back to where the append started, so no half
    record is ever left. A new file's name is fsynced into its folder.
    Every ``OSError`` is raised as StoreUnavailable naming ``path`` and
    ``what`` ("the ledger"): ``cannot open …`` or ``cannot append to …``.
    Closing the file releases the lock, so a crash never leaves it held.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreUnavailable(f"{path}: cannot open {what} ({exc.strerror or exc})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        payload = before(fd, size) + record
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            if os.write(fd, payload) != len(payload):
                raise OSError(errno.ENOSPC, "short write (disk full?)")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, end)
            raise
    except OSError as exc:
        raise StoreUnavailable(f"{path}: cannot append to {what} ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if size == 0:
        fsync_dir(path.parent)


#: What ``errno`` says when a write finds no room: the disk is full, or the user's quota on it is used up.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """Did this write fail for want of room on the disk (ENOSPC, EDQUOT)?"""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def cannot_write(path: Path, exc: OSError, kept: str) -> StageStopped:
    """The one line a stage stops with when ``path`` cannot be written for a cause other than a full disk (a
    read-only folder or mount, say; StageStopped ``unwritable``): the file, why, ``kept`` (what the stage keeps)
    and what to do."""
    return StageStopped(f"{path} cannot be written ({exc.strerror or exc}): {kept} — make {path.parent} writable by "
                        "you and run again", kind="unwritable")


def disk_of(path: Path) -> Path:
    """The mount point of the disk ``path`` is on (the nearest existing folder's when it does not exist yet)."""
    at = Path(os.path.abspath(path))
    while not at.exists() and at != at.parent:
        at = at.parent
    while not os.path.ismount(at) and at != at.parent:
        at = at.parent
    return at
