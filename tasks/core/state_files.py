"""The one defended way to read a state file the project keeps in a workdir (docs/INTERFACE.md, "State files").

A state file may be damaged: a bad byte, cut short, a hand edit of the wrong
type, a folder where the file belongs, unreadable. Whatever the damage, a
reader here never raises a traceback:

* a damaged **line** of a JSON-lines file is skipped and named (its number and
  why, one warning for the file); the other lines are read;
* a damaged **file** is set aside — renamed ``<name>.damaged-<UTC>``, never
  deleted — with one warning naming it and what happens instead (``instead``:
  "Gemini is asked again", "nothing counts as released"), and reads as
  missing, so its owner rebuilds it;
* a file nothing can rebuild is the caller's to stop on: :func:`read_lines`
  with ``stop`` raises that MicrostockError, one line naming the file and the fix.

Wrong types are caught by the schema that writes the file (a pydantic model,
or a dataclass validated by pydantic), passed in as ``parse``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from tasks.core.printable import printable

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a parse of damaged bytes raises: a bad byte (UnicodeDecodeError), torn JSON or TOML, a schema's
#: ValidationError (all ValueError), a value of the wrong type or shape.
DAMAGE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


def set_aside(path: Path) -> Path:
    """Rename a damaged file (or a folder where a file belongs) to ``<name>.damaged-<UTC>``; the new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, aside)
    return aside


def what_is_wrong(exc: BaseException) -> str:
    """What a reader's exception says is wrong with a file or a line, in a few words (the schema's field and
    complaint for a ValidationError)."""
    if isinstance(exc, IsADirectoryError):
        return "a folder, not a file"
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 (byte {exc.start})"
    if isinstance(exc, ValidationError):  # the schema says where: ``agencies: Input should be a valid dictionary``
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return printable(f"{where}: {first['msg']}" if where else first["msg"])[:200]
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return printable(f"{type(exc).__name__}: {text}")[:200]


def _set_aside_saying(path: Path, why: str, instead: str) -> None:
    try:
        aside = f"set aside as {set_aside(path).name}"
    except OSError as exc:
        aside = f"could not be set aside ({exc.strerror or exc})"
    log.warning("%s is damaged (%s): %s; %s", path, why, aside, instead)


def read_file(path: Path, parse: Callable[[bytes], T], instead: str) -> T | None:
    """``parse(bytes of path)``, or None when the file is missing or damaged (then set aside, one warning
    saying ``instead``)."""
    try:
        return parse(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, *DAMAGE) as exc:
        _set_aside_saying(path, what_is_wrong(exc), instead)
        return None


def parse_in_place(path: Path, raw: bytes, parse: Callable[[bytes], T], instead: str) -> T | None:
    """For a file read and rewritten in place under its own lock (the day's request count): ``parse(raw)``, or
    None when damaged — then its bytes are kept beside it as ``<name>.damaged-<UTC>`` (the file itself stays
    open, to be rewritten whole), with one warning saying ``instead``."""
    try:
        return parse(raw)
    except DAMAGE as exc:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        try:
            aside.write_bytes(raw)
            kept = f"its bytes kept as {aside.name}"
        except OSError as err:
            kept = f"its bytes could not be kept ({err.strerror or err})"
        log.warning("%s is damaged (%s): %s; %s", path, what_is_wrong(exc), kept, instead)
        return None


def open_in_place(path: Path) -> int:
    """``os.open`` a state file to read and rewrite in place (created when missing); a folder in its place is
    set aside first, with one warning."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError:
        _set_aside_saying(path, "a folder, not a file", "a new file is started")
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def read_lines(path: Path, parse: Callable[[dict], T], *, stop: Callable[[str], Exception] | None = None,
               instead: str = "") -> list[T]:
    """Each line of a JSON-lines file as ``parse(the line's object)``; [] when the file is missing.

    A line that is not UTF-8, not JSON or of the wrong shape is skipped, and
    one warning names every skipped line. A file that cannot be read (a folder
    in its place, no permission): with ``stop``, ``stop(why)`` is raised (the
    file cannot be rebuilt: the caller's error names it and the fix); else it
    is set aside and reads as empty, one warning saying ``instead``.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        if stop is not None:
            raise stop(what_is_wrong(exc)) from exc
        _set_aside_saying(path, what_is_wrong(exc), instead)
        return []
    found, skipped = [], []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(parse(json.loads(line.decode("utf-8"))))
        except DAMAGE as exc:
            skipped.append(f"{n} ({what_is_wrong(exc)})")
    if skipped:
        log.warning("%s: line %s skipped: not read", path, "; ".join(skipped[:5])
                    + (f"; … and {len(skipped) - 5} more" if len(skipped) > 5 else ""))
    return found
