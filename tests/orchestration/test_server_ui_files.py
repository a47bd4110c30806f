"""Issue 50: the workdir's server copies the UI's files into its home, never into the installed Prefect package.

Prefect 3.9.1's server copies its UI bundles out of the package on a start whose copy is missing or was made for
another base URL (`create_ui_app`: `prefect/server/ui_build`, `ui_v2_build`, lock files beside them). Written
under the keeper's umask 077 they were 0700, and another user's server on the same install could not start."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import prefect
import pytest

from tasks.orchestration import workdir_server
from tests.fakes.prefect_home import migrated_home

pytestmark = pytest.mark.server

ENSURE = ("import sys; from pathlib import Path; from tasks.orchestration.workdir_server import ensure; "
          "ensure(Path(sys.argv[1]))")


def install_state() -> dict:
    """What a server writing into the install would change: the package's server folder's entries, and each UI
    copy's inode, mode and time."""
    builds = [Path(prefect.__ui_static_subpath__), Path(prefect.__ui_v2_static_subpath__)]
    state: dict = {"entries": sorted(os.listdir(builds[0].parent))}
    for build in builds:
        st = build.stat() if build.exists() else None
        state[build.name] = (st.st_ino, stat.S_IMODE(st.st_mode), st.st_mtime_ns) if st else None
    return state


def test_the_keepers_server_copies_the_ui_into_its_home_not_into_the_install(tmp_path):
    home = migrated_home(tmp_path / "work" / ".prefect")
    before = install_state()
    # A base URL of its own: a copy in the install (made for "/") would be made again for it.
    env = {k: v for k, v in os.environ.items() if k not in ("MICROSTOCK_PREFECT_SERVER", "PREFECT_API_URL")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_UI_SERVE_BASE="/microstock-ui")
    try:
        ran = subprocess.run([sys.executable, "-c", ENSURE, str(home)], env=env, capture_output=True, text=True,
                             timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert install_state() == before, "the installed package was written"
        reference = home / "ui" / "v1" / "UI_SERVE_BASE"
        assert "/microstock-ui" in reference.read_text(), "the server's own copy, for its base URL"
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
    finally:
        workdir_server.stop(home, force=True)
