"""Another local user of the machine reaches nothing of the workdir's Prefect server: its API answers them 401
(Secret blocks, variables), its home (the database with the blocks' encryption key, the auth file, the record,
the log) is the contributor's only; the contributor's own commands still work. Run as root (CI does): a second
local user, ``microstock-other``, is made once (a system user with no home and no login) and left.
`microstock serve`'s server: test_server.py (test_the_served_server_answers_nobody_without_its_auth_string)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tasks.orchestration import server_record, workdir_server
from tests.fakes.local_users import other_user, run_as_other, system_python

pytestmark = pytest.mark.server

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]

#: Run as the other user: the API without credentials, then a read of each file; prints what each answered.
PROBE = """
import json, sys, urllib.error, urllib.request
api, paths, out = sys.argv[1], sys.argv[2:], {}
for method, path, body in (("POST", "/block_documents/filter", {"include_secrets": True}),
                           ("POST", "/variables/", {"name": "planted", "value": "x"}),
                           ("POST", "/flow_runs/filter", {}), ("GET", "/health", None)):
    req = urllib.request.Request(api + path, method=method, headers={"Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            out[method + " " + path] = r.status
    except urllib.error.HTTPError as e:
        out[method + " " + path] = e.code
for p in paths:
    try:
        open(p, "rb").read(1)
        out[p] = "read"
    except OSError as e:
        out[p] = type(e).__name__
print(json.dumps(out))
"""


def as_other_user(api_url: str, *paths: Path) -> dict:
    """What the API and each file answer the other user (the system's python3: not the contributor's venv)."""
    ran = run_as_other([system_python(), "-I", "-c", PROBE, api_url, *map(str, paths)],
                       capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_another_local_user_gets_no_api_answer_and_no_file_while_the_contributor_works():
    other_user()
    # A workdir everyone may enter (as a contributor's ~/stock in a 0755 home), with a Prefect home made before
    # the server required privacy (0755, a log 0644): the start closes it.
    root = Path(tempfile.mkdtemp(prefix="microstock-privacy-"))
    os.chmod(root, 0o755)
    work, home = root / "work", root / "work" / ".prefect"
    home.mkdir(parents=True)
    os.chmod(work, 0o755)
    os.chmod(home, 0o755)
    (home / "server.log").write_text("an older log\n")
    os.chmod(home / "server.log", 0o644)
    (work / "notes.txt").write_text("the workdir's own files keep their modes\n")
    os.chmod(work / "notes.txt", 0o644)
    env = {k: v for k, v in os.environ.items() if k not in ("MICROSTOCK_PREFECT_SERVER", "PREFECT_API_URL")}
    env.update(PREFECT_HOME=str(home), COLUMNS="200")
    try:
        saved = subprocess.run(MICROSTOCK + ["secrets", "set", "gemini-api-key", "--workdir", str(work)],
                               input="gem-key-privacy-1\n", env=env, capture_output=True, text=True, timeout=300)
        assert saved.returncode == 0, saved.stdout[-2000:] + saved.stderr[-2000:]
        record = server_record.read_record(home)
        assert record is not None and "gem-key-privacy-1" not in saved.stdout + saved.stderr

        assert mode(home) == 0o700
        files = [home / n for n in ("prefect.db", "server.auth", "server.json", "server.log")]
        assert {f.name: mode(f) for f in files if f.name != "server.json"} == {
            "prefect.db": 0o600, "server.auth": 0o600, "server.log": 0o600}
        auth = server_record.auth_string(home)
        assert auth and auth not in (home / "server.json").read_text() and auth not in (home / "server.log").read_text()

        seen = as_other_user(record.api_url, *files, work / "notes.txt")
        assert seen["GET /health"] == 200, "the probe reaches the server (only the health check answers)"
        assert seen["POST /block_documents/filter"] == seen["POST /variables/"] == 401, seen
        assert seen["POST /flow_runs/filter"] == 401, seen
        assert seen[str(work / "notes.txt")] == "read", "the probe can read what everyone may read"
        assert {str(f): "PermissionError" for f in files} == {str(f): seen[str(f)] for f in files}

        # The contributor's own commands still use it: the block is there, and no variable was planted.
        listed = subprocess.run(MICROSTOCK + ["secrets", "list", "--workdir", str(work)], env=env,
                                capture_output=True, text=True, timeout=300)
        assert listed.returncode == 0 and "gemini-api-key" in listed.stdout, listed.stderr[-2000:]
        assert "gem-key-privacy-1" not in listed.stdout
        probe = ("from prefect.variables import Variable; from tasks.core.secrets import secret_block; "
                 "print(secret_block('gemini-api-key'), Variable.get('planted', default='absent'))")
        read = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                              env=dict(env, **workdir_server.client_env(home, record)))
        assert read.stdout.split() == ["gem-key-privacy-1", "absent"], read.stderr[-2000:]
        assert server_record.read_record(home) == record, "the commands used the same server"
    finally:
        workdir_server.stop(home)
        shutil.rmtree(root, ignore_errors=True)

