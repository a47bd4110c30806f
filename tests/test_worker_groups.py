"""How `make test` shares its workers (tests/worker_groups.py), checked on a small suite of its own run by pytest
with two xdist workers under --dist loadgroup, as `make test` runs the real one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]

SUITE = '''
import os
from pathlib import Path

import pytest

SEEN = Path(os.environ["SEEN"])


def note(what):
    with open(SEEN / what, "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")


@pytest.fixture(scope="module")
def shared():
    note("shared made")


@pytest.mark.parametrize("i", range(6))
def test_using_the_module_fixture(shared, i):
    note("using it")


@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    note("alone")
'''

SERVER_SUITE = '''
import pytest


def test_quick():
    pass


@pytest.mark.server
def test_starting_a_server():
    pass


@pytest.mark.waits
def test_waiting_on_a_throttled_server():
    pass
'''


def run_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    server: starts a server\n    waits: waits\n")
    (tmp_path / "test_a_shared.py").write_text(SUITE)
    (tmp_path / "test_b_servers.py").write_text(SERVER_SUITE)
    seen = tmp_path / "seen"
    seen.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env.update(PYTHONPATH=str(PROJECT), SEEN=str(seen))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.worker_groups", "-p", "no:cacheprovider",
                           *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_tests_sharing_a_module_fixture_run_on_one_worker_and_make_it_once(tmp_path):
    result = run_suite(tmp_path, "-n", "2", "--dist", "loadgroup", "-v", "test_a_shared.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    seen = tmp_path / "seen"
    assert len((seen / "shared made").read_text().split()) == 1, (seen / "shared made").read_text()
    assert len(set((seen / "using it").read_text().split())) == 1


def test_the_tests_that_start_servers_or_wait_are_handed_out_first(tmp_path):
    result = run_suite(tmp_path, "--collect-only", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    listed = [line for line in result.stdout.splitlines() if "::" in line]
    assert listed[:2] == ["test_b_servers.py::test_starting_a_server",
                          "test_b_servers.py::test_waiting_on_a_throttled_server"], listed
    assert listed[2:8] == [f"test_a_shared.py::test_using_the_module_fixture[{i}]" for i in range(6)], \
        "each module keeps its order"
    assert listed[-1] == "test_b_servers.py::test_quick", listed
