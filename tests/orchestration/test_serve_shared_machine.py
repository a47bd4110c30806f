"""Issue 50, `microstock serve` on a shared machine: Prefect's runner keeps its files in the workdir's home, not in
the machine's one `<tmp>/runner_storage` (a folder another user made there stopped `serve` with a PermissionError);
its flow runs start in the home, so a settings file put in serve's starting folder later reaches none of them;
and a served night that ends Incomplete prints no engine traceback (`TypeError: Unexpected result for failed
state` after every such night)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tasks.orchestration import server_record
from tasks.orchestration.local_server import free_port, healthy
from tests.fakes.local_users import other_uid
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.orchestration.test_server import AUTH, api

pytestmark = pytest.mark.server

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]


def runner_folders(home: Path) -> list[Path]:
    return list((home / "runner_storage").glob("*"))


def engine_children(pid: int) -> list[int]:
    """The flow-run processes (``python -m prefect.engine``) ``pid`` runs now."""
    children = []
    for thread in Path(f"/proc/{pid}/task").glob("*"):  # a child belongs to the thread that started it
        try:
            children += [int(c) for c in (thread / "children").read_text().split()]
        except OSError:
            pass
    found = []
    for child in children:
        try:
            if b"prefect.engine" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            pass
    return found


def test_serve_beside_another_users_files_ends_an_incomplete_night_without_a_traceback(tmp_path):
    shared_tmp = tmp_path / "tmp"  # the machine's temporary folder, as TMPDIR names it to Python
    shared_tmp.mkdir(mode=0o1777)
    os.chmod(shared_tmp, 0o1777)
    theirs = shared_tmp / "runner_storage"  # made by another user first, as on a shared machine
    theirs.mkdir(mode=0o755)
    os.chown(theirs, other_uid(), -1)
    wd = tmp_path / "work"
    (wd / "assets").mkdir(parents=True)
    for name, colour in (("red_barn.jpg", "red"), ("blue_lake.jpg", "blue")):
        Image.new("RGB", (2400, 1800), colour).save(wd / "assets" / name, quality=80)
    closed = free_port()  # nothing listens there: the agency stops, the night ends Incomplete
    (wd / "microstock.toml").write_text(f'[agencies.dreamstime]\ntarget = "ftp://contributor@127.0.0.1:{closed}/"\n'
                                        'attempts = 1\ntimeout_s = 2\nretry_delay_s = 0\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MICROSTOCK_", "GEMINI_"))}
    env.update(TMPDIR=str(shared_tmp), COLUMNS="200", MICROSTOCK_DREAMSTIME_PASSWORD="dreamstime-pw-serve",
               PREFECT_RUNNER_POLL_FREQUENCY="2")
    port, home = free_port(), migrated_home(wd / ".prefect")
    url = f"http://127.0.0.1:{port}/api"
    out = open(tmp_path / "serve.out", "w+")
    proc = subprocess.Popen(MICROSTOCK + ["serve", "--workdir", str(wd), "--port", str(port)], env=env, cwd=tmp_path,
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        # The runner makes its folder as it starts (Runner.__aenter__): in the home, or in theirs (root may write
        # there: the tests run as root), or serve exited (the contributor's PermissionError of the issue).
        wait_until("the runner's folder, or serve's exit", lambda: proc.poll() is not None or runner_folders(home)
                   or list(theirs.iterdir()), timeout_s=300)
        assert proc.poll() is None, f"serve exited with {proc.returncode}: {(tmp_path / 'serve.out').read_text()}"
        assert list(theirs.iterdir()) == [] and theirs.stat().st_uid == other_uid(), "their folder untouched"
        (mine,) = runner_folders(home)
        assert (home / "runner_storage").stat().st_mode & 0o077 == 0, "private"

        # Serving lasts for weeks: a settings file another user puts in its starting folder now (the check at the
        # start has passed) reaches no flow run it starts.
        (tmp_path / "prefect.toml").write_text('[logging]\nlevel = "DEBUG"\n', encoding="utf-8")
        os.chown(tmp_path / "prefect.toml", other_uid(), -1)

        AUTH[url] = server_record.auth_string(home)  # what test_server's api() calls it with
        wait_until("every deployment", lambda: healthy(url) and len(api(url, "POST", "/deployments/filter", {})) == 4,
                   timeout_s=120)
        (batch,) = [d for d in api(url, "POST", "/deployments/filter", {}) if d["name"] == "stock-batch"]
        run = api(url, "POST", f"/deployments/{batch['id']}/create_flow_run",
                  {"parameters": {"agencies": ["dreamstime"]}})

        def finished():
            state = api(url, "GET", f"/flow_runs/{run['id']}")["state"]
            return state if state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

        state = wait_until("the served stock-batch run", finished, timeout_s=300)
        assert (state["type"], state["name"]) == ("FAILED", "Incomplete"), state
        wait_until("the run's process to end (what it prints, it has printed)",
                   lambda: not engine_children(proc.pid), timeout_s=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()
    said = (tmp_path / "serve.out").read_text()
    assert proc.returncode == 0, said[-3000:]
    assert "Traceback" not in said and "Unexpected result for failed state" not in said, said[-3000:]
    assert "exited with unexpected exception" not in said, said[-3000:]
    assert "| DEBUG" not in said, "a flow run read the settings file put in serve's starting folder"
    assert not Path(theirs, mine.name).exists()
