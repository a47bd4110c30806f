"""prefect.yaml is valid for `prefect deploy` and is what `microstock serve` serves; the example automation
validates."""

from __future__ import annotations

import asyncio
import datetime as dt
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from prefect.cli.deploy._models import PrefectYamlModel
from prefect.events.schemas.automations import AutomationCore, EventTrigger
from prefect.flows import load_flow_from_entrypoint
from prefect.server.schemas.schedules import CronSchedule
from prefect.utilities.callables import parameter_schema
from prefect.utilities.templating import apply_values

from tasks.core.errors import ConfigError
from tasks.observe import events
from tasks.orchestration.deployments import (
    PREFECT_YAML,
    PROJECT_DIR,
    CronSpec,
    DeploymentSpec,
    load_specs,
    runner_deployments,
    serve_all,
)

EXPECTED = {"stock-batch", "dead-letter-summary", "replay-dead-letters", "collect-batches"}


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def deployments(raw) -> dict[str, dict]:
    PrefectYamlModel.model_validate(raw)  # the model `prefect deploy` reads the file with
    return {d["name"]: d for d in raw["deployments"]}


@pytest.fixture(scope="module")
def flows(deployments) -> dict:
    """Each entrypoint loaded the way `prefect deploy` and a worker load it: by file path."""
    return {name: load_flow_from_entrypoint(str(PROJECT_DIR / d["entrypoint"])) for name, d in deployments.items()}


def test_every_deployment_is_named_after_its_flow(deployments, flows):
    assert set(deployments) == EXPECTED
    for name, flow in flows.items():
        assert flow.name == name
        assert deployments[name]["entrypoint"].startswith("flows/")
        assert deployments[name]["work_pool"]["name"] == "microstock"


def next_dates(schedule: dict, n: int = 3) -> list[dt.datetime]:
    cron = CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])  # the server's own schedule model
    return asyncio.run(cron.get_dates(n, start=dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)))


def test_batch_is_nightly_and_summary_daily_and_replay_manual(deployments):
    (batch,) = deployments["stock-batch"]["schedules"]
    dates = next_dates(batch)
    assert [b - a for a, b in pairwise(dates)] == [dt.timedelta(days=1)] * 2
    assert dates[0].astimezone(ZoneInfo(batch["timezone"])).hour < 6, "the batch runs at night"
    (summary,) = deployments["dead-letter-summary"]["schedules"]
    dates = next_dates(summary)
    assert [b - a for a, b in pairwise(dates)] == [dt.timedelta(days=1)] * 2
    assert deployments["replay-dead-letters"]["schedules"] == []


def test_the_batch_deployment_lets_one_run_at_a_time(deployments):
    assert deployments["stock-batch"]["concurrency_limit"] == 1


def test_collect_batches_runs_every_30_minutes_one_at_a_time(deployments, flows):
    (every,) = deployments["collect-batches"]["schedules"]
    dates = next_dates(every, 4)
    assert [b - a for a, b in pairwise(dates)] == [dt.timedelta(minutes=30)] * 3
    assert deployments["collect-batches"]["concurrency_limit"] == 1
    assert deployments["collect-batches"]["entrypoint"] == "flows/collect_batches.py:collect_batches_flow"
    assert set(flows["collect-batches"].parameters.properties) == {"workdir", "config"}


def test_replay_is_a_dry_run_unless_asked(deployments, flows):
    assert deployments["replay-dead-letters"]["parameters"] == {"dry_run": True}
    assert flows["replay-dead-letters"].parameters.properties["dry_run"]["default"] is True


def test_deployment_parameters_are_valid_for_their_flows(deployments, flows):
    for name, d in deployments.items():
        flows[name].validate_parameters(d["parameters"])


def test_every_flow_parameter_is_typed_and_described_for_the_ui_form(flows):
    for name, flow in flows.items():
        schema = parameter_schema(flow.fn).model_dump()
        for param, prop in schema["properties"].items():
            assert "type" in prop or "anyOf" in prop or "$ref" in prop or "allOf" in prop, f"{name}.{param} untyped"
            assert prop.get("description"), f"{name}.{param} has no description in the UI form"


def test_batch_form_takes_agency_names_and_refuses_a_negative_count(flows):
    from prefect.exceptions import ParameterTypeError

    props = parameter_schema(flows["stock-batch"].fn).model_dump()["properties"]
    assert props["count"]["minimum"] == 0
    # names, not a fixed list: a workdir's own spec is an agency too; the flow checks them at run start
    # (tests/agencies/test_catalog.py: an unknown name is a ConfigError before anything is written)
    items = next(a["items"] for a in props["agencies"]["anyOf"] if a.get("type") == "array")
    assert items["type"] == "string" and "enum" not in items
    with pytest.raises(ParameterTypeError):
        flows["stock-batch"].validate_parameters({"count": -1})


def test_pull_step_starts_runs_in_the_folder_deploy_ran_from(raw, monkeypatch):
    (step,) = raw["pull"]
    directory = step["prefect.deployments.steps.set_working_directory"]["directory"]
    monkeypatch.setenv("PWD", str(PROJECT_DIR))
    resolved = Path(apply_values(directory, {}))  # what `prefect deploy` stores
    assert resolved == PROJECT_DIR
    for d in raw["deployments"]:
        assert (resolved / d["entrypoint"].split(":")[0]).is_file()


def test_serve_builds_the_same_deployments(tmp_path):
    specs = load_specs()
    built = {d.name: d for d in runner_deployments(specs, tmp_path / "wd", timezone="Asia/Tokyo")}
    assert set(built) == EXPECTED
    batch = built["stock-batch"]
    assert batch.flow_name == "stock-batch"
    assert batch.entrypoint == "flows.stock_batch.stock_batch"  # importable from any folder
    assert batch.concurrency_limit == 1
    assert batch.parameters["workdir"] == str(tmp_path / "wd")
    (sched,) = batch.schedules
    assert (sched.schedule.cron, sched.schedule.timezone) == ("0 2 * * *", "Asia/Tokyo")
    assert built["replay-dead-letters"].schedules == []
    assert built["replay-dead-letters"].parameters["dry_run"] is True
    (collect,) = built["collect-batches"].schedules
    assert (collect.schedule.cron, collect.schedule.timezone) == ("*/30 * * * *", "Asia/Tokyo")
    assert built["collect-batches"].parameters["workdir"] == str(tmp_path / "wd")


def test_serve_refuses_an_unknown_timezone_and_a_non_cron_schedule(tmp_path):
    spec = DeploymentSpec(name="stock-batch", entrypoint="flows/stock_batch.py:stock_batch",
                          schedules=[CronSpec("0 2 * * *", "Mars/Olympus")])
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        runner_deployments([spec], tmp_path)
    bad = tmp_path / "prefect.yaml"
    bad.write_text("deployments:\n  - name: x\n    entrypoint: flows/stock_batch.py:stock_batch\n"
                   "    schedules:\n      - interval: 3600\n")
    with pytest.raises(ConfigError, match="only cron"):
        load_specs(bad)
    bad.write_text("deployments: [\n")
    with pytest.raises(ConfigError, match=str(bad)):
        load_specs(bad)


AUTOMATIONS = sorted((PROJECT_DIR / "docs" / "automations").glob("*.yaml"))


@pytest.mark.parametrize("path", AUTOMATIONS, ids=lambda p: p.name)
def test_example_automation_is_valid_and_triggers_on_a_microstock_event_or_state(path):
    from flows.run_outcome import INCOMPLETE

    automation = AutomationCore.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert isinstance(automation.trigger, EventTrigger)
    known = {events.JOB_PARKED, events.JOB_RECOVERED, events.UPLOAD_COMPLETED, events.BATCH_FINISHED,
             events.REVIEW_WAITING, f"prefect.flow-run.{INCOMPLETE}",  # Prefect's own event of that final state
             "prefect.flow-run.Paused"}  # and of the state a run paused for review is in (review_pause.ask)
    assert automation.trigger.expect and automation.trigger.expect <= known
    assert automation.actions


def test_there_is_an_example_automation_for_parked_jobs():
    assert any(events.JOB_PARKED in p.read_text() for p in AUTOMATIONS)


def test_local_server_refuses_a_busy_port_and_says_what_to_do(tmp_path):
    import socket

    from tasks.orchestration.local_server import LocalServer

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {port} .* already in use.*PREFECT_API_URL"):
            LocalServer(tmp_path / "home", port).start()
    assert not (tmp_path / "home").exists(), "nothing started, nothing written"


def test_a_stop_while_serve_registers_is_handed_to_prefects_runner(tmp_path, monkeypatch):
    """Prefect's runner registers the deployments, then starts; until it has started its SIGTERM handler exits the
    process without pausing their schedules. A SIGTERM in between must reach the runner once it has started, not
    end serving with the schedules left running: here the runner is stood in for by an object that starts, and
    installs its handler, a moment after the signal."""
    import os
    import signal
    import threading
    from types import SimpleNamespace

    from tasks.orchestration import deployments as module

    said, runner_got = [], threading.Event()

    def serve_slowly(workdir, timezone, ui_url, say, runners):
        runner = SimpleNamespace(started=False)
        runners.append(runner)  # what _serve does before registering the deployments
        os.kill(os.getpid(), signal.SIGTERM)  # the stop, inside the window
        threading.Event().wait(0.3)  # registering takes a moment
        signal.signal(signal.SIGTERM, lambda *_: runner_got.set())  # the runner starts: its handler, then started
        runner.started = True
        assert runner_got.wait(10), "the SIGTERM was not handed on to the started runner"

    monkeypatch.setattr(module, "_serve", serve_slowly)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # no local server is started
    before = signal.getsignal(signal.SIGTERM)
    serve_all(tmp_path, port=0, timezone=None, say=said.append)
    assert runner_got.is_set() and "stopped" not in said
    assert signal.getsignal(signal.SIGTERM) is before  # serve_all puts the process's handler back
