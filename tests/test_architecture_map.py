"""docs/ARCHITECTURE.md's folder map stays true: every module under flows/ and tasks/ is named there, in its own
folder, and the map names no module that is gone. The map is the first thing the next person reads; it had
fallen 14 modules behind the code (issue 51).

The map is the first fenced block of "## The folders": a line ending a word with ``/`` opens a folder at its
indentation; every ``name.py`` on an entry line (indented less than the descriptions' column, and not part of a
path such as ``tasks/core/files.py``) is a module of the folder open above it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where an entry's description continues on its own lines (the map's second column).
DESCRIPTION_COLUMN = 28


def mapped_modules() -> set[str]:
    """Every module the map names, as ``folder/name.py`` paths."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("## The folders", 1)[1].split("```", 2)[1]
    folders: list[tuple[int, str]] = []  # (indentation, name) of each folder open above the current line
    named = set()
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue
        folders = [(i, f) for i, f in folders if i < indent]
        if folder := re.match(r"\s*([\w.]+)/(\s|$)", line):
            folders.append((indent, folder.group(1)))
            continue
        where = "/".join(f for _, f in folders)
        named |= {f"{where}/{name}" for name in re.findall(r"(?<![\w/])(\w+\.py)\b", line)}
    return named


def project_modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for folder in ("flows", "tasks") for p in (ROOT / folder).rglob("*.py")
            if p.name != "__init__.py"}


def test_every_module_of_flows_and_tasks_is_on_the_map():
    missing = sorted(project_modules() - mapped_modules())
    assert not missing, f"not on docs/ARCHITECTURE.md's map: {missing}"


def test_the_map_names_no_module_that_is_gone():
    gone = sorted(m for m in mapped_modules() if m.startswith(("flows/", "tasks/")) and not (ROOT / m).is_file())
    assert not gone, f"docs/ARCHITECTURE.md's map names modules that do not exist: {gone}"
