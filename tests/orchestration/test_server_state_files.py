"""The workdir server's own files damaged (garbled, wrong types, a folder where a file belongs, a read-only home)
cost one line and never a second server on one database; `server list` remembers the user's servers, `server stop
--all` stops them, a server comes back on the port it had; a folder holding no workdir gets no server.

One real server for the whole module's damage cases (~10-20 s to start)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.local_server import healthy
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.orchestration.test_local_server_lifecycle import alive

pytestmark = pytest.mark.server

DAMAGE = {
    "not JSON": lambda p: p.write_bytes(b"{\xff garbled"),
    "wrong types": lambda p: p.write_text(json.dumps({"pid": "one", "port": [1], "started": 3, "idle_s": None})),
    "truncated": lambda p: p.write_text(p.read_text()[:7]),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
}


def keepers_of(home: Path) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if server_record.KEEPER in args and str(home) in args:
            found.append(int(cmdline.parent.name))
    return found


def test_damaged_server_files_cost_one_line_and_never_a_second_server(tmp_path, monkeypatch, run_microstock,
                                                                       caplog):
    home = migrated_home(tmp_path / "work" / ".prefect")
    monkeypatch.setenv(workdir_server.IDLE_ENV, "600")
    record, started = workdir_server.ensure(home)
    try:
        assert started and healthy(record.api_url)
        for how, damage in DAMAGE.items():
            damage(server_record.record_path(home))
            caplog.clear()
            again, started = workdir_server.ensure(home)
            assert (again.pid, again.port, started) == (record.pid, record.port, False), how
            assert keepers_of(home) == [record.pid], f"{how}: a second keeper"
            assert server_record.read_record(home).pid == record.pid, f"{how}: the record is rebuilt"
            assert "rebuilt from its running keeper" in caplog.text, how
        aside = sorted(p.name for p in home.glob("server.json.damaged-*"))
        assert len(aside) == len(DAMAGE), aside  # set aside, never deleted

        # A folder where the lock (or the port file) belongs is set aside, with one line.
        for name in ("server.lock", "server.port"):
            path = home / name
            path.unlink()
            path.mkdir()
            caplog.clear()
            assert workdir_server.ensure(home)[0].pid == record.pid
            assert f"{path} was not a file: set aside" in caplog.text
            assert path.is_file() or not path.exists()

        # The user's list remembers it, with its memory; `stop --all` stops it; it comes back on its port.
        listed = run_microstock("server", "list")
        assert listed.exit_code == 0 and str(home.parent) in listed.output and "running" in listed.output
        assert " MB " in listed.output, listed.output
        stopped = run_microstock("server", "stop", "--all")
        assert stopped.exit_code == 0 and f"stopped the server on {record.url}" in stopped.output
        wait_until("the stopped keeper to go", lambda: not alive(record.pid), timeout_s=30)
        listed = run_microstock("server", "list")
        assert "stopped" in listed.output and f"(was {record.url})" in listed.output, listed.output
        back, started = workdir_server.ensure(home)
        assert started and back.port == record.port and back.pid != record.pid
        record = back
    finally:
        workdir_server.stop(home, force=True)


def test_commands_checking_the_home_at_the_same_moment_never_fail_each_other(tmp_path):
    """Two commands starting at once both check the home; one shared write probe made the slower one's removal
    fail ("cannot be written", a clean-clone CI run). A folder where the record belongs is set aside once."""
    home = tmp_path / "work" / ".prefect"
    (home / "server.json").mkdir(parents=True)

    def check(_):
        return [server_record.check_home(home) for _ in range(100)]

    with ThreadPoolExecutor(8) as pool:
        notes = [note for rounds in pool.map(check, range(8)) for said in rounds for note in said]
    assert len(notes) == 1 and "server.json was not a file: set aside" in notes[0]
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".")) == [], "no probe left behind"


def test_a_read_only_home_is_one_line(tmp_path):
    home = tmp_path / "work" / ".prefect"
    home.mkdir(parents=True)
    if subprocess.run(["mount", "--bind", str(home), str(home)], capture_output=True).returncode:
        pytest.skip("a read-only bind mount needs root")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(home)], check=True, capture_output=True)
        with pytest.raises(ConfigError, match=f"Prefect home {home} cannot be written .*chmod u\\+rwx"):
            workdir_server.ensure(home)
        assert not keepers_of(home)
    finally:
        subprocess.run(["umount", str(home)], capture_output=True)


def test_a_folder_holding_no_workdir_gets_no_server(tmp_path, run_microstock):
    empty = tmp_path / "typo"
    empty.mkdir()
    env = {"MICROSTOCK_PREFECT_SERVER": None, "PREFECT_HOME": None}
    for command in (["secrets", "list"], ["replay"]):
        result = run_microstock(*command, "--workdir", str(empty), env=env)
        assert result.exit_code == 2, (command, result.output)
        assert f"{empty} holds no microstock workdir" in result.output, result.output
    assert list(empty.iterdir()) == [] and not keepers_of(empty / ".prefect")
