"""A command prints the contributor's file names as they are: Rich markup in a name (``[bold red]``,
``[link=…]``) is shown, never taken as style or a link; control characters are written out."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from flows.cli_common import command_console
from tasks.core.workdir import Workdir

HOSTILE = "[bold red]x[/].jpg"
LINK = "[link=http://evil]click[/link].jpg"


def test_the_command_console_prints_markup_as_written(capsys):
    command_console(stderr=False).print(f"{HOSTILE} and {LINK}")
    command_console(stderr=True).print(f"{LINK}: no such asset")
    said = capsys.readouterr()
    assert said.out == f"{HOSTILE} and {LINK}\n" and said.err == f"{LINK}: no such asset\n"


def test_an_error_naming_a_hostile_file_is_one_literal_line(tmp_path):
    """``similar release`` of no described asset: the error line (``fail``'s and ``print_error``'s) shows the
    name whole, the escape sequence in it written out."""
    wd = Workdir(tmp_path / "w").prepare()
    result = CliRunner().invoke(app, ["similar", "release", f"{HOSTILE}\x1b[2J", "--workdir", str(wd.root)],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr == f"error: no described asset {HOSTILE}\\x1b[2J in {wd.assets}: nothing changed\n"


def test_review_of_an_unknown_hostile_name_says_it_literally(run_microstock, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    result = run_microstock("review", "edit", LINK, "--title", "A title", "--workdir", str(wd.root),
                            env={"PREFECT_API_URL": None})
    assert result.exit_code == 1
    assert result.stderr == f"error: {LINK}: no such described asset in {wd.assets}: nothing changed\n"


def test_dead_letter_list_writes_out_the_control_characters_of_a_parked_name(tmp_path):
    """A parked job of a file named with an escape sequence (it retitles a terminal) and a newline (it forges a
    line): one line per job, the name's control characters written out."""
    from tasks.core.settings import Settings
    from tasks.stores.dead_letter_open import open_store

    wd = Workdir(tmp_path / "w").prepare()
    name = "\x1b]0;PWNED\x07sea\nview.jpg"
    open_store(wd, Settings()).park("a" * 64, payload={}, model="m", error_class="exhausted:503",
                                    error_message="x", attempts=2, asset_name=name)
    result = CliRunner().invoke(app, ["dead-letter", "list", "--workdir", str(wd.root)], catch_exceptions=False)
    assert result.exit_code == 0
    (line,) = result.stdout.splitlines()
    assert "\x1b" not in line and line.endswith("parked  \\x1b]0;PWNED\\x07sea\\x0aview.jpg")
