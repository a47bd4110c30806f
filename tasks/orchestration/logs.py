"""Lines of Prefect's that must not read like a crash.

The project logs through module loggers (``logging.getLogger(__name__)``),
routed into the run's log by Prefect's own ``PREFECT_LOGGING_EXTRA_LOGGERS``
(:func:`tasks.orchestration.environment.route_run_logs`).

A describe task that ends by returning a failed-type state (its job Parked)
is an expected outcome, not an exception, but Prefect logs it twice: "Task
run failed with state: Parked(message=…, result=…)" (with ``exc_info=True``
while no exception is in flight, so followed by ``NoneType: None``), then the
line that ends every task run, "Finished in state Parked('…')".
:class:`NoRepeatedFailedState` drops the first, so the state's message is
logged once. It depends on the wording of Prefect's line
(``prefect/task_engine.py``, ``handle_retry``, Prefect 3.9), so it is
installed by one call, :func:`drop_repeated_failed_state`, made where a
command sets up Prefect's logging (``route_run_logs``), not by importing this.

A stock-batch run that left work undone ends by returning a Failed-type state, ``Incomplete``, whose data is
the summary. A flow run started by ``microstock serve`` or a worker runs in ``python -m prefect.engine``, which
then asks for the flow's result (``run_flow(..., return_type="result")``): of a failed state that is its
exception, and a summary is none, so Prefect's engine logged "Engine execution exited with unexpected exception"
and the traceback of ``TypeError: Unexpected result for failed state`` for every such night (issue 50). The run's
state was right ("Finished in state Incomplete(…)" said it) and the process still exited 0 (Prefect 3.9.1 counts
a reported final state as handled): :class:`NoEngineTracebackForAnIncompleteRun` drops that line.
"""

from __future__ import annotations

import logging

from tasks.core.errors import ConfigError, StageStopped, StoreUnavailable


class NoRepeatedFailedState(logging.Filter):
    """Drop Prefect's "Task run failed with state: …" (a task returned a failed-type state and is not retried):
    the "Finished in state …" line that ends the same task run says it, and the state's message only once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("Task run failed with state: "))


class NoTracebackForAStop(logging.Filter):
    """A stage that stopped on purpose (:class:`~tasks.core.errors.StageStopped`: a full disk, the day's quota),
    a workdir refused (:class:`~tasks.core.errors.ConfigError`: a read-only folder, a folder in the ledger's
    place) or a local store that cannot be used (:class:`~tasks.core.errors.StoreUnavailable`) said why in its
    one line, naming the file and what to do: Prefect's "Task run failed with exception: StageStopped(…)" and
    "Encountered exception during execution: …(…)" keep that line, without the traceback under it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], (StageStopped, ConfigError, StoreUnavailable)):
            record.exc_info, record.exc_text = None, None
        return True


class NoEngineTracebackForAnIncompleteRun(logging.Filter):
    """Drop Prefect's "Engine execution exited with unexpected exception" when the exception is only the engine
    failing to make an exception of a failed state's data: the flow returned such a state on purpose
    (``Incomplete``, its data the summary), and its "Finished in state …" line said so."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.msg == "Engine execution exited with unexpected exception" and isinstance(exc, TypeError)
                    and str(exc).startswith("Unexpected result for failed state"))


def drop_repeated_failed_state() -> None:
    """Put :class:`NoRepeatedFailedState` on Prefect's ``prefect.task_runs`` logger, :class:`NoTracebackForAStop`
    on it and on ``prefect.flow_runs``, and :class:`NoEngineTracebackForAnIncompleteRun` on ``prefect.flow_runs``
    (once; safe to call again)."""
    task_runs = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, NoRepeatedFailedState) for f in task_runs.filters):
        task_runs.addFilter(NoRepeatedFailedState())
    for runs in (task_runs, logging.getLogger("prefect.flow_runs")):
        if not any(isinstance(f, NoTracebackForAStop) for f in runs.filters):
            runs.addFilter(NoTracebackForAStop())
    flow_runs = logging.getLogger("prefect.flow_runs")
    if not any(isinstance(f, NoEngineTracebackForAnIncompleteRun) for f in flow_runs.filters):
        flow_runs.addFilter(NoEngineTracebackForAnIncompleteRun())
