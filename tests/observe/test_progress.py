"""A stage's progress thread, when Prefect's API stops answering under it (the workdir's server killed during
upload): the stage is left without waiting longer than it must, says so in its run, and the thread left behind
says nothing afterwards — its late warning, after the summary, was ``--- Logging error ---`` and two
tracebacks in 2 of 5 such runs."""

from __future__ import annotations

import logging
import threading

import prefect.artifacts
from prefect import flow

from tasks.observe import progress


def test_a_progress_thread_left_behind_says_nothing_once_its_stage_is_over(prefect_harness, monkeypatch, caplog,
                                                                         capsys):
    answer = threading.Event()  # the API "answers" (with a failure) only when the test says

    def hung_update(*args, **kwargs):
        answer.wait()
        raise ConnectionError("All connection attempts failed")

    monkeypatch.setattr(prefect.artifacts, "update_progress_artifact", hung_update)
    monkeypatch.setattr(progress, "PUBLISH_WAIT_S", 0.0, raising=False)  # leave the stage at once
    left: list[progress.StageProgress] = []

    @flow
    def one_stage() -> None:
        with progress.StageProgress("upload-adobe", 1) as stage:
            stage.advance()
        left.append(stage)

    with caplog.at_level(logging.INFO, logger="tasks"):
        one_stage()
    said_in_the_run = [r.getMessage() for r in caplog.records if r.name == progress.__name__]

    (stage,) = left
    assert stage._publisher.is_alive(), "the thread should still wait on the API"
    caplog.clear()
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG):
        answer.set()  # the run is over: the post fails now
        stage._publisher.join()
    assert [r.getMessage() for r in caplog.records] == []
    assert capsys.readouterr() == ("", "")
    assert said_in_the_run == ["progress of upload-adobe not shown in the UI: Prefect's API did not answer in 0 s"]
