"""A describe run's log, per file: a parked file is said parked once (class, attempts, reason), a described one
says where its time went (calling Gemini apart from waiting for the quota), and no line is said twice."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tasks.core.workdir import Workdir
from tasks.stages.offline_describer import OfflineDescriber
from tests.fakes import prefect_api
from tests.fakes.gemini import error, finished, gemini_for_module, rate_limited
from tests.orchestration.test_describe_runs import run_describe
from tests.stages.test_describe import Script, fast_settings, make_assets

NAMES = ["calm.jpg", "told.jpg", "unsafe.jpg", "down.jpg"]


def logged(state, names: list[str]) -> tuple[dict[str, list[str]], dict]:
    """The run's log lines by file (a task run's lines, and the flow's that name it), and its task runs by file."""
    flow_run_id = state.state_details.flow_run_id
    logs = prefect_api.logs(flow_run_id)  # the log worker may still be sending under load: until every line is in
    runs = prefect_api.task_runs(flow_run_id)
    file_of = {run.id: run.name.removeprefix("describe-") for run in runs}
    lines: dict[str, list[str]] = {name: [] for name in names}
    for log in logs:
        name = file_of.get(log.task_run_id) or next((n for n in names if n in log.message), None)
        if name is not None:
            lines[name].append(log.message)
    print("\n".join(f"{n}: {line}" for n, said in lines.items() for line in said))  # shown when a test fails
    return lines, {run.name.removeprefix("describe-"): run for run in runs}


@pytest.fixture(scope="module")
def logged_run(prefect_harness, tmp_path_factory):
    """One run: a plain answer, a 429 then an answer, a safety block, three 503s; its report and log lines by file."""
    with gemini_for_module() as (fake, _):
        wd = Workdir(tmp_path_factory.mktemp("logged")).prepare()
        script = Script(fake, NAMES)
        script.set("told.jpg", rate_limited("1s"))
        script.set("unsafe.jpg", finished("SAFETY"))
        script.set("down.jpg", error(503), error(503), error(503))
        state, report = run_describe(wd, fast_settings(), make_assets(wd, NAMES))
    return (report, *logged(state, NAMES))


def test_a_parked_file_is_said_parked_once_with_class_attempts_and_reason(logged_run):
    report, lines, _ = logged_run
    assert report.parked == {"unsafe.jpg": "blocked:SAFETY", "down.jpg": "exhausted:503"}
    for name, said in (("unsafe.jpg", "blocked:SAFETY after 1 attempt(s): "),
                       ("down.jpg", "exhausted:503 after 3 attempt(s): Gemini answered 503 UNAVAILABLE")):
        saying = [line for line in lines[name] if said in line]
        assert len(saying) == 1 and saying[0].startswith("Finished in state Parked("), lines[name]
    reason = "blocked by the model's safety filter (SAFETY)"
    assert sum(reason in line for line in lines["unsafe.jpg"]) == 1, lines["unsafe.jpg"]
    assert not any("Retries are exhausted" in line or "Traceback" in line for line in lines["down.jpg"])


def test_no_line_is_said_twice_for_one_file(logged_run):
    _, lines, _ = logged_run
    for name, said in lines.items():
        assert said, f"no line for {name}: the log was not read"
        repeated = [line for line, n in Counter(said).items() if n > 1]
        assert not repeated, (name, repeated)


def test_a_described_file_says_the_time_calling_gemini_apart_from_the_quota_wait(logged_run):
    report, lines, runs = logged_run
    assert sorted(report.described) == ["calm.jpg", "told.jpg"] and report.tokens == 2 * 321
    timing = re.compile(r"described in (\d+\.\d) s \(Gemini (\d+\.\d) s, quota wait (\d+\.\d) s\)")
    for name in report.described:
        message = runs[name].state.message
        match = timing.fullmatch(message)
        assert match, message
        assert [line for line in lines[name] if message in line] == [f"Finished in state Completed({message!r})"]
    told = timing.fullmatch(runs["told.jpg"].state.message)
    assert float(told[3]) >= 1.0, "the 429's pause (RetryInfo 1s) is quota wait, not time calling Gemini"


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_an_unexpected_failure_keeps_its_traceback_and_one_line_says_it_was_parked(prefect_harness, tmp_path,
                                                                                    monkeypatch, max_attempts):
    describe = OfflineDescriber.describe

    def a_bug_for_one(self, asset):
        if asset.name == "buggy.jpg":
            raise RuntimeError("a bug in a describer")
        return describe(self, asset)

    monkeypatch.setattr(OfflineDescriber, "describe", a_bug_for_one)
    wd = Workdir(tmp_path / "w").prepare()
    state, report = run_describe(wd, fast_settings(max_attempts=max_attempts),
                                 make_assets(wd, ["fine.jpg", "buggy.jpg"]))
    assert report.parked == {"buggy.jpg": "unknown:RuntimeError"} and report.described == ["fine.jpg"]
    lines, runs = logged(state, ["fine.jpg", "buggy.jpg"])
    assert runs["buggy.jpg"].state.name == "Failed", "not an expected failure: no Parked state"
    (parked,) = [line for line in lines["buggy.jpg"] if "parked" in line]
    assert parked.startswith("parked buggy.jpg as unknown:RuntimeError after 1 attempt(s)")
    (traceback,) = [line for line in lines["buggy.jpg"] if "Traceback" in line]
    assert traceback.rstrip().endswith("RuntimeError: a bug in a describer")
    # A bug is not tried again, whatever max_attempts says: Prefect logs its traceback once ("Task run failed
    # with exception"), and the parked line says what became of the job.
    assert traceback != parked and traceback.startswith("Task run failed with exception: RuntimeError")
    assert re.fullmatch(r"described in \d+\.\d s \(offline describer, no quota\)", runs["fine.jpg"].state.message)
