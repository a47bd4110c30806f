"""What every ``microstock`` command shares: its errors end in one place (flows.cli_common.Commands) as one line on
stderr and the exit code of their group, and every word of every help text is shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import click
import pytest
import typer
from typer.testing import CliRunner

from flows.cli import app
from tasks.core.errors import BadInput, ConfigError, PermanentError, StageStopped, StoreUnavailable

runner = CliRunner()


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    """Every command and command group under ``command``, with the words that call it."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _written_brackets(command: click.Command) -> set[str]:
    """The bracketed words its help texts were written with (``[review]``, escaped for rich or not)."""
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    return {f"[{word}]" for text in texts for word in re.findall(r"\\?\[([a-z][\w.-]*)\]", text)}


def test_every_help_shows_every_word():
    """Rich markup took ``[review]`` and ``[gemini]`` for tags and dropped them from the help."""
    tree = list(_commands(typer.main.get_command(app)))
    assert len(tree) > 30  # the walk reaches the sub-commands of every group
    shown: dict[tuple[str, ...], str] = {}
    for path, command in tree:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"}, catch_exceptions=False)
        assert result.exit_code == 0, (path, result.output)
        shown[path] = result.output
        for word in _written_brackets(command):
            assert word in result.output, (path, word, result.output)
    assert "([review] enabled = true)" in shown[("review",)] and "[review]" in shown[()]
    assert "[gemini] mode" in shown[("batches",)] and "[gemini]" in shown[()]


@pytest.mark.parametrize(("error", "code"), [
    (ConfigError("[gemini] model: gemini-1.0 is retired"), 2),
    (BadInput("sunset.jpg", "no such asset"), 2),
    (StoreUnavailable("uploads.ledger: cannot read the ledger (locked)"), 2),
    (StageStopped("the day's Gemini quota is used up", kind="quota", code="daily"), 1),
    (PermanentError("Gemini refused the call", code=400), 1),
])
def test_an_error_in_a_command_is_one_line_and_its_groups_exit_code(monkeypatch, tmp_path, error, code):
    def raises(*args):
        raise error

    monkeypatch.setattr("flows.cli_ledger.ledger_agencies", raises)
    result = runner.invoke(app, ["ledger", "status", "--workdir", str(tmp_path / "w")], catch_exceptions=False)
    assert result.exit_code == code
    assert result.stderr == f"error: {error.message}\n" and result.stdout == ""


def _microstock_raising(error: str, tmp_path) -> subprocess.CompletedProcess:
    """The console script's entry, with ``ledger status`` raising ``error`` (an expression)."""
    probe = ("import flows.cli_ledger as ledger\nfrom tasks.core.errors import StageStopped\n"
             f"def raises(*args):\n    raise {error}\n"
             "ledger.ledger_agencies = raises\nfrom flows.cli import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", probe, "ledger", "status", "--workdir", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


def test_the_console_script_shows_no_traceback(tmp_path):
    out = _microstock_raising("StageStopped('[gemini] stopped: the key was refused')", tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == "error: [gemini] stopped: the key was refused\n"


def test_ctrl_c_in_a_command_exits_130_saying_nothing_was_recorded(tmp_path):
    out = _microstock_raising("KeyboardInterrupt", tmp_path)
    assert out.returncode == 130 and "Traceback" not in out.stderr
    assert out.stderr.startswith("interrupted: nothing recorded for unfinished work")
