"""Issue 50: a Prefect settings file in the folder a command starts from moves none of the workdir's data — not
the workdir server's database (the keeper and server start in their home, with every setting that says where
data lives pinned in their environment), not the command's own (the ephemeral server, `microstock serve`) — and
another user's settings file there is refused before anything starts.

Prefect 3.9.1 reads `.env`, `prefect.toml` and `pyproject.toml` ([tool.prefect]) of the current folder, below the
environment (tasks/orchestration/prefect_settings.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.server_proof import family
from tests.fakes.local_users import other_uid

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]


def planted(folder: Path, form: str, elsewhere: Path) -> Path:
    """``folder`` holding one settings file of ``form`` that puts Prefect's data under ``elsewhere``: the database
    (the issue's file held only that), the UI's files, task results, the logging configuration, the profiles."""
    folder.mkdir(parents=True, exist_ok=True)
    db = f"sqlite+aiosqlite:///{elsewhere}/prefect.db"
    if form == ".env":
        text = (f"PREFECT_SERVER_DATABASE_CONNECTION_URL={db}\nPREFECT_SERVER_UI_STATIC_DIRECTORY={elsewhere}/ui\n"
                f"PREFECT_RESULTS_LOCAL_STORAGE_PATH={elsewhere}/storage\n"
                f"PREFECT_LOGGING_CONFIG_PATH={elsewhere}/logging.yml\nPREFECT_PROFILES_PATH={elsewhere}/p.toml\n")
    else:
        table = "tool.prefect." if form == "pyproject.toml" else ""
        text = (("[tool.prefect]\n" if table else "") + f'profiles_path = "{elsewhere}/p.toml"\n'
                f'[{table}server.database]\nconnection_url = "{db}"\n'
                f'[{table}server.ui]\nstatic_directory = "{elsewhere}/ui"\n'
                f'[{table}results]\nlocal_storage_path = "{elsewhere}/storage"\n'
                f'[{table}logging]\nconfig_path = "{elsewhere}/logging.yml"\n')
    path = folder / form
    path.write_text(text, encoding="utf-8")
    return path


def command_env(**extra: str) -> dict[str, str]:
    """A contributor's environment: the default (the workdir's server), no Prefect setting of the session's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MICROSTOCK_"))}
    return dict(env, COLUMNS="200", **extra)


#: What Prefect's settings say in a process whose environment a command set (set_prefect_env), started from the
#: current folder: the settings the command's own Prefect, its ephemeral server and `microstock serve` read.
SEEN = """
import json, sys
from pathlib import Path
from tasks.orchestration.environment import set_prefect_env
set_prefect_env(Path(sys.argv[1]), server=False)
from prefect.settings import get_current_settings
s = get_current_settings()
print(json.dumps({"home": str(s.home), "database": s.server.database.connection_url.get_secret_value(),
                  "ui": str(s.server.ui.static_directory), "results": str(s.results.local_storage_path),
                  "logging": str(s.logging.config_path), "profiles": str(s.profiles_path)}))
"""


@pytest.mark.parametrize("form", [".env", "prefect.toml", "pyproject.toml"])
def test_a_settings_file_where_a_command_starts_moves_none_of_its_prefect_data(tmp_path, form):
    """The command's own Prefect (its ephemeral server; `microstock serve`'s runner and flow runs, which inherit
    its environment) keeps every kind of data in the workdir's home, whatever the file of its folder says."""
    start, elsewhere, wd = tmp_path / "start", tmp_path / "elsewhere", tmp_path / "work"
    planted(start, form, elsewhere)
    ran = subprocess.run([sys.executable, "-c", SEEN, str(wd)], cwd=start, capture_output=True, text=True,
                         timeout=120, env=command_env(MICROSTOCK_PREFECT_SERVER="ephemeral"))
    assert ran.returncode == 0, ran.stderr[-2000:]
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    home = wd / ".prefect"
    assert seen == {"home": str(home), "database": f"sqlite+aiosqlite:///{home}/prefect.db", "ui": str(home / "ui"),
                    "results": str(home / "storage"), "logging": str(home / "logging.yml"),
                    "profiles": str(home / "profiles.toml")}
    assert not elsewhere.exists()


class _Listener:
    """A port that notes whether anything connected (where a planted ``[api] url`` would send the client)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.connected = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        self.connected.set()
        conn.close()


@pytest.mark.server
def test_the_workdir_server_keeps_its_database_in_its_home_whatever_the_starting_folder_says(tmp_path):
    """The issue's file (only ``[server.database] connection_url``, here with the other forms beside it, and a
    client side asking for another API address and credentials): the server started by a command from that folder
    runs in its home with its database there, nothing is made where the files point, and the command's client
    talks to the workdir's server with its auth string, not to the planted address."""
    start, wd = tmp_path / "start", tmp_path / "work"
    listener = _Listener()
    for form in (".env", "pyproject.toml", "prefect.toml"):
        planted(start, form, tmp_path / f"elsewhere{form}")
    with open(start / "prefect.toml", "a", encoding="utf-8") as toml:
        toml.write(f'[api]\nurl = "http://127.0.0.1:{listener.port}/api"\nauth_string = "planted:not-yours"\n'
                   'key = "planted-key"\n')
    wd.mkdir()
    home = wd / ".prefect"
    try:
        ran = subprocess.run(MICROSTOCK + ["server", "start", "--workdir", str(wd)], cwd=start, capture_output=True,
                             text=True, timeout=300, env=command_env())
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["start", "work"], "nothing made where files point"
        assert (home / "prefect.db").is_file()
        assert (home / "ui" / "v1" / "index.html").is_file(), "the UI's files copied into the home"
        record = server_record.read_record(home)
        assert Path(f"/proc/{record.pid}/cwd").resolve() == home.resolve(), "the keeper runs in its home"
        server = family(record.pid)[1:]
        assert server and {Path(f"/proc/{pid}/cwd").resolve() for pid in server} == {home.resolve()}, "its server too"
        assert not listener.connected.is_set(), "the command's client went to the planted address"
    finally:
        workdir_server.stop(home, force=True)
        listener.sock.close()


@pytest.mark.parametrize("form", [".env", "prefect.toml", "pyproject.toml", "world-writable"])
def test_another_users_settings_file_where_a_command_starts_is_refused(tmp_path, form):
    """One line naming the file and why, exit 2, before any server or home is made: the file could set what is
    not pinned (the API's address of a command on its own ephemeral server, say)."""
    start, wd = tmp_path / "start", tmp_path / "work"
    path = planted(start, "prefect.toml" if form == "world-writable" else form, tmp_path / "elsewhere")
    if form == "world-writable":  # the contributor's file, but anyone may have written it
        os.chmod(path, 0o666)
    else:
        os.chown(path, other_uid(), -1)
    wd.mkdir()
    ran = subprocess.run(MICROSTOCK + ["review", "list", "--workdir", str(wd)], cwd=start, capture_output=True,
                         text=True, timeout=120, env=command_env())
    assert ran.returncode == 2, ran.stdout + ran.stderr
    (line,) = ran.stderr.strip().splitlines()
    assert str(path) in line and "Prefect would read its settings from it" in line, line
    assert ("writable by other users" if form == "world-writable" else "another user") in line
    assert not (wd / ".prefect").exists() and not (tmp_path / "elsewhere").exists()


def test_a_shared_pyproject_and_a_settings_file_of_ones_own_group_are_no_reason_to_refuse(tmp_path):
    """The refusal's edges: a shared project's pyproject.toml (another user's, no [tool.prefect]) holds nothing
    Prefect reads; the contributor's own prefect.toml writable by their own private group (umask 002 on Debian and
    Ubuntu) lets nobody else in. Prefect reads the latter, so its database setting is what the pins beat."""
    start, wd = tmp_path / "start", tmp_path / "work"
    start.mkdir()
    (start / "pyproject.toml").write_text('[project]\nname = "shared"\n[tool.ruff]\nline-length = 100\n')
    os.chown(start / "pyproject.toml", other_uid(), -1)
    own = planted(start, "prefect.toml", tmp_path / "elsewhere")
    os.chown(own, -1, os.getegid())  # root's own group here: gid 0, named root, nobody else in it
    os.chmod(own, 0o664)
    wd.mkdir()
    ran = subprocess.run(MICROSTOCK + ["review", "list", "--workdir", str(wd)], cwd=start, capture_output=True,
                         text=True, timeout=120, env=command_env())
    assert ran.returncode == 0 and "Prefect would read" not in ran.stderr, ran.stdout + ran.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_a_python_package_where_a_command_starts_runs_in_none_of_its_processes(tmp_path):
    """A command on its own ephemeral server: Prefect starts it as `python -m uvicorn` in the command's folder, and
    Python imports first from there, so a `uvicorn/` another user put in a shared folder ran as the contributor
    (and the command ended in a traceback). The command is started as its console script is (-P: its own folder
    is not on the path)."""
    start, wd = tmp_path / "start", tmp_path / "work"
    (start / "uvicorn").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (start / "uvicorn" / name).write_text(f"open({str(start / 'ran')!r}, 'w').write('planted uvicorn ran')\n")
    ran = subprocess.run([sys.executable, "-P", "-c", "from flows.cli import main; main()", "run", "--workdir",
                          str(wd)], cwd=start, capture_output=True, text=True, timeout=300,
                         env=command_env(MICROSTOCK_PREFECT_SERVER="ephemeral"))
    assert not (start / "ran").exists(), "the planted package ran"
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
