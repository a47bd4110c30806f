"""`microstock` as a contributor runs it. The real command in its own process, on its own ephemeral Prefect,
where the process is what a test is about (its exit code and Prefect's whole record of its run; nothing loading
Prefect before the command sets Prefect's environment); every other command in this process (typer's runner),
on the session's Prefect server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import prefect_api
from tests.fakes.prefect_home import migrated_home

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]


@pytest.fixture
def cli_env(tmp_path):
    """The environment of a contributor's shell: no key, no password, a Prefect home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "MICROSTOCK_"))}
    env["PREFECT_HOME"] = str(migrated_home(tmp_path / "prefect-home"))
    env["COLUMNS"] = "200"
    env["MICROSTOCK_PREFECT_SERVER"] = "ephemeral"  # no workdir server outlives the test (conftest)
    return env


def microstock(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(MICROSTOCK + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_run_twice_second_does_nothing_new(cli_env, prefect_harness, run_microstock, tmp_path):
    """The first run is the real command on its ephemeral server; the second, in this process, finds the
    workdir's work done (the workdir is the truth, whichever server records the run)."""
    wd = tmp_path / "data"
    first = microstock(["run", "--count", "2", "--workdir", str(wd)], cli_env, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 described · 0 parked · 6 uploaded" in first.stdout
    assert "offline" in first.stdout
    # Prefect's record of the run is whole although the command stops its ephemeral server on exit:
    # 4 stages + 2 describe + 3 agencies (the files are rows of each agency's table), every one finished
    with sqlite3.connect(Path(cli_env["PREFECT_HOME"]) / "prefect.db") as db:
        runs = dict(db.execute("SELECT name, state_type FROM task_run").fetchall())
    assert len(runs) == 4 + 2 + 3 and set(runs.values()) == {"COMPLETED"}, runs
    assert {name for name in runs if name.startswith("upload-")} == {"upload-adobe", "upload-vecteezy",
                                                                      "upload-dreamstime"}
    second = run_microstock("run", "--count", "2", "--workdir", str(wd))
    assert second.exit_code == 0, second.output[-3000:]
    assert "0 described · 0 parked · 0 uploaded" in second.stdout
    assert "skipped 2 assets already described" in second.stdout
    assert "skipped 2 uploads to adobe already in the ledger" in second.stdout
    assert len([line for line in (wd / "uploads.ledger").read_text().splitlines() if not line.startswith("#")]) == 6
    # and the session server's record of that run: the 4 stages and 3 agencies, no describe and no file
    (run,) = prefect_api.flow_runs_with("stock-batch", workdir=str(wd.resolve()))
    again = {r.name: r.state.type.value for r in prefect_api.task_runs_once_finished(run.id, finished=4 + 3)}
    assert again == {name: "COMPLETED" for name in ("assets", "pack", "csv", "zip", "upload-adobe", "upload-vecteezy",
                                                     "upload-dreamstime")}, again


def test_workdir_defaults_to_env_then_local_folder(prefect_harness, run_microstock, tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL

    # A contributor with a Prefect server (PREFECT_API_URL, here the session's) and no PREFECT_HOME.
    env = {"MICROSTOCK_WORKDIR": str(tmp_path / "from-env"), "PREFECT_API_URL": PREFECT_API_URL.value(),
           "PREFECT_HOME": None}
    monkeypatch.chdir(tmp_path)
    result = run_microstock("run", "--count", "1", "--agency", "adobe", env=env)
    assert result.exit_code == 0, result.output[-3000:]
    assert (tmp_path / "from-env" / "outbox" / "adobe").is_dir()
    assert not (tmp_path / "microstock-data").exists()
    assert not (tmp_path / "from-env" / ".prefect").exists()  # with PREFECT_API_URL set, no local Prefect home
    # Without MICROSTOCK_WORKDIR: ./microstock-data in the folder the command runs in.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status = run_microstock("ledger", "status", env=dict(env, MICROSTOCK_WORKDIR=None))
    assert status.exit_code == 0, status.output[-3000:]
    assert str(elsewhere / "microstock-data") in status.stdout.replace("\n", "")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[gemini]\nmodle = 'x'\n", "gemini.modle: unknown key"),
        ("[gemini]\nrequests_per_minute = 'fast'\n", "gemini.requests_per_minute"),
        ("[agencies.istock]\nenabled = true\n", "agencies.istock"),  # no spec, shipped or in the workdir
        ("[pack\n", "cannot read"),
        ("[agencies.adobe]\ntarget = 'gopher://example/'\n", "agencies.adobe.target"),
    ],
)
def test_bad_config_is_one_line_naming_the_key_and_writes_nothing(run_microstock, tmp_path, toml, expected):
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    wd = tmp_path / "data"
    result = run_microstock("run", "--config", str(config), "--workdir", str(wd))
    assert result.exit_code == 2
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not wd.exists()


def test_unknown_agency_is_refused(run_microstock, tmp_path):
    result = run_microstock("run", "--agency", "istock", "--workdir", str(tmp_path / "d"))
    assert result.exit_code == 2 and "unknown agency 'istock'" in result.stderr


def test_an_agency_stopped_during_the_run_exits_3(prefect_harness, run_microstock, tmp_path):
    """The run completes (the other agencies upload) but dreamstime has no password: exit code 3."""
    wd = tmp_path / "data"
    wd.mkdir()
    (wd / "microstock.toml").write_text("[agencies.dreamstime]\ntarget = 'ftp://42@127.0.0.1:21/'\n")
    result = run_microstock("run", "--count", "1", "--workdir", str(wd), env={"MICROSTOCK_DREAMSTIME_PASSWORD": None})
    assert result.exit_code == 3, result.output[-3000:]
    assert "MICROSTOCK_DREAMSTIME_PASSWORD" in result.stdout + result.stderr
    ledger = (wd / "uploads.ledger").read_text().splitlines()
    assert sorted(line.split("\t")[1] for line in ledger if not line.startswith("#")) == ["adobe", "vecteezy"]


def test_run_sets_prefects_environment_before_anything_imports_prefect(cli_env, tmp_path):
    """Prefect fixes its settings when imported: the console level and the ephemeral server's start-up
    timeout set by the CLI only hold if nothing before prefect_env() loads Prefect (a Gemini key takes the
    generation check into that path)."""
    probe = ("import sys\nimport flows.cli as cli\n"
             "def prefect_env(*args, **kwargs):\n"
             "    print('prefect already loaded' if 'prefect' in sys.modules else 'not loaded yet')\n"
             "    raise SystemExit(0)\n"
             "cli.prefect_env = prefect_env\ncli.main()\n")
    env = dict(cli_env, GEMINI_API_KEY="AIza-not-a-real-key-for-this-test",
               GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:9")  # the model list call: refused at once, not Google
    result = subprocess.run([sys.executable, "-c", probe, "run", "--count", "1", "--workdir", str(tmp_path / "w")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "not loaded yet", result.stderr[-2000:]


def test_the_run_that_waited_for_another_says_that_run_uploaded_and_exits_0(cli_env, tmp_path):
    """Two runs at once on one workdir: the test is the first (it holds adobe's lock, and records the upload as that
    run does); the command, the second, waits for it, then finds the file uploaded: exit 0, the other run named as
    the one that uploaded it, nothing sent twice (it exited 3 with "Fix first … left pending" for that file)."""
    from tasks.core.files import sha256_file
    from tasks.core.workdir import Workdir
    from tasks.stores.ledger import Ledger
    from tests.orchestration.test_server import make_photo

    wd = Workdir(tmp_path / "data").prepare()
    source = tmp_path / "source"
    source.mkdir()
    make_photo(source / "red_barn.jpg", "red")
    ledger = Ledger(wd.ledger)
    with ledger.agency_lock("adobe"), open(tmp_path / "run.err", "w") as err:
        run = subprocess.Popen(MICROSTOCK + ["run", "--source", str(source), "--agency", "adobe",
                                             "--workdir", str(wd.root)],
                               env=cli_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True)
        said = []
        for line in run.stdout:  # until the command waits for the agency (or ends: the old code did not wait)
            said.append(line)
            if "adobe: another run is uploading there right now; waiting for it to finish" in line:
                break
        ledger.record("adobe", "red_barn.jpg", sha256_file(source / "red_barn.jpg"), "red_barn.jpg")
    out = "".join(said) + run.communicate(timeout=600)[0]
    assert run.returncode == 0, out[-3000:] + (tmp_path / "run.err").read_text()[-3000:]
    assert "1 upload(s) to adobe made by another run at the same time (this run waited for it to finish)" in out
    assert "Fix first" not in out and "STOPPED" not in out, out[-3000:]
    assert not (wd.outbox("adobe") / "red_barn.jpg").exists(), "the file was sent again"
