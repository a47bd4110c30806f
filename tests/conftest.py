"""Shared fixtures: Prefect in a private home, one test harness per session, small workdirs."""

from __future__ import annotations

import os
import tempfile

# Before Prefect is imported anywhere: a private home, no analytics, patient start-up.
_HOME = tempfile.mkdtemp(prefix="microstock-prefect-")
os.environ["PREFECT_HOME"] = _HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "PREFECT_API_URL"):
    os.environ.pop(key, None)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def prefect_harness():
    """One real Prefect test server for the whole session (it takes ~10 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def workdir(tmp_path):
    """A fresh, empty workdir."""
    from tasks.workdir import Workdir

    return Workdir(tmp_path / "work").prepare()
