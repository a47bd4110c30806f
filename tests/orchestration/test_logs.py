"""A task that ends in a failed-type state it returns is logged in one line, without 'NoneType: None'."""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.states import Failed

import tasks.orchestration.logs  # noqa: F401  (installs the filter, as every stage that imports it does)


@task(name="left-pending", retries=1, retry_delay_seconds=0)
def left_pending() -> Failed:
    return Failed(message="photo.jpg left pending: the server refused it")


@flow(name="one-pending-file")
def one_pending_file():
    left_pending(return_state=True)


def test_a_returned_failed_state_is_logged_without_an_empty_traceback(prefect_harness, caplog):
    caplog.set_level(logging.INFO, logger="prefect.task_runs")
    one_pending_file()
    failed = [r for r in caplog.records if r.name == "prefect.task_runs" and "Task run failed with state" in r.getMessage()]
    assert failed and all(r.exc_info is None for r in failed)
    formatted = "\n".join(logging.Formatter("%(message)s").format(r) for r in failed)
    assert "photo.jpg left pending" in formatted and "NoneType: None" not in formatted
