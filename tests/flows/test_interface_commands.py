"""Every command and flag docs/INTERFACE.md names exists: each row of its command tables that starts with
`` `microstock …` `` is read (alternatives such as ``server start|status|stop`` and ``review [list|approve]``
expanded, a second command of the row after `` / `` taken too), and each command's ``--help`` must exist and show
every ``--flag`` the row names. INTERFACE is the contract scripts rely on; a renamed flag breaks them (issue 51).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from flows.cli import app

ROOT = Path(__file__).resolve().parents[2]
#: A command word, or alternatives of them (``start|status|stop``, ``[list|approve]``).
WORDS = re.compile(r"\[?[a-z][a-z-]*(\|[a-z][a-z-]*)*\]?")


def named_commands() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(command words, flags) for every command a row of INTERFACE's tables names in its first cell."""
    rows = [line for line in (ROOT / "docs" / "INTERFACE.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `microstock ")]
    top = set(typer.main.get_command(app).commands)  # the click group typer builds: every top-level name
    found = []
    for row in rows:
        cell = row[2:].split(" | ")[0].replace("\\|", "|")
        for span in re.findall(r"`([^`]*)`", cell):
            words = span.split()
            words = words[1:] if words[:1] == ["microstock"] else words
            if not words or words[0] not in top:  # a span that is no command (`microstock.toml`, a value)
                continue
            paths: list[tuple[str, ...]] = [()]
            for word in words:
                if not WORDS.fullmatch(word):
                    break
                paths = [p + (alt,) for p in paths for alt in word.strip("[]").split("|")]
            flags = tuple(re.findall(r"--[a-z][a-z-]*", span))
            found += [(p, flags) for p in paths]
    return found


COMMANDS = named_commands()


def test_interface_names_the_commands_it_should():
    """The reading above finds what INTERFACE says (so the test below cannot pass by finding nothing)."""
    named = {" ".join(p) for p, _ in COMMANDS}
    assert {"run", "replay", "dead-letter list", "ledger done", "server stop", "review reject", "serve"} <= named


@pytest.mark.parametrize(("command", "flags"), COMMANDS, ids=[" ".join(p) + " " + " ".join(f) for p, f in COMMANDS])
def test_every_command_and_flag_interface_names_exists(command, flags):
    shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, f"microstock {' '.join(command)}: {shown.output[-500:]}"
    assert [f for f in flags if f not in shown.output] == [], f"microstock {' '.join(command)} --help"
