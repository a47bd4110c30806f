"""A deterministic ZIP, streamed to disk and written atomically.

The same entries give the same bytes: entries sorted by name, fixed
timestamps, permissions and creator system; JPEGs stored (they do not
compress), text deflated. Each file is copied in 1 MiB chunks, so the
archive is never in memory; an entry that may pass 4 GiB is written as
ZIP64, and the archive's own ZIP64 records appear when it needs them.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from tasks.core.files import atomic_file

#: The earliest time a ZIP can hold; nothing about the run leaks into the archive.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_STORED_SUFFIXES = {".jpg", ".jpeg", ".png", ".zip"}
_CHUNK = 1 << 20


def _info(arcname: str, size: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time=FIXED_TIME)
    info.create_system = 3  # Unix, whatever machine writes it
    info.external_attr = 0o100644 << 16
    stored = Path(arcname).suffix.lower() in _STORED_SUFFIXES
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    info.file_size = size
    return info


def write_zip(target: Path, entries: dict[str, Path]) -> None:
    """Write ``entries`` (name in the archive → file) to ``target``, atomically (a reader
    sees the old archive or the new one, never half of one)."""
    with atomic_file(target) as fh, zipfile.ZipFile(fh, "w", allowZip64=True) as zf:
        for arcname in sorted(entries):
            src = entries[arcname]
            info = _info(arcname, src.stat().st_size)
            # zipfile's own rule (size × 1.05 for deflate overhead), made explicit.
            large = info.file_size * 1.05 > zipfile.ZIP64_LIMIT
            with open(src, "rb") as f_in, zf.open(info, "w", force_zip64=large) as f_out:
                shutil.copyfileobj(f_in, f_out, _CHUNK)
