"""The workdir: where every stage reads its input and leaves its result.

The workdir is the truth. A stage derives what is left to do from what is
here, never from memory of an earlier run (INTERFACE.md lists the layout).
"""

from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.files import check_appendable, check_writable
from tasks.core.state_files import set_aside

log = logging.getLogger(__name__)

DEFAULT_WORKDIR = "./microstock-data"


def default_workdir() -> Path:
    """``$MICROSTOCK_WORKDIR``, else ``./microstock-data``."""
    return Path(os.environ.get("MICROSTOCK_WORKDIR") or DEFAULT_WORKDIR)


def _misplaced(path: Path) -> bool:
    """A file (or a link to no folder) where a folder belongs."""
    return path.is_file() or path.is_symlink() and not path.is_dir()


@dataclass(frozen=True)
class Workdir:
    root: Path

    def config_path(self, config: str | Path | None = None) -> Path:
        """The configuration file: ``config`` when given, else ``microstock.toml`` in the workdir."""
        return Path(config) if config else self.config_file

    @property
    def config_file(self) -> Path:
        return self.root / "microstock.toml"

    @property
    def assets(self) -> Path:
        return self.root / "assets"

    @property
    def csv(self) -> Path:
        return self.root / "csv"

    @property
    def packs(self) -> Path:
        return self.root / "packs"

    @property
    def ledger(self) -> Path:
        return self.root / "uploads.ledger"

    @property
    def dead_letter_db(self) -> Path:
        return self.root / "dead_letter.db"

    @property
    def reports(self) -> Path:
        """Run reports (rejected files, validation) as JSON, for people and tests."""
        return self.root / "reports"

    @property
    def gemini_models(self) -> Path:
        """What Gemini listed as its models on one UTC day (JSON; tasks/gemini/served.py), asked once a day."""
        return self.root / "gemini-models.json"

    @property
    def agencies(self) -> Path:
        """The contributor's own agency specs, ``<name>.toml`` each (optional; see docs/AGENCIES.md)."""
        return self.root / "agencies"

    def outbox(self, agency: str) -> Path:
        return self.root / "outbox" / agency

    def sidecar(self, asset_name: str) -> Path:
        """``assets/<stem>.json``: the asset's metadata once described."""
        return self.assets / (Path(asset_name).stem + ".json")

    def prepare(self) -> "Workdir":
        """Create the folders every stage expects; ConfigError if the workdir is unusable. A file where one of
        its folders belongs is set aside (``<name>.damaged-<UTC>``, one warning) and the folder made.

        Checked before anything is done, each a ConfigError of one line naming the path and what to do: every
        folder can be written (a read-only one would fail a stage halfway), and the ledger, when there is one,
        is a file that can be read and appended to (else an upload would be sent that could not be recorded,
        and sent again by the next run).
        """
        try:
            for d in (self.root, self.assets, self.csv, self.packs, self.reports):
                if d != self.root and _misplaced(d):
                    # Under a lock on the workdir's own folder, looked at again: of two runs preparing at once, the
                    # slower one's rename took the folder the faster had just made (a clean-clone CI run).
                    fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX)
                        if _misplaced(d):
                            log.warning("%s is a file where a folder belongs: set aside as %s", d, set_aside(d).name)
                    finally:
                        os.close(fd)
                d.mkdir(parents=True, exist_ok=True)
            check_writable(self.root)  # each run its own probe: two runs starting at once never fail each other
        except OSError as exc:
            raise ConfigError(f"workdir {self.root} is not usable: {exc.strerror or exc}") from exc
        for d in (self.assets, self.csv, self.packs, self.reports):
            try:
                check_writable(d)
            except OSError as exc:
                raise ConfigError(f"{d} cannot be written ({exc.strerror or exc}): nothing was done — make the "
                                  "folder writable by you and run again") from exc
        try:
            check_appendable(self.ledger)
        except IsADirectoryError as exc:
            raise ConfigError(f"{self.ledger} is a folder, not the ledger file: nothing was done (no upload could "
                              "be recorded) — move the folder away (if it holds your ledger file, put that file "
                              f"at {self.ledger}) and run again") from exc
        except OSError as exc:
            raise ConfigError(f"{self.ledger} cannot be read and appended to ({exc.strerror or exc}): nothing was "
                              "done (no upload could be recorded) — make it readable and writable by you and run "
                              "again") from exc
        return self
