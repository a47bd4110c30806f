"""A task that ends in a failed-type state it returns is logged in one line: Prefect's "Finished in state …"."""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.states import Failed

import tasks.orchestration.logs  # noqa: F401  (the filter is installed by tests/conftest.py, as by every command)


@task(name="left-pending", retries=1, retry_delay_seconds=0)
def left_pending() -> Failed:
    return Failed(message="photo.jpg left pending: the server refused it")


@flow(name="one-pending-file")
def one_pending_file():
    left_pending(return_state=True)


def test_a_returned_failed_state_is_logged_once_without_a_traceback(prefect_harness, caplog):
    caplog.set_level(logging.INFO, logger="prefect.task_runs")
    one_pending_file()
    lines = [logging.Formatter("%(message)s").format(r) for r in caplog.records if r.name == "prefect.task_runs"]
    saying = [line for line in lines if "photo.jpg left pending" in line]
    assert any(line.startswith("Task run failed with state: ") and "Retry 1/1" in line for line in saying), \
        "the retry's line stays: it says what happens next"
    final = [line for line in saying if "Retry" not in line]
    assert len(final) == 1 and final[0].startswith("Finished in state Failed("), saying
    assert not any("NoneType: None" in line or "Retries are exhausted" in line for line in lines)
