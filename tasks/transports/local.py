"""``file://`` targets: a local folder (the default outbox)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tasks.core.errors import PermanentError
from tasks.core.files import temp_prefix
from tasks.transports.base import Transport


class LocalFolder(Transport):
    """Copies into a folder: temp name, fsync, rename — a file is there whole or not at all.

    Here a temporary name is safe (no agency watches the folder), so a crash
    never leaves a partial file under the final name; a stale ``.<name>.part``
    from a crash is overwritten by the next attempt.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.display = f"file://{folder}"
        self._open = False

    @property
    def connected(self) -> bool:
        return self._open

    def connect(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PermanentError(f"{self.folder}: cannot create the folder ({exc.strerror})") from exc
        self._open = True

    def close(self) -> None:
        self._open = False

    def remote_size(self, name: str) -> int | None:
        try:
            return (self.folder / name).stat().st_size
        except FileNotFoundError:
            return None

    def send(self, local: Path, name: str) -> None:
        target = self.folder / name
        tmp = self.folder / (temp_prefix(target, len("part")) + "part")  # fits beside a name at the disk's limit
        try:
            with open(local, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, target)
            dir_fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise PermanentError(f"{target}: write failed ({exc.strerror})") from exc

    def remove(self, name: str) -> None:
        try:
            (self.folder / name).unlink(missing_ok=True)
        except OSError as exc:
            raise PermanentError(f"{self.folder / name}: cannot delete ({exc.strerror})") from None

    def remote_path(self, name: str) -> str:
        return str(self.folder / name)
