"""A real `prefect server start`: `microstock serve`, a replay triggered through the API, its artifacts and
events, Secret blocks, an automation that fires, and the documented `prefect deploy` path with a worker."""

from __future__ import annotations

import csv
import http.server
import json
import os
import re
import signal
import ssl
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pyexiv2
import pytest
import yaml
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.observe.artifacts import dead_letter_key
from tasks.observe.markdown import md_cell
from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.deployments import PROJECT_DIR
from tasks.orchestration.environment import RUN_LOG_ENV
from tasks.orchestration.local_server import LocalServer, free_port, healthy, port_in_use
from tasks.stores.dead_letter_open import open_store
from tests.fakes.prefect_api import wait_until
from tests.fakes.prefect_home import migrated_home
from tests.orchestration.test_server_privacy import as_other_user

pytestmark = pytest.mark.server
#: Each of the module's two servers on one worker under `make test` (--dist loadgroup): a worker that took one of
#: their tests started its own (~35 s each); the two run beside each other. tests/conftest.py groups the other
#: modules' module-scoped fixtures by module.
ON_SERVED = pytest.mark.xdist_group("test_server.served")
ON_SERVER = pytest.mark.xdist_group("test_server.server")

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]
PREFECT = [sys.executable, "-m", "prefect"]
SECRET = "sk-test-9f8e7d6c5b4a-do-not-show"


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI_", "GOOGLE_", "MICROSTOCK_", "PREFECT_"))}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               # Fast loops so the test does not wait on Prefect's production intervals.
               PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2",
               PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL="1",
               PREFECT_RUNNER_POLL_FREQUENCY="2", PREFECT_WORKER_QUERY_SECONDS="2",
               COLUMNS="200")
    return env


#: The auth string of each server the tests call that requires one (its API URL → the string): the workdir's
#: server `microstock serve` starts does (from its home's auth file); the bare `server` fixture's does not.
AUTH: dict[str, str] = {}


def auth(url: str) -> tuple[str, str] | None:
    """httpx's ``auth`` for the server at ``url``: Basic base64(auth string), as Prefect's client sends it."""
    return tuple(AUTH[url].split(":", 1)) if url in AUTH else None


#: One TLS context for every call of the module's helpers: httpx makes one per call otherwise (loading the CA
#: bundle, ~30 ms of CPU), and the helpers are polled every 0.2 s while a test waits (the servers are plain HTTP).
TLS = ssl.create_default_context()


def api(url: str, method: str, path: str, body: dict | None = None):
    """One REST call; a 503 (SQLite busy under load) is retried a few times, as Prefect's own client does."""
    for attempt in range(6):
        r = httpx.request(method, f"{url}{path}", json=body, auth=auth(url), timeout=30, verify=TLS)
        if r.status_code != 503:
            break
        time.sleep(1 + attempt)
    r.raise_for_status()
    return r.json() if r.content else None


def deployments_by_name(url: str) -> dict[str, dict]:
    return {d["name"]: d for d in api(url, "POST", "/deployments/filter", {})}


def run_and_wait(url: str, deployment_id: str, parameters: dict, timeout_s: float = 240) -> dict:
    run = api(url, "POST", f"/deployments/{deployment_id}/create_flow_run", {"parameters": parameters})

    def finished():
        fr = api(url, "GET", f"/flow_runs/{run['id']}")
        return fr if fr["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    return wait_until(f"flow run {run['id']}", finished, timeout_s)


def artifacts_of(url: str, flow_run_id: str) -> dict[str, dict]:
    found = api(url, "POST", "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
    return {a["key"]: a for a in found if a["key"]}


def microstock_events(url: str) -> list[dict]:
    page = api(url, "POST", "/events/filter", {"filter": {"event": {"prefix": ["microstock."]}}, "limit": 50})
    return page["events"]


def make_photo(path: Path, colour: str) -> None:
    """A 4.3 MP photo of one colour with the title its contributor gave it (IPTC object name, from its name: "red
    barn"): an own photo with words a person wrote, which leaves without a describer that sees it (issue 52)."""
    Image.new("RGB", (2400, 1800), colour).save(path, quality=80)
    with pyexiv2.Image(str(path)) as img:
        img.modify_iptc({"Iptc.Application2.ObjectName": path.stem.replace("_", " ").capitalize()})



@pytest.fixture(scope="module")
def parked_workdir(tmp_path_factory) -> tuple[Workdir, str, str]:
    """A workdir with two parked jobs: one whose image is there (recoverable), one whose image is gone."""
    wd = Workdir(tmp_path_factory.mktemp("served") / "data").prepare()
    make_photo(wd.assets / "red_barn.jpg", "red")
    barn = sha256_file(wd.assets / "red_barn.jpg")
    gone = "0" * 64
    store = open_store(wd, Settings())
    for job_id, name in ((barn, "red_barn.jpg"), (gone, "lost_lake.jpg")):
        store.park(job_id, payload={"asset": name, "asset_id": job_id}, model="offline",
                   error_class="exhausted:503", error_message="503 UNAVAILABLE", attempts=4, asset_name=name)
    return wd, barn, gone


@pytest.fixture(scope="module")
def served(parked_workdir, tmp_path_factory):
    """`microstock serve` with no PREFECT_API_URL: it starts its own local server, then serves."""
    wd, _, _ = parked_workdir
    home = migrated_home(tmp_path_factory.mktemp("serve-home"))
    port = free_port()
    env = base_env(home)
    log = open(home / "serve.out", "w+")
    proc = subprocess.Popen(MICROSTOCK + ["serve", "--workdir", str(wd.root), "--port", str(port)],
                            env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_until("every served deployment", lambda: proc.poll() is None and healthy(url)
                 and AUTH.setdefault(url, server_record.auth_string(home))
                 and len(deployments_by_name(url)) == 4 or (proc.poll() is not None and _died(proc, log)),
                 timeout_s=300)
        # What a contributor's command in the workdir is given (environment.set_prefect_env), for the tests' own.
        env = dict(env, **workdir_server.client_env(home, server_record.read_record(home)))
        yield {"proc": proc, "url": url, "port": port, "env": env, "home": home, "log": log}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _died(proc, log) -> bool:
    log.seek(0)
    raise AssertionError(f"microstock serve exited with {proc.returncode}:\n{log.read()[-3000:]}")


@ON_SERVED
def test_serve_registers_every_deployment_with_its_schedules(served, parked_workdir):
    url = served["url"]
    deps = deployments_by_name(url)
    assert set(deps) == {"stock-batch", "dead-letter-summary", "replay-dead-letters", "collect-batches"}
    batch = deps["stock-batch"]
    assert [s["schedule"]["cron"] for s in batch["schedules"]] == ["0 2 * * *"]
    assert all(s["active"] for s in batch["schedules"])
    assert batch["concurrency_limit"] == 1 or batch["global_concurrency_limit"]["limit"] == 1
    assert batch["parameters"]["workdir"] == str(parked_workdir[0].root)
    assert deps["replay-dead-letters"]["schedules"] == []
    assert deps["replay-dead-letters"]["parameters"]["dry_run"] is True
    # A real server's scheduler turns the cron into scheduled runs (the ephemeral server never does).
    scheduled = wait_until("a scheduled nightly run", lambda: api(url, "POST", "/flow_runs/filter", {
        "deployments": {"id": {"any_": [batch["id"]]}}, "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}}),
        timeout_s=120)
    assert all(r["expected_start_time"][11:16] == "02:00" for r in scheduled)


@ON_SERVED
def test_a_deployment_run_is_refused_by_the_check_before_a_run_as_the_cli_run_is(served, parked_workdir, tmp_path):
    """Issue 33: the check before a run is the flow's own, so a run started from the deployment (no CLI before
    it) with a config whose target cannot be used fails at once with that one line — nothing generated."""
    wd, _, _ = parked_workdir
    config = tmp_path / "bad-target.toml"
    config.write_text('[agencies.adobe]\ntarget = "gopher://example.invalid/up"\n')
    before = sorted(p.name for p in wd.assets.iterdir())
    run = run_and_wait(served["url"], deployments_by_name(served["url"])["stock-batch"]["id"],
                       {"count": 2, "config": str(config), "agencies": ["adobe"]})
    assert run["state"]["type"] == "FAILED", run["state"]
    assert "agencies.adobe.target" in run["state"]["message"] and "unsupported scheme 'gopher'" in \
        run["state"]["message"], run["state"]["message"]
    assert sorted(p.name for p in wd.assets.iterdir()) == before, "refused before anything was generated"


@ON_SERVED
def test_replay_through_the_api_completes_and_leaves_artifacts_and_events(served, parked_workdir):
    url = served["url"]
    wd, barn, gone = parked_workdir
    replay = deployments_by_name(url)["replay-dead-letters"]

    dry = run_and_wait(url, replay["id"], {})
    assert dry["state"]["type"] == "COMPLETED", dry["state"]
    assert dry["parameters"]["dry_run"] is True
    assert dry["name"].startswith("replay-dead-letters ") and dry["name"].endswith(" UTC (dry run)"), dry["name"]
    assert {j.status for j in open_store(wd, Settings()).list()} == {"parked"}, "a dry run changes nothing"

    run = run_and_wait(url, replay["id"], {"dry_run": False})
    assert run["state"]["type"] == "COMPLETED", run["state"]
    assert "1 recovered" in run["state"]["message"] and "1 still failing" in run["state"]["message"]
    assert re.fullmatch(r"replay-dead-letters \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", run["name"]), run["name"]
    assert open_store(wd, Settings()).get(barn).status == "recovered"
    assert (wd.assets / "red_barn.json").is_file()

    arts = artifacts_of(url, run["id"])
    table = arts[dead_letter_key(wd)]
    assert table["type"] == "table"
    rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
    assert [r["asset"] for r in rows] == ["lost_lake.jpg"], "only the job that still fails is left"
    assert "**Deployments → replay-dead-letters → Run → Custom run**" in table["description"], \
        "under `microstock serve` the deployment exists: the UI's way is said, with the terminal's"
    assert "no longer in assets" in rows[0]["message"]

    def replay_events():
        evs = microstock_events(url)
        recovered = [e for e in evs if e["event"] == "microstock.job.recovered"]
        return (recovered, evs) if recovered else None

    recovered, evs = wait_until("the job.recovered event", replay_events, timeout_s=60)
    (ev,) = recovered
    assert ev["resource"]["prefect.resource.id"] == f"microstock.asset.{barn}"
    assert ev["resource"]["prefect.resource.name"] == "red_barn.jpg"
    assert f"prefect.flow-run.{run['id']}" in {r["prefect.resource.id"] for r in ev["related"]}
    assert SECRET not in json.dumps(evs)


@ON_SERVED
def test_batch_through_the_api_tells_the_story_in_names_artifacts_and_events(served):
    url = served["url"]
    batch = deployments_by_name(url)["stock-batch"]
    # The typed form is enforced by the server: a bad value is refused before any run exists.
    refused = httpx.post(f"{url}/deployments/{batch['id']}/create_flow_run", json={"parameters": {"count": -1}},
                         auth=auth(url))
    assert refused.status_code >= 400 and "count" in refused.text

    run = run_and_wait(url, batch["id"], {"count": 1, "agencies": ["adobe", "vecteezy"]})
    assert run["state"]["type"] == "COMPLETED", run["state"]
    # + red_barn if alone; a generated photo's few offline keywords are below Vecteezy's minimum (named, issue 35)
    assert re.fullmatch(r"[12] described · 0 parked · \d+ uploaded( · held back: vecteezy \d \(below the keyword "
                        r"minimum\))?", run["state"]["message"]), run["state"]["message"]

    def task_runs():
        found = api(url, "POST", "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})
        by_name = {t["name"]: t for t in found}
        agencies = [by_name.get(f"upload-{a}", {}).get("state") or {} for a in ("adobe", "vecteezy")]
        return by_name if all(s.get("type") == "COMPLETED" for s in agencies) else None  # recorded after the flow

    by_name = wait_until("the agencies' upload task runs", task_runs, timeout_s=60)
    describe = [n for n in by_name if re.fullmatch(r"describe-.+\.jpg", n)]
    assert describe, sorted(by_name)
    # A run per stage, per asset and per agency, each named for what it is; no tags (the names say it)
    assert {"assets", "pack", "csv", "zip", "upload-adobe", "upload-vecteezy"} <= set(by_name)
    assert set(by_name) == {"assets", "pack", "csv", "zip", "upload-adobe", "upload-vecteezy", *describe}
    for name, t in by_name.items():
        assert t["tags"] == [] and t["state"]["type"] == "COMPLETED", (name, t["tags"], t["state"])
    for agency in ("adobe", "vecteezy"):  # the agency's state message says the counts
        assert re.fullmatch(r"\d+ uploaded( · .+)?", by_name[f"upload-{agency}"]["state"]["message"]), agency

    arts = artifacts_of(url, run["id"])
    assert {"batch-summary", "batch-counts", "csv-validation", "progress-describe",
            "upload-adobe", "upload-vecteezy"} <= set(arts)
    assert any(key.startswith("dead-letter-jobs-") for key in arts), "a dead-letter table per workdir"
    for agency in ("adobe", "vecteezy"):  # a row per file: what became of it and where it went
        rows = {r["file"]: r for r in table(arts[f"upload-{agency}"])}
        uploaded = [r for r in rows.values() if r["what happened"] == "uploaded"]
        assert uploaded and all(f"outbox/{agency}/{r['file']}" in r["detail"] for r in uploaded), rows
        assert f"{len(uploaded)} uploaded" in by_name[f"upload-{agency}"]["state"]["message"]
    assert arts["batch-summary"]["type"] == "markdown" and "csv/adobe.csv" in arts["batch-summary"]["data"]
    counts = {r["what"]: r for r in json.loads(arts["batch-counts"]["data"])}
    assert counts["described"]["this run"] >= 1 and counts["parked"]["total"] == 0
    assert {"uploads · adobe", "uploads · vecteezy", "tokens used", "rejected"} <= set(counts)
    assert "vecteezy" in arts["csv-validation"]["data"]

    def batch_events():
        evs = [e for e in microstock_events(url)
               if any(r["prefect.resource.id"] == f"prefect.flow-run.{run['id']}" for r in e["related"])]
        names = {e["event"] for e in evs}
        return evs if {"microstock.batch.finished", "microstock.upload.completed"} <= names else None

    evs = wait_until("the batch's events", batch_events, timeout_s=60)
    (finished,) = [e for e in evs if e["event"] == "microstock.batch.finished"]
    assert finished["resource"]["prefect.resource.id"] == f"microstock.batch.{run['id']}"
    assert finished["payload"]["described"] >= 1 and finished["payload"]["parked"] == 0
    uploads = {e["resource"]["prefect.resource.id"]: e["payload"]
               for e in evs if e["event"] == "microstock.upload.completed"}
    assert set(uploads) == {"microstock.agency.adobe", "microstock.agency.vecteezy"}


@ON_SERVED
def test_secrets_set_saves_a_block_without_showing_the_value(served):
    env = dict(served["env"], PREFECT_API_URL=served["url"])
    for name in ("gemini-api-key", "microstock-adobe-password"):
        result = subprocess.run(MICROSTOCK + ["secrets", "set", name], input=SECRET + "\n", env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"saved Prefect Secret block '{name}'" in result.stdout
        assert SECRET not in result.stdout + result.stderr
    listed = subprocess.run(MICROSTOCK + ["secrets", "list"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert re.search(r"gemini-api-key\s+│\s+set", listed.stdout)
    assert re.search(r"microstock-vecteezy-password\s+│\s+—", listed.stdout)
    assert SECRET not in listed.stdout + listed.stderr
    # What a run reads: the env var first, else the block.
    probe = ("from tasks.core.secrets import agency_password, gemini_key; "
             "print(gemini_key() == %r, agency_password('adobe') == %r, agency_password('vecteezy'))"
             % (SECRET, SECRET))
    read = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert read.stdout.split() == ["True", "True", "None"], read.stderr[-2000:]
    unknown = subprocess.run(MICROSTOCK + ["secrets", "set", "adobe"], input="x\n", env=env,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "unknown secret 'adobe'" in unknown.stderr


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Hook.received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def install_example_automation(url: str, env: dict, tmp_path: Path, name: str, hook_port: int) -> None:
    """docs/automations/<name> on the server at ``url`` as a contributor installs it (`prefect automation
    create`), its notification going to a custom-webhook block that posts to 127.0.0.1:``hook_port``."""
    block_type = api(url, "GET", "/block_types/slug/custom-webhook")
    schema = api(url, "POST", "/block_schemas/filter",
                 {"block_schemas": {"block_type_id": {"any_": [block_type["id"]]}}})[0]
    hook_name = f"{Path(name).stem}-hook"
    block = api(url, "POST", "/block_documents/", {
        "name": hook_name, "block_type_id": block_type["id"], "block_schema_id": schema["id"],
        "data": {"name": hook_name, "url": f"http://127.0.0.1:{hook_port}/hook", "method": "POST",
                 "json_data": {"subject": "{{subject}}", "body": "{{body}}"}}})
    automation = yaml.safe_load((PROJECT_DIR / "docs" / "automations" / name).read_text())
    automation["actions"][0]["block_document_id"] = block["id"]
    path = tmp_path / "automation.yaml"
    path.write_text(yaml.safe_dump(automation))
    created = subprocess.run(PREFECT + ["automation", "create", "--from-file", str(path)], env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stdout + created.stderr


@ON_SERVED
def test_example_automation_notifies_when_a_job_is_parked(served, tmp_path):
    url = served["url"]
    env = dict(served["env"], PREFECT_API_URL=url)
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        install_example_automation(url, env, tmp_path, "notify-on-parked.yaml", hook.server_port)

        emit = ("from tasks.observe import events; events.PrefectEvents()"
                ".job_parked('%s', 'sunset_017.jpg', 'blocked:SAFETY', 1, 'gemini-2.5-flash')" % ("cd" * 32))
        sent = subprocess.run([sys.executable, "-c", emit], env=env, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr[-2000:]
        (message,) = wait_until("the webhook notification", lambda: list(_Hook.received), timeout_s=120)
        assert message["subject"] == "microstock: sunset_017.jpg parked (blocked:SAFETY)"
        assert "after 1 attempt(s)" in message["body"] and "microstock replay --apply" in message["body"]
    finally:
        hook.shutdown()


@ON_SERVED
def test_example_automation_notifies_when_a_batch_waits_for_review(served, tmp_path):
    url = served["url"]
    env = dict(served["env"], PREFECT_API_URL=url)
    _Hook.received.clear()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        install_example_automation(url, env, tmp_path, "notify-review-waiting.yaml", hook.server_port)
        waiting = "from tasks.observe import events; events.PrefectEvents().review_waiting(3)"
        sent = subprocess.run([sys.executable, "-c", waiting], env=env, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr[-2000:]
        (message,) = wait_until("the webhook notification", lambda: list(_Hook.received), timeout_s=120)
        assert message["subject"] == "microstock: 3 asset(s) waiting for review"
        assert "microstock review list" in message["body"]
    finally:
        hook.shutdown()


#: A stock-batch run that ends as one that left uploads pending does (the state the flow returns then).
INCOMPLETE_PROBE = """
from prefect import flow
from flows.run_outcome import final_state
from tasks.observe.summary import BatchSummary

@flow(name="stock-batch")
def probe():
    s = BatchSummary(workdir="/w", described_now=3, uploaded_now={"vecteezy": 3}, upload_not_tried={"adobe": 3},
                     upload_stopped={"adobe": "connection refused"})
    return final_state(s)

probe(return_state=True)
"""


@ON_SERVED
def test_example_automation_notifies_when_a_batch_is_incomplete(served, tmp_path):
    url = served["url"]
    env = dict(served["env"], PREFECT_API_URL=url)
    _Hook.received.clear()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        install_example_automation(url, env, tmp_path, "notify-batch-incomplete.yaml", hook.server_port)
        ran = subprocess.run([sys.executable, "-c", INCOMPLETE_PROBE], env=env, capture_output=True, text=True,
                             timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        (message,) = wait_until("the webhook notification", lambda: list(_Hook.received), timeout_s=120)
        assert message["subject"].startswith("microstock: ") and message["subject"].endswith(" left work undone")
        assert "ended Incomplete: 3 described · 0 parked · 3 uploaded · 3 upload(s) left pending: adobe stopped " \
               "(connection refused)" in message["body"]
    finally:
        hook.shutdown()


@ON_SERVED
def test_the_served_server_answers_nobody_without_its_auth_string(served):
    """What another local user saw in issue 34 (blocks with their secrets, a stock-batch run started with their
    own parameters) is refused to anyone without the workdir's auth string; its home is the contributor's."""
    url, home = served["url"], served["home"]
    batch = deployments_by_name(url)["stock-batch"]
    runs = {"deployments": {"id": {"any_": [batch["id"]]}}}
    before = {r["id"] for r in api(url, "POST", "/flow_runs/filter", runs)}
    seen = as_other_user(url)
    assert seen["POST /block_documents/filter"] == seen["POST /variables/"] == seen["POST /flow_runs/filter"] == 401
    started = httpx.post(f"{url}/deployments/{batch['id']}/create_flow_run", json={"parameters": {"count": 1}})
    wrong = httpx.post(f"{url}/block_documents/filter", json={"include_secrets": True}, auth=("microstock", "guess"))
    assert (started.status_code, wrong.status_code) == (401, 401)
    new = [r for r in api(url, "POST", "/flow_runs/filter", runs) if r["id"] not in before]
    assert all(r["auto_scheduled"] for r in new), "no run was started without the auth string (only the schedule's)"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert {n: stat.S_IMODE((home / n).stat().st_mode) for n in ("prefect.db", "server.auth")} == {
        "prefect.db": 0o600, "server.auth": 0o600}
    assert AUTH[url] not in (home / "server.log").read_text() + (home / "serve.out").read_text()


@ON_SERVED
def test_ctrl_c_pauses_the_schedules_then_stops_the_local_server(served):
    proc = served["proc"]
    proc.send_signal(signal.SIGINT)  # takes SIGTERM's path (systemctl stop): the same graceful shutdown
    assert proc.wait(90) == 0
    assert not port_in_use(served["port"]), "the local Prefect server was stopped too"
    served["log"].seek(0)
    out = served["log"].read()
    assert "All deployments have been paused" in out and "local Prefect server stopped" in out, out[-3000:]
    assert out.index("All deployments have been paused") < out.index("local Prefect server stopped")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A bare `prefect server start` (the documented deploy path runs against it)."""
    home = migrated_home(tmp_path_factory.mktemp("deploy-home"))
    env_backup = dict(os.environ)
    os.environ.update({k: v for k, v in base_env(home).items() if k.startswith("PREFECT_SERVER_")})
    try:
        with LocalServer(home, free_port()) as srv:
            yield srv, base_env(home)
    finally:
        os.environ.clear()
        os.environ.update(env_backup)


@ON_SERVER
def test_documented_deploy_and_worker_run_a_replay(server, parked_workdir, tmp_path):
    srv, env = server
    wd, _, _ = parked_workdir
    env = dict(env, PREFECT_API_URL=srv.api_url, PWD=str(PROJECT_DIR), MICROSTOCK_WORKDIR=str(wd.root))
    for name in RUN_LOG_ENV:  # a worker as a contributor starts it: the routing comes from prefect.yaml alone
        env.pop(name, None)

    def prefect(*args: str) -> str:
        result = subprocess.run(PREFECT + list(args), env=env, cwd=PROJECT_DIR, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, f"prefect {' '.join(args)}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        return result.stdout

    prefect("work-pool", "create", "microstock", "--type", "process")
    prefect("deploy", "--all")
    deps = deployments_by_name(srv.api_url)
    assert set(deps) == {"stock-batch", "dead-letter-summary", "replay-dead-letters", "collect-batches"}
    for d in deps.values():
        assert d["work_pool_name"] == "microstock"
        assert d["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(PROJECT_DIR)}}]
        assert d["job_variables"] == {"env": RUN_LOG_ENV}
    assert deps["stock-batch"]["schedules"][0]["schedule"]["cron"] == "0 2 * * *"

    # The command docs/OPERATIONS.md gives; the job whose image is gone is still failing afterwards.
    out = prefect("deployment", "run", "replay-dead-letters/replay-dead-letters", "-p", "dry_run=false",
                  "-p", "limit=5")
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", out).group(1)
    prefect("worker", "start", "--pool", "microstock", "--run-once")
    run = api(srv.api_url, "GET", f"/flow_runs/{run_id}")
    assert run["state"]["type"] == "COMPLETED", run["state"]
    assert run["parameters"] == {"dry_run": False, "limit": 5}
    assert re.fullmatch(r"\d replayed · \d recovered · 1 still failing", run["state"]["message"])
    assert dead_letter_key(wd) in artifacts_of(srv.api_url, run_id)
    # The stage's own log lines (module loggers under tasks/) are in the worker's run, as in a CLI run.
    logs = api(srv.api_url, "POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}})
    assert any(log["name"] == "tasks.stages.replay" and "still failing" in log["message"] for log in logs), \
        [(log["name"], log["message"]) for log in logs]


# --- the UI as the contributor's desk: parked reads as parked, one table per batch, review ------------------


def stock_batch_runs(url: str, wd: Workdir) -> list[dict]:
    """The stock-batch flow runs of one workdir, oldest first."""
    runs = api(url, "POST", "/flow_runs/filter", {"flows": {"name": {"any_": ["stock-batch"]}},
                                                   "sort": "EXPECTED_START_TIME_ASC"})
    return [r for r in runs if r["parameters"].get("workdir") == str(wd.root)]


def task_runs_of(url: str, flow_run_id: str) -> dict[str, dict]:
    found = api(url, "POST", "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    return {t["name"]: t for t in found}


def table(artifact: dict) -> list[dict]:
    return json.loads(artifact["data"]) if isinstance(artifact["data"], str) else artifact["data"]


def microstock_run(env: dict, wd: Workdir, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(MICROSTOCK + ["run", "--workdir", str(wd.root), "--agency", "adobe", *args], env=env,
                            cwd=wd.root, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture
def blocking_gemini():
    """The test Gemini server: a red image is blocked for SAFETY, any other gets valid metadata."""
    from io import BytesIO

    from tests.fakes.gemini import FakeGemini, answer_json, finished

    def reply(req):
        with Image.open(BytesIO(req.inline_images()[0][1])) as im:
            r, g, b = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
        return finished("SAFETY") if r > 150 and g < 100 else answer_json()

    fake = FakeGemini().start()
    fake.default = reply
    try:
        yield fake
    finally:
        fake.stop()


@ON_SERVER
def test_a_parked_job_reads_as_parked_and_the_batch_has_one_row_per_asset(server, blocking_gemini, tmp_path):
    from tests.fakes.gemini import FAKE_KEY

    srv, env = server
    wd = Workdir(tmp_path / "data").prepare()
    make_photo(wd.assets / "red_fox.jpg", "red")
    make_photo(wd.assets / "green_hill.jpg", "green")
    env = dict(env, PREFECT_API_URL=srv.api_url, GEMINI_API_KEY=FAKE_KEY, GOOGLE_GEMINI_BASE_URL=blocking_gemini.url)
    microstock_run(env, wd, "--count", "0")

    (run,) = stock_batch_runs(srv.api_url, wd)
    assert re.fullmatch(r"stock-batch \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", run["name"]), run["name"]
    assert run["state"]["type"] == "COMPLETED" and run["state"]["message"] == "1 described · 1 parked · 1 uploaded"
    by_name = wait_until("both describe task runs, final", lambda: (lambda t: t if all(
        t.get(n, {}).get("state", {}).get("type") in ("COMPLETED", "FAILED")
        for n in ("describe-red_fox.jpg", "describe-green_hill.jpg")) else None)(task_runs_of(srv.api_url, run["id"])),
        timeout_s=60)
    parked = by_name["describe-red_fox.jpg"]
    assert (parked["state"]["type"], parked["state"]["name"]) == ("FAILED", "Parked")
    assert parked["state"]["message"] == "blocked:SAFETY after 1 attempt(s): the model stopped: SAFETY" or \
        parked["state"]["message"].startswith("blocked:SAFETY after 1 attempt(s): "), parked["state"]["message"]
    assert "\n" not in parked["state"]["message"]
    assert by_name["describe-green_hill.jpg"]["state"]["name"] == "Completed"
    (job,) = open_store(wd, Settings()).list(status="parked")  # the on_failure hook still parked it, from this task run
    assert (job.asset_name, job.error_class, job.task_run_id) == ("red_fox.jpg", "blocked:SAFETY", parked["id"])
    logs = api(srv.api_url, "POST", "/logs/filter", {"logs": {"task_run_id": {"any_": [parked["id"]]}}})
    assert logs and not any("Traceback" in log["message"] for log in logs), [log["message"] for log in logs]

    arts = artifacts_of(srv.api_url, run["id"])
    rows = {r["asset"]: r for r in table(arts["batch-assets"])}
    assert rows["green_hill.jpg"] == {"asset": "green_hill.jpg", "describe": "described", "adobe": "uploaded"}
    assert re.fullmatch(r"parked: blocked:SAFETY since \d{4}-\d\d-\d\d \d\d:\d\d UTC", rows["red_fox.jpg"]["describe"])
    assert rows["red_fox.jpg"]["adobe"] == "not tried: not described (parked)"
    description = arts["batch-assets"]["description"]
    assert "`microstock replay --apply`" in description
    deployed = "replay-dead-letters" in deployments_by_name(srv.api_url)  # when the documented deploy ran first
    assert ("→ Run → Custom run" in description) == deployed, "the UI's way only where it works"
    assert "will fail again if replayed unchanged" in description and md_cell(str(wd.csv / "adobe.csv")) in description

    summary = subprocess.run([sys.executable, "-c", "from flows.dead_letter_summary import dead_letter_summary; "
                              f"dead_letter_summary(workdir={str(wd.root)!r})"], env=env, capture_output=True,
                             text=True, timeout=180)
    assert summary.returncode == 0, summary.stderr[-2000:]
    (daily,) = [r for r in api(srv.api_url, "POST", "/flow_runs/filter", {
        "flows": {"name": {"any_": ["dead-letter-summary"]}}}) if r["parameters"].get("workdir") == str(wd.root)]
    assert re.fullmatch(r"dead-letter-summary \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", daily["name"]), daily["name"]
    assert re.fullmatch(r"dead-letter: 1 parked \(1 blocked:SAFETY\) · "
                        r"oldest parked since \d{4}-\d\d-\d\d \d\d:\d\d UTC",
                        daily["state"]["message"]), daily["state"]


def review_workdir(tmp_path: Path, review: str) -> Workdir:
    wd = Workdir(tmp_path / "data").prepare()
    wd.config_file.write_text(f"[review]\nenabled = true\n{review}\n", encoding="utf-8")
    return wd


def start_run(env: dict, wd: Workdir, *args: str) -> subprocess.Popen:
    out = wd.root / f"run-{time.monotonic_ns()}.out"
    with open(out, "w") as log:
        proc = subprocess.Popen(MICROSTOCK + ["run", "--workdir", str(wd.root), "--agency", "adobe", *args], env=env,
                                cwd=wd.root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proc.args_log = out  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen, timeout_s: float = 300) -> None:
    code = proc.wait(timeout_s)
    assert code == 0, proc.args_log.read_text()[-3000:]


def outbox_files(wd: Workdir) -> list[str]:
    return sorted(p.name for p in wd.outbox("adobe").glob("*.jpg"))


def adobe_csv_files(wd: Workdir) -> list[str]:
    return sorted(line.split(",")[0] for line in (wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines()[1:])


def paused_run(url: str, wd: Workdir, besides: str | None = None) -> dict:
    """The workdir's stock-batch run that waits for review (one other than ``besides``), once there is one and its
    form is saved (the run proposes Paused, then saves the form's schema, then its description, as Prefect 3.9.1's
    pause_flow_run and RunInput.save do: a moment lies between each; waiting for the schema alone, a clean-clone CI
    run read the description a moment too early: 404)."""
    def ready() -> list[dict]:
        runs = [r for r in stock_batch_runs(url, wd) if r["state"]["type"] == "PAUSED" and r["id"] != besides]
        return [r for r in runs if httpx.get(f"{url}/flow_runs/{r['id']}/input/"
                                             f"{r['state']['state_details']['run_input_keyset']['description']}",
                                             auth=auth(url), timeout=30, verify=TLS).status_code == 200]

    return wait_until("a run to pause for review", ready, timeout_s=240)[0]


def terminal(env: dict, wd: Workdir, *args: str) -> subprocess.CompletedProcess:
    """``microstock review ARGS --workdir`` as the contributor types it."""
    return subprocess.run(MICROSTOCK + ["review", *args, "--workdir", str(wd.root)], env=env, capture_output=True,
                          text=True, timeout=180)


def state_types(url: str, flow_run_id: str) -> list[str]:
    return [s["type"] for s in api(url, "GET", f"/flow_run_states/?flow_run_id={flow_run_id}")]


@ON_SERVER
def test_review_pauses_the_run_and_the_answer_decides_what_leaves(server, tmp_path):
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    srv, env = server
    wd = review_workdir(tmp_path, "timeout_hours = 1")
    env = dict(env, PREFECT_API_URL=srv.api_url)
    proc = start_run(env, wd, "--count", "3")
    try:
        paused = paused_run(srv.api_url, wd)
        names = sorted(p.name for p in wd.assets.glob("*.jpg"))
        assert len(names) == 3 and outbox_files(wd) == [], "nothing leaves before the answer"
        keyset = paused["state"]["state_details"]["run_input_keyset"]
        description = api(srv.api_url, "GET", f"/flow_runs/{paused['id']}/input/{keyset['description']}")
        assert all(f"`{name}`" in str(description) for name in names) and "3 asset(s) waiting" in str(description)
        with temporary_settings({PREFECT_API_URL: srv.api_url}):
            resume_flow_run(paused["id"], run_input={"reject": [names[0]], "corrections": [
                {"file": names[1], "title": "Corrected, by the contributor"},  # Adobe's rule drops the comma
                {"file": names[2], "keywords": ","}]})  # no keyword left: breaks Adobe's rule (at least one)
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = api(srv.api_url, "GET", f"/flow_runs/{paused['id']}")
    assert run["state"]["type"] == "COMPLETED" and "1 rejected in review" in run["state"]["message"], run["state"]
    assert adobe_csv_files(wd) == [names[1]] and outbox_files(wd) == [names[1]]
    (row,) = csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines())
    assert row["Title"] == "Corrected by the contributor"
    rejected = json.loads(wd.sidecar(names[0]).read_text(encoding="utf-8"))["review"]
    assert (rejected["decision"], rejected["by"]) == ("rejected", "review")
    corrected = json.loads(wd.sidecar(names[1]).read_text(encoding="utf-8"))
    assert corrected["metadata"]["title"] == "Corrected, by the contributor"
    assert corrected["review"]["decision"] == "approved"
    rows = {r["asset"]: r for r in table(artifacts_of(srv.api_url, run["id"])["batch-assets"])}
    assert rows[names[0]]["describe"] == "rejected in review" and rows[names[1]]["adobe"] == "uploaded"
    assert rows[names[2]]["adobe"].startswith("held back (keywords"), rows[names[2]]
    waiting = wait_until("the review.waiting event", lambda: [
        e for e in microstock_events(srv.api_url) if e["event"] == "microstock.review.waiting"
        and e["payload"]["flow_run_id"] == run["id"]], timeout_s=60)
    assert waiting[0]["payload"]["waiting"] == 3

    finish(start_run(env, wd, "--count", "0"))  # a second run: nothing is waiting, nothing is asked
    second = stock_batch_runs(srv.api_url, wd)[-1]
    assert second["id"] != run["id"] and "PAUSED" not in state_types(srv.api_url, second["id"])
    assert adobe_csv_files(wd) == [names[1]] and outbox_files(wd) == [names[1]]


@ON_SERVER
def test_review_without_an_answer_holds_then_the_next_run_asks_again(server, tmp_path):
    srv, env = server
    wd = review_workdir(tmp_path, 'timeout_hours = 0.002\non_timeout = "hold"')  # about 7 s
    env = dict(env, PREFECT_API_URL=srv.api_url)
    finish(start_run(env, wd, "--count", "2"))
    (held,) = stock_batch_runs(srv.api_url, wd)
    assert "PAUSED" in state_types(srv.api_url, held["id"])
    assert (held["state"]["type"], held["state"]["name"]) == ("FAILED", "Incomplete"), held["state"]
    assert "2 waiting for review" in held["state"]["message"], held["state"]
    assert adobe_csv_files(wd) == [] and outbox_files(wd) == []
    assert all("review" not in json.loads(p.read_text(encoding="utf-8")) for p in wd.assets.glob("*.json"))

    wd.config_file.write_text('[review]\nenabled = true\ntimeout_hours = 0.002\non_timeout = "approve"\n')
    finish(start_run(env, wd, "--count", "0"))
    approved = stock_batch_runs(srv.api_url, wd)[-1]
    assert "PAUSED" in state_types(srv.api_url, approved["id"]), "the held assets are asked about again"
    names = sorted(p.name for p in wd.assets.glob("*.jpg"))
    assert adobe_csv_files(wd) == names and outbox_files(wd) == names
    assert {json.loads(wd.sidecar(n).read_text(encoding="utf-8"))["review"]["by"] for n in names} == {"review timeout"}


@ON_SERVER
def test_the_terminal_answers_a_run_paused_for_review(server, tmp_path):
    srv, env = server
    wd = review_workdir(tmp_path, "timeout_hours = 1")
    env = dict(env, PREFECT_API_URL=srv.api_url)
    _Hook.received.clear()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    install_example_automation(srv.api_url, env, tmp_path, "notify-run-paused.yaml", hook.server_port)
    proc = start_run(env, wd, "--count", "2")
    try:
        paused = paused_run(srv.api_url, wd)
        names = sorted(p.name for p in wd.assets.glob("*.jpg"))
        said = wait_until("the terminal to say what the run waits for",
                          lambda: "waiting for review — answer in the Prefect UI" in proc.args_log.read_text())
        assert said, "the terminal says where to answer while the run waits"
        form = f"/runs/flow-run/{paused['id']}"  # its address, printed as it pauses (the output is a file here)
        wait_until("the form's address on the terminal", lambda: form in proc.args_log.read_text(), timeout_s=30)
        (message,) = wait_until("the paused-run notification", lambda: list(_Hook.received), timeout_s=120)
        assert message["subject"] == f"microstock: {paused['name']} waits for review", message
        assert form in message["body"] and "2 asset(s) waiting for review" in message["body"], message
        review = terminal(env, wd, "reject", names[0])
        assert review.returncode == 0, review.stdout + review.stderr
        said = " ".join(review.stdout.split())
        assert f"the run {paused['id']} waits for review: 1 asset(s) not decided yet ({names[1]})" in said, \
            "a reject approves nothing else (issue 35): the other asset still waits"
        assert api(srv.api_url, "GET", f"/flow_runs/{paused['id']}")["state"]["type"] == "PAUSED"
        review = terminal(env, wd, "approve", names[1])  # decisions accumulate; the last one answers the run
        assert review.returncode == 0, review.stdout + review.stderr
        assert f"answered the paused run {paused['id']}" in review.stdout.replace("\n", " ")
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        hook.shutdown()
    run = api(srv.api_url, "GET", f"/flow_runs/{paused['id']}")
    assert run["state"]["type"] == "COMPLETED" and "1 rejected in review" in run["state"]["message"], run["state"]
    assert adobe_csv_files(wd) == names[1:] and outbox_files(wd) == names[1:]


@ON_SERVER
def test_an_edit_made_while_a_run_waits_for_review_is_taken_up_when_it_is_answered(server, tmp_path):
    srv, env = server
    wd = review_workdir(tmp_path, "timeout_hours = 1")
    env = dict(env, PREFECT_API_URL=srv.api_url)
    proc = start_run(env, wd, "--count", "2")
    try:
        paused = paused_run(srv.api_url, wd)
        names = sorted(p.name for p in wd.assets.glob("*.jpg"))
        edit = terminal(env, wd, "edit", names[0], "--title", "Corrected, by the contributor",
                        "--keywords", "corrected, keyword")
        assert edit.returncode == 0, edit.stdout + edit.stderr
        said = " ".join(edit.stdout.split())
        assert "adobe: gets a row (fixed: title: removed" in said
        assert f"the run {paused['id']} waits for review: it takes this up when answered" in said
        assert api(srv.api_url, "GET", f"/flow_runs/{paused['id']}")["state"]["type"] == "PAUSED", \
            "an edit is no decision about the other assets: the run still waits"
        assert outbox_files(wd) == []
        approve = terminal(env, wd, "approve")
        assert approve.returncode == 0
        assert f"answered the paused run {paused['id']}" in approve.stdout.replace("\n", " ")
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = api(srv.api_url, "GET", f"/flow_runs/{paused['id']}")
    assert run["state"]["type"] == "COMPLETED", run["state"]
    rows = {row["Filename"]: row
            for row in csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines())}
    assert sorted(rows) == names and outbox_files(wd) == names
    assert (rows[names[0]]["Title"], rows[names[0]]["Keywords"]) == ("Corrected by the contributor",
                                                                     "corrected,keyword")
    import pyexiv2

    with pyexiv2.Image(str(wd.outbox("adobe") / names[0])) as sent:
        assert sent.read_iptc()["Iptc.Application2.Keywords"] == ["corrected", "keyword"], "packed again before sending"


@ON_SERVER
def test_a_run_killed_while_paused_loses_nothing_and_the_terminal_answers_the_next_one(server, tmp_path):
    srv, env = server
    wd = review_workdir(tmp_path, "timeout_hours = 1")
    env = dict(env, PREFECT_API_URL=srv.api_url)
    dead = start_run(env, wd, "--count", "2")
    try:
        killed = paused_run(srv.api_url, wd)
    finally:
        dead.kill()
        dead.wait()
    names = sorted(p.name for p in wd.assets.glob("*.jpg"))
    assert all("review" not in json.loads(wd.sidecar(n).read_text(encoding="utf-8")) for n in names)
    proc = start_run(env, wd, "--count", "0")
    try:
        again = paused_run(srv.api_url, wd, besides=killed["id"])
        keyset = again["state"]["state_details"]["run_input_keyset"]
        description = api(srv.api_url, "GET", f"/flow_runs/{again['id']}/input/{keyset['description']}")
        assert "2 asset(s) waiting" in str(description), "asked again about both"
        approve = terminal(env, wd, "approve")
        assert f"answered the paused run {again['id']}" in approve.stdout.replace("\n", " "), approve.stdout
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert outbox_files(wd) == names and adobe_csv_files(wd) == names
