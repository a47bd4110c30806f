"""A command's exit code follows the error group alone (docs/INTERFACE.md, "Exit codes"; the one table:
``flows.cli_common.EXIT_CODES``), whichever command meets it.

Every command of ``microstock`` is walked from typer's app, so a new command is driven too without an edit here:
into a damaged ``microstock.toml`` (ConfigError), a name or file that is nothing of the workdir's (BadInput where
it takes an asset), a damaged ``dead_letter.db`` where it opens the dead-letter store (StoreUnavailable). Each
ends with one ``error:`` line and its group's code. The codes are written out here as INTERFACE documents them
(not read from the table), so the test says what a contributor relies on.
"""

from __future__ import annotations

import json

import click
import pytest
import typer

from flows.cli import app
from tasks.core.workdir import Workdir

#: INTERFACE.md's codes: the command cannot start (ConfigError, BadInput, StoreUnavailable); a name the command
#: reports per name (``review``, ``similar release``: "a name that is no described asset … nothing changed").
CANNOT_START, NAME_NOT_DESCRIBED = 2, 1

#: What an argument is given, by its parameter's name; any other argument: a name that is nothing of the workdir's.
ARGUMENTS = {"agency": "adobe"}
NOTHING = "nope.jpg"
#: Options a command needs to get as far as its arguments (``review edit`` with nothing to change stops first).
OPTIONS = {("review", "edit"): ["--title", "A title"]}

#: Runs until stopped: driven into a ConfigError of its own (:data:`WITHOUT_WORKDIR_CASES`'s ``serve``).
LONG_RUNNING = {("serve",)}
#: Commands that do not meet a damaged ``microstock.toml``: they never read it, or (``secrets set``, ``ledger
#: done``, ``review edit``) stop on the name they are given first; they say nothing of it.
MEET_NO_CONFIG = {("secrets", "list"), ("server", "start"), ("server", "status"), ("server", "stop"),
                  ("review", "list"), ("review", "approve"), ("review", "reject"), ("review", "reopen"),
                  ("similar", "list"), ("similar", "release"), ("secrets", "set"), ("ledger", "done"),
                  ("review", "edit")}
#: Commands given a name that is no described asset say so per name and exit 1 (INTERFACE: kept as documented).
PER_NAME = {("review", "approve"), ("review", "reject"), ("review", "reopen"), ("review", "edit"),
            ("similar", "release")}
#: Commands that open the dead-letter store and end on it when it is unusable (``run`` leaves that work pending).
OPEN_DEAD_LETTERS = [("dead-letter", "list"), ("dead-letter", "summary"), ("replay",)]


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    """Every leaf command under ``command``, with the words that call it."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


COMMANDS = dict(_commands(typer.main.get_command(app)))
WITH_WORKDIR = [p for p, c in COMMANDS.items() if any(o.name == "workdir" for o in c.params)]
TAKING_NAMES = [p for p in WITH_WORKDIR if any(o.param_type_name == "argument" for o in COMMANDS[p].params)]


def _argv(path: tuple[str, ...], wd: Workdir) -> list[str]:
    """``path`` with a value for each argument, the options it needs, and ``--workdir``."""
    arguments = [ARGUMENTS.get(o.name, NOTHING) for o in COMMANDS[path].params
                 if o.param_type_name == "argument"]
    return [*path, *arguments, *OPTIONS.get(path, []), "--workdir", str(wd.root)]


def _on_the_sessions_server() -> dict[str, str | None]:
    """The environment of a command run on the session's server (``prefect_harness``): its address given as a
    contributor gives one, so that no command starts a workdir server."""
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_HOME": None, "PREFECT_API_URL": PREFECT_API_URL.value()}


def _one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:], result.stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("path", [p for p in WITH_WORKDIR if p not in LONG_RUNNING], ids=" ".join)
def test_a_damaged_config_is_exit_2_in_every_command_that_reads_it(path, prefect_harness, run_microstock, tmp_path):
    """The run's flow (``replay``) refuses it as the command itself does: 2, not 1 for a failed flow."""
    wd = Workdir(tmp_path / "data").prepare()
    wd.config_file.write_text("[agencies\n", encoding="utf-8")
    result = run_microstock(*_argv(path, wd), env=_on_the_sessions_server())
    if path in MEET_NO_CONFIG:
        assert "microstock.toml" not in result.output, result.output[-3000:]
        return
    assert result.exit_code == CANNOT_START, result.output[-3000:]
    assert _one_error_line(result).startswith(f"error: {wd.config_file}: cannot read: "), result.stderr


@pytest.mark.parametrize("path", TAKING_NAMES, ids=" ".join)
def test_a_name_that_is_nothing_of_the_workdir_is_exit_2_or_said_per_name(path, run_microstock, tmp_path):
    """An asset, secret or batch job the workdir does not have: the command cannot start (``similar distinct``
    too, which exited 1), but for the commands INTERFACE says report each such name and exit 1."""
    wd = Workdir(tmp_path / "data").prepare()
    result = run_microstock(*_argv(path, wd), env={"PREFECT_HOME": None, "PREFECT_API_URL": None})
    assert result.exit_code == (NAME_NOT_DESCRIBED if path in PER_NAME else CANNOT_START), result.output[-3000:]
    assert "nope.jpg" in _one_error_line(result)


@pytest.mark.parametrize("path", OPEN_DEAD_LETTERS, ids=" ".join)
def test_an_unreadable_dead_letter_store_is_exit_2(path, prefect_harness, run_microstock, tmp_path):
    """``replay`` opens it in its flow: a failed flow run, yet 2 as where the command opens it itself."""
    assert path in COMMANDS
    wd = Workdir(tmp_path / "data").prepare()
    wd.dead_letter_db.write_bytes(b"not a database" * 100)
    result = run_microstock(*_argv(path, wd), env=_on_the_sessions_server())
    assert result.exit_code == CANNOT_START, result.output[-3000:]
    assert _one_error_line(result) == f"error: {wd.dead_letter_db}: cannot use the dead-letter store: file is not " \
                                      "a database"


def _cluster_up(tmp_path) -> list[str]:
    home = tmp_path / "cluster"
    home.mkdir()
    (home / "cluster.json").write_text(json.dumps({"pg_home": str(home / "pg"), "pg_port": 1, "api_port": 1,
                                                   "host": "127.0.0.1"}), encoding="utf-8")
    return ["cluster", "up", "--home", str(home)]


#: Commands without ``--workdir`` (and the long-running one), each with a ConfigError of its own, or why none.
WITHOUT_WORKDIR_CASES = {
    ("serve",): lambda tmp_path: ["serve", "--timezone", "Nowhere/Atlantis",
                                  "--workdir", str(Workdir(tmp_path / "data").prepare().root)],
    ("accounts", "deploy"): lambda tmp_path: ["accounts", "deploy", str(tmp_path / "accounts.toml")],
    ("cluster", "up"): _cluster_up,
}
#: Commands that raise no error of the tree: they list or stop what there is.
RAISE_NONE = {("server", "list"), ("cluster", "down")}


def test_every_command_without_a_workdir_has_its_own_case():
    assert set(COMMANDS) - set(WITH_WORKDIR) | LONG_RUNNING == set(WITHOUT_WORKDIR_CASES) | RAISE_NONE


@pytest.mark.parametrize("path", list(WITHOUT_WORKDIR_CASES), ids=" ".join)
def test_a_command_without_a_workdir_refusing_to_start_is_exit_2(path, run_microstock, tmp_path):
    result = run_microstock(*WITHOUT_WORKDIR_CASES[path](tmp_path), env={"PREFECT_HOME": None, "PREFECT_API_URL": None})
    assert result.exit_code == CANNOT_START, result.output[-3000:]
    _one_error_line(result)
