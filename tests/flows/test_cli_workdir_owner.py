"""A workdir that is not the contributor's is refused before any secret is read, with one line naming the path
and why, exit 2 (tasks/core/ownership.py): one the second local user made (given with ``--workdir``, or the
default ``./microstock-data`` in a folder of theirs), one of ours any other user could write in, a config file,
an agency spec or a symlink on the way that is theirs. Every command that takes ``--workdir`` refuses it, and so
does the flow itself (a run created through the API), so the check cannot be gone round."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import typer.main

from tasks import agencies
from tasks.core.errors import ConfigError
from tasks.core.workdir import Workdir
from tests.fakes.local_users import other_uid, other_user, run_as_other
from tests.fakes.servers import PASSWORD, FtpServer, ftp_server  # noqa: F401  (fixture)
from tests.orchestration.test_server import make_photo

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]
WHY_OWNER = "not using it — it could send your passwords where that user chooses"


@pytest.fixture
def shared():
    """A folder every local user may write in, sticky like ``/tmp`` (``tmp_path`` is root's alone: the other user
    could not reach into it)."""
    other_uid()  # skipped where there can be no second user
    folder = Path(tempfile.mkdtemp(prefix="microstock-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "source"
    folder.mkdir()
    make_photo(folder / "red_barn.jpg", "red")
    return folder


def as_other(*argv: str, input: str | None = None) -> None:
    run_as_other(list(argv), input=input, text=True, check=True, capture_output=True)


def their_workdir(parent: Path, ftp: FtpServer) -> Path:
    """``microstock-data`` made by the other user in ``parent``, its agency target their FTP server."""
    wd = parent / "microstock-data"
    as_other("mkdir", str(wd))
    as_other("tee", str(wd / "microstock.toml"), input=f"[agencies.dreamstime]\ntarget = '{ftp.url()}'\n")
    return wd


def owned_by_them(path: Path) -> str:
    return f"{path} is owned by another user (uid {other_uid()})"


@pytest.mark.parametrize("given", ["--workdir", "the default ./microstock-data"])
def test_another_users_workdir_is_refused_and_their_ftp_server_gets_no_login(given, shared, ftp_server, source,
                                                                              tmp_path):
    """The issue's attack: the other user's workdir names their FTP server, the contributor's password is in the
    environment; the run stops with one line before any connection (old code: the server got USER and PASS)."""
    if given == "--workdir":
        wd, cwd = their_workdir(shared, ftp_server), tmp_path
        args, expected = ["--workdir", str(wd)], f"error: workdir {owned_by_them(wd)}: {WHY_OWNER}"
    else:
        cwd = shared / "their-folder"
        as_other("mkdir", str(cwd))
        wd, args = their_workdir(cwd, ftp_server), []
        expected = (f"error: workdir {wd} is inside {cwd}, which is owned by another user (uid {other_uid()}): "
                    f"{WHY_OWNER}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "MICROSTOCK_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), MICROSTOCK_PREFECT_SERVER="ephemeral",
               MICROSTOCK_DREAMSTIME_PASSWORD=PASSWORD)
    result = subprocess.run(MICROSTOCK + ["run", "--source", str(source), "--agency", "dreamstime", *args],
                            env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.splitlines() == [expected], result.stderr[-3000:]
    assert (ftp_server.log.connections, ftp_server.log.passwords) == (0, 0), "the other user's server was reached"
    assert not (wd / "assets").exists(), "something was written in their workdir"


def test_a_run_created_through_the_api_with_their_workdir_is_refused(shared, ftp_server, source, prefect_harness,
                                                                     monkeypatch):
    """A deployment run gets ``workdir`` as a parameter: the flow refuses it as the command does (the issue's run
    created under the contributor's ``serve`` sent the password within 9 s)."""
    from flows.stock_batch import stock_batch

    wd = their_workdir(shared, ftp_server)
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    state = stock_batch(workdir=str(wd), source=str(source), agencies=["dreamstime"], return_state=True)
    error = state.result(raise_on_failure=False)
    assert isinstance(error, ConfigError) and error.message == f"workdir {owned_by_them(wd)}: {WHY_OWNER}", error
    assert (ftp_server.log.connections, ftp_server.log.passwords) == (0, 0), "the other user's server was reached"


def _made_group_writable(wd: Path, shared: Path) -> tuple[list[str], str]:
    os.chown(wd, -1, pwd.getpwnam(other_user()).pw_gid)  # a group the other user is in
    wd.chmod(0o770)
    return [], f"workdir {wd} is writable by other users (mode 0770)"


def _world_writable_config(wd: Path, shared: Path) -> tuple[list[str], str]:
    Workdir(wd).config_file.chmod(0o666)
    return [], f"config file {Workdir(wd).config_file} is writable by other users (mode 0666)"


def _their_agency_spec(wd: Path, shared: Path) -> tuple[list[str], str]:
    spec = Workdir(wd).agencies / "adobe.toml"  # a whole spec: the old code used it as the contributor's own
    spec.parent.mkdir()
    shutil.copy(Path(agencies.__file__).parent / "adobe.toml", spec)
    os.chown(spec, other_uid(), -1)
    return [], f"agency spec {owned_by_them(spec)}"


def _their_config_file(wd: Path, shared: Path) -> tuple[list[str], str]:
    config = shared / "their.toml"
    as_other("tee", str(config), input="[agencies.adobe]\nenabled = true\n")
    return ["--config", str(config)], f"config file {owned_by_them(config)}"


def _their_target_folder(wd: Path, shared: Path) -> tuple[list[str], str]:
    as_other("mkdir", str(shared / "outbox"))
    Workdir(wd).config_file.write_text(f"[agencies.adobe]\ntarget = 'file://{shared}/outbox'\n", encoding="utf-8")
    return [], f"adobe's target folder {owned_by_them(shared / 'outbox')}"


def _their_ca_file(wd: Path, shared: Path) -> tuple[list[str], str]:
    """Whoever can change the certificates an FTPS target trusts can stand between it and the password."""
    as_other("tee", str(shared / "ca.pem"), input="")
    Workdir(wd).config_file.write_text(f"[agencies.adobe]\ntarget = 'ftps://u@127.0.0.1:1/'\n"
                                       f"ca_file = '{shared}/ca.pem'\n", encoding="utf-8")
    return [], f"agencies.adobe.ca_file {owned_by_them(shared / 'ca.pem')}"


def _their_pinned_certificates(wd: Path, shared: Path) -> tuple[list[str], str]:
    (wd / "ftps_known_certs").write_text("", encoding="utf-8")
    os.chown(wd / "ftps_known_certs", other_uid(), -1)
    Workdir(wd).config_file.write_text("[agencies.adobe]\ntarget = 'ftps://u@127.0.0.1:1/'\n"
                                       "trust_unknown_host = true\n", encoding="utf-8")
    return [], f"the pinned FTPS certificates {owned_by_them(wd / 'ftps_known_certs')}"


@pytest.mark.parametrize("case", [_made_group_writable, _world_writable_config, _their_agency_spec,
                                  _their_config_file, _their_target_folder, _their_ca_file,
                                  _their_pinned_certificates], ids=lambda c: c.__name__.strip("_"))
def test_a_workdir_another_user_could_change_is_refused(case, shared, source, run_microstock, tmp_path):
    wd = tmp_path / "data"
    wd.mkdir()
    Workdir(wd).config_file.write_text("[agencies.adobe]\nenabled = true\n", encoding="utf-8")
    args, why = case(wd, shared)
    result = run_microstock("run", "--source", str(source), "--agency", "adobe", "--workdir", str(wd), *args)
    assert result.exit_code == 2, result.output[-3000:]
    assert result.stderr.splitlines()[0].startswith(f"error: {why}: not using it"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not Workdir(wd).assets.exists(), "the run went on"


def test_a_workdir_writable_only_by_our_own_group_is_ours(run_microstock, tmp_path):
    """Debian and Ubuntu give a user umask 002 (their own private group): every folder and file they make is
    group-writable, and nobody else is in that group — not refused."""
    me = pwd.getpwuid(os.geteuid())
    if grp.getgrgid(me.pw_gid).gr_name != me.pw_name:
        pytest.skip("this user has no group of their own")
    wd = tmp_path / "data"
    wd.mkdir(mode=0o775)
    (wd / "microstock.toml").write_text("", encoding="utf-8")
    for path, mode in ((wd, 0o775), (wd / "microstock.toml", 0o664)):
        os.chown(path, -1, me.pw_gid)
        path.chmod(mode)
    result = run_microstock("ledger", "status", "--workdir", str(wd))
    assert result.exit_code == 0, result.output[-3000:]


def _ours_in_the_sticky_folder(shared: Path, tmp_path: Path) -> tuple[Path, str | None]:
    (shared / "ours").mkdir()
    return shared / "ours", None


def _their_symlink_to_ours(shared: Path, tmp_path: Path) -> tuple[Path, str | None]:
    (tmp_path / "ours").mkdir()
    as_other("ln", "-s", str(tmp_path / "ours"), str(shared / "link"))  # they can point it elsewhere any time
    return shared / "link", f"workdir {shared / 'link'} is a symlink owned by another user (uid {other_uid()})"


def _our_symlink_to_theirs(shared: Path, tmp_path: Path) -> tuple[Path, str | None]:
    as_other("mkdir", str(shared / "theirs"))
    (shared / "link").symlink_to(shared / "theirs")
    return shared / "link", (f"workdir {shared / 'link'} points to {shared / 'theirs'}, which is owned by another "
                             f"user (uid {other_uid()})")


def _ours_through_their_folder(shared: Path, tmp_path: Path) -> tuple[Path, str | None]:
    as_other("mkdir", "-m", "0777", str(shared / "theirs"))
    (shared / "theirs" / "ours").mkdir()  # theirs to rename, and to put their own workdir in its place
    return shared / "theirs" / "ours", (f"workdir {shared / 'theirs' / 'ours'} is inside {shared / 'theirs'}, which "
                                        f"is owned by another user (uid {other_uid()})")


@pytest.mark.parametrize("case", [_ours_in_the_sticky_folder, _their_symlink_to_ours, _our_symlink_to_theirs,
                                  _ours_through_their_folder], ids=lambda c: c.__name__.strip("_"))
def test_a_workdir_in_a_shared_sticky_folder_is_ours_only_all_the_way(case, shared, run_microstock, tmp_path):
    """In ``/tmp`` a workdir of ours is fine (nobody else can rename or remove it there); one reached through a
    symlink or a folder of the other user's is refused, even when it leads to ours today."""
    wd, refused = case(shared, tmp_path)
    result = run_microstock("ledger", "status", "--workdir", str(wd))
    if refused is None:
        assert result.exit_code == 0, result.output[-3000:]
    else:
        assert result.exit_code == 2, result.output[-3000:]
        assert result.stderr.splitlines() == [f"error: {refused}: {WHY_OWNER}"], result.stderr


def _commands_taking_workdir() -> list[tuple[str, ...]]:
    """Every ``microstock`` command with a ``--workdir`` option, a placeholder for each argument it needs."""
    from flows.cli import app

    found = []

    def walk(command, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                walk(sub, path + (name,))
        elif any(p.name == "workdir" for p in command.params):
            found.append(path + tuple("x" for p in command.params if p.required))

    walk(typer.main.get_command(app), ())
    return found


@pytest.mark.parametrize("command", _commands_taking_workdir(), ids=" ".join)
def test_every_command_refuses_another_users_workdir(command, shared, ftp_server, run_microstock):
    """One rule for every command, the read-only ones too (INTERFACE.md, "Whose workdir")."""
    wd = their_workdir(shared, ftp_server)
    result = run_microstock(*command, "--workdir", str(wd), env={"PREFECT_HOME": None})
    assert result.exit_code == 2, result.output[-3000:]
    assert result.stderr.splitlines() == [f"error: workdir {owned_by_them(wd)}: {WHY_OWNER}"], result.stderr
    assert (ftp_server.log.connections, ftp_server.log.passwords) == (0, 0)
    assert sorted(p.name for p in wd.iterdir()) == ["microstock.toml"], "something was written in their workdir"
