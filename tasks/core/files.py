"""Whole-or-nothing file writes and content hashes: the two file facts every stage relies on."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

_CHUNK = 1 << 20


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file to fill that appears at ``path`` only whole.

    Writes go to a temp file in the same folder; on success it is fsynced and
    renamed over ``path``; on any error it is removed and ``path`` is untouched.
    A reader sees the old file or the new one, never a partial one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_file`)."""
    with atomic_file(path) as fh:
        fh.write(data)


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
