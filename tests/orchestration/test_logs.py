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


def test_a_stage_that_stopped_on_purpose_keeps_its_line_without_a_traceback():
    """Pack on a full disk raises StageStopped ``disk_full``: Prefect's task and flow run loggers log it with
    ``exc_info``; the line stays, the traceback goes. Any other exception keeps its traceback."""
    import sys

    from tasks.core.errors import StageStopped

    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        for exc, keeps in ((StageStopped("disk full: / has no room left", kind="disk_full"), False),
                           (RuntimeError("a bug"), True)):
            try:
                raise exc
            except Exception:
                record = logger.makeRecord(name, logging.ERROR, __file__, 0, "Task run failed with exception: %r",
                                           (exc,), sys.exc_info())
            assert logger.filter(record)
            assert (record.exc_info is not None) is keeps, (name, exc)
            assert repr(exc) in record.getMessage()


def test_a_refused_workdir_or_an_unusable_store_keeps_its_line_without_a_traceback():
    """A workdir refused by the flow's own check (ConfigError: a read-only folder, a folder in the ledger's place)
    or a store that cannot be used (StoreUnavailable: the ledger read by the pack stage) named the file and the fix
    in its one line, and Prefect's two tracebacks under it were all a contributor saw besides (issue 50)."""
    import sys

    from tasks.core.errors import ConfigError, StoreUnavailable

    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        for exc in (ConfigError("/w/reports cannot be written (Permission denied): nothing was done — make the "
                                "folder writable by you and run again"),
                    StoreUnavailable("/w/uploads.ledger: cannot read the ledger (Is a directory)")):
            try:
                raise exc
            except Exception:
                record = logger.makeRecord(name, logging.ERROR, __file__, 0, "Encountered exception during "
                                           "execution: %r", (exc,), sys.exc_info())
            assert logger.filter(record)
            assert record.exc_info is None, (name, exc)
            assert repr(exc) in record.getMessage()
