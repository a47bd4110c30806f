"""Tags on the stage task runs, never at the cost of the run.

A tagged task run first asks Prefect's server for its tags' concurrency
slots. A server busy recording thousands of task runs may refuse that
request (503): Prefect then raises ``ConcurrencySlotAcquisitionError``
before the task's body has started, and without this the whole flow run
fails over a label (measured: a 5,000-asset batch, docs/BENCHMARKS.md).
:func:`tags_never_fail` wraps a stage task so that such a refusal runs the
same task again without tags, with one warning, instead.
"""

from __future__ import annotations

from typing import Any

from prefect import Task
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError

from tasks.orchestration.logs import stage_logger


class TagsNeverFail:
    """A stage task whose tags cannot fail it: called or submitted like the Task it wraps."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.task(*args, **kwargs)
        except ConcurrencySlotAcquisitionError as exc:
            return self._untagged(exc)(*args, **kwargs)

    def submit(self, *args: Any, **kwargs: Any) -> "_Submitted":
        return _Submitted(self, args, kwargs)

    def with_options(self, **options: Any) -> "TagsNeverFail":
        return TagsNeverFail(self.task.with_options(**options))

    def _untagged(self, exc: ConcurrencySlotAcquisitionError) -> Task:
        stage_logger("microstock.stages").warning(
            "%s: Prefect's server did not grant the tags %s (%s); running it untagged",
            self.task.name, ", ".join(sorted(self.task.tags)), exc)
        return self.task.with_options(tags=[])


class _Submitted:
    """The future of a submitted stage: ``result()`` resubmits it untagged if its tags were refused."""

    def __init__(self, stage: TagsNeverFail, args: tuple, kwargs: dict) -> None:
        self._stage, self._args, self._kwargs = stage, args, kwargs
        self._future = stage.task.submit(*args, **kwargs)

    def result(self) -> Any:
        try:
            return self._future.result()
        except ConcurrencySlotAcquisitionError as exc:  # the task never started: running it again is safe
            return self._stage._untagged(exc).submit(*self._args, **self._kwargs).result()


def tags_never_fail(task: Task) -> TagsNeverFail:
    """Decorator for a stage ``@task`` with tags: a refused tag slot runs it untagged instead of failing the flow."""
    return TagsNeverFail(task)
