"""The stage tests run without Prefect (issue 51): a stage is plain Python, called with a RunContext whose events are
kept in memory and whose Gemini key is the environment's. A test of a Prefect wrapper or of a whole flow or command
run belongs in tests/orchestration or tests/flows."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

#: The modules of tests/stages that may still use a Prefect server, and why (issue 51: at most two; one is left).
NEEDS_PREFECT = {
    "test_upload.py": "a missing agency password looked up in Prefect's Secret blocks (the real lookup) before the "
                      "upload stage connects",
}
#: The fixtures that start or use a Prefect server: the session's test server, a `microstock` command run.
PREFECT_FIXTURES = ("prefect_harness", "run_microstock")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse to run when a test of this folder outside :data:`NEEDS_PREFECT` asks for a Prefect fixture, directly
    or through another fixture."""
    wrong = sorted({f"{item.nodeid} ({name})" for item in items
                    if item.path.parent == HERE and item.path.name not in NEEDS_PREFECT
                    for name in PREFECT_FIXTURES if name in getattr(item, "fixturenames", ())})
    if wrong:
        raise pytest.UsageError("tests/stages runs without Prefect (tests/stages/conftest.py): move these to "
                                "tests/orchestration or tests/flows, or call the plain stage:\n" + "\n".join(wrong))
