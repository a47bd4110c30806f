"""`microstock cluster up|down` for real: PostgreSQL, a Prefect server on it with auth, two process workers,
two demo accounts deployed and run, one shared dead-letter store (make test-cluster)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.cluster import DEMO_ACCOUNTS, POOL, Cluster
from tasks.orchestration.environment import RUN_LOG_ENV
from tasks.orchestration.local_server import port_in_use
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore
from tests.fakes.prefect_api import wait_until
from tests.postgres import require_postgres

pytestmark = pytest.mark.cluster

MICROSTOCK = [sys.executable, "-c", "from flows.cli import main; main()"]
FLOWS = ("stock-batch", "dead-letter-summary", "replay-dead-letters", "collect-batches")
GONE = "0" * 64


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_postgres()
    home = tmp_path_factory.mktemp("cluster") / "home"
    said: list[str] = []
    cl = Cluster(home)
    try:
        cl.up(say=said.append)
        env = cl.client_env()
        yield {"cluster": cl, "home": home, "said": said, "env": env, "state": cl.state(),
               "url": env["PREFECT_API_URL"], "auth": tuple(env["PREFECT_API_AUTH_STRING"].split(":", 1))}
    finally:
        cl.down(say=lambda line: None)


def api(c: dict, method: str, path: str, body: dict | None = None):
    r = httpx.request(method, f"{c['url']}{path}", json=body, auth=c["auth"], timeout=30)
    r.raise_for_status()
    return r.json() if r.content else None


def deployments(c: dict) -> dict[str, dict]:
    flows = {f["id"]: f["name"] for f in api(c, "POST", "/flows/filter", {})}
    return {f"{flows[d['flow_id']]}/{d['name']}": d for d in api(c, "POST", "/deployments/filter", {})}


def run(c: dict, name: str, parameters: dict) -> str:
    return api(c, "POST", f"/deployments/{deployments(c)[name]['id']}/create_flow_run",
               {"parameters": parameters})["id"]


def finished(c: dict, run_id: str, timeout_s: float = 300) -> dict:
    def done():
        fr = api(c, "GET", f"/flow_runs/{run_id}")
        return fr if fr["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    return wait_until(f"flow run {run_id}", done, timeout_s)


def shared_store(c: dict, account: str) -> PostgresDeadLetterStore:
    """The store as a worker's flow run opens it: the URL without a password (PGPASSFILE must be set)."""
    return PostgresDeadLetterStore(c["env"]["MICROSTOCK_DEAD_LETTER_URL"], account)


def test_a_request_without_the_auth_string_is_refused(cluster):
    url = cluster["url"]
    assert httpx.post(f"{url}/flows/filter", json={}, timeout=30).status_code == 401
    assert httpx.post(f"{url}/flows/filter", json={}, auth=("microstock", "guess"), timeout=30).status_code == 401
    assert httpx.post(f"{url}/flows/filter", json={}, auth=cluster["auth"], timeout=30).status_code == 200
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200, "health stays open for probes"
    assert cluster["state"].host == "127.0.0.1" and url.startswith("http://127.0.0.1:")


def test_secrets_are_in_private_files_only_never_in_logs_or_output(cluster):
    home, env = cluster["home"], cluster["env"]
    password = (home / "pgpass").read_text().strip().rsplit(":", 1)[1]
    auth = env["PREFECT_API_AUTH_STRING"]
    for private in (home / "pgpass", home / "cluster.env"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    assert password not in (home / "cluster.env").read_text() and auth not in (home / "pgpass").read_text()
    said = "\n".join(cluster["said"])
    for path in [p for p in home.rglob("*") if p.is_file() and p.name not in ("pgpass", "cluster.env")]:
        text = path.read_bytes()
        assert password.encode() not in text and auth.encode() not in text, path
    assert password not in said and auth not in said
    assert "PostgreSQL on 127.0.0.1:" in said and "auth required" in said


def test_each_demo_account_has_every_deployment_each_limited_to_one_run(cluster):
    deps = deployments(cluster)
    assert set(deps) == {f"{flow}/{account}" for flow in FLOWS for account in DEMO_ACCOUNTS}
    for name, d in deps.items():
        account = name.split("/")[1]
        assert d["work_pool_name"] == POOL
        assert d["concurrency_limit"] == 1 or d["global_concurrency_limit"]["limit"] == 1, name
        assert d["parameters"]["workdir"] == str(cluster["home"] / "accounts" / account)
        assert d["job_variables"]["env"] == {**RUN_LOG_ENV, "MICROSTOCK_ACCOUNT": account,
                                             "MICROSTOCK_DEAD_LETTER_URL": cluster["env"]["MICROSTOCK_DEAD_LETTER_URL"]}
        assert f"account:{account}" in d["tags"]
    assert deps["stock-batch/demo-a"]["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
    assert deps["replay-dead-letters/demo-b"]["schedules"] == []


def test_two_accounts_run_on_the_workers_into_their_own_workdirs_and_one_dead_letter_store(cluster, monkeypatch):
    home = cluster["home"]
    monkeypatch.setenv("PGPASSFILE", cluster["env"]["PGPASSFILE"])
    for account in DEMO_ACCOUNTS:  # a parked job per account, its image gone: a replay leaves it failing
        shared_store(cluster, account).park(GONE, payload={"asset": "lost.jpg", "asset_id": GONE}, model="offline",
                                            error_class="exhausted:503", error_message="503 UNAVAILABLE", attempts=4,
                                            asset_name="lost.jpg")

    batches = {account: run(cluster, f"stock-batch/{account}", {"count": 2}) for account in DEMO_ACCOUNTS}
    for account, run_id in batches.items():
        fr = finished(cluster, run_id)
        assert fr["state"]["type"] == "COMPLETED", (account, fr["state"])
        assert fr["state"]["message"].startswith("2 described · 0 parked · 6 uploaded"), fr["state"]["message"]
        assert fr["work_pool_name"] == POOL
        wd = home / "accounts" / account
        for agency in ("adobe", "vecteezy", "dreamstime"):
            assert len(list((wd / "outbox" / agency).glob("*.jpg"))) == 2, (account, agency)
        ledger = [line.split("\t") for line in (wd / "uploads.ledger").read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        assert sorted((f[1], Path(f[2]).name) for f in ledger) == sorted(
            (agency, name) for agency in ("adobe", "dreamstime", "vecteezy")
            for name in ("mountains_dawn_001.jpg", "sunset_sea_000.jpg")), "every file uploaded once"
        assert not (wd / "dead_letter.db").exists(), "the account parks into the shared store, not SQLite"

    replay = finished(cluster, run(cluster, "replay-dead-letters/demo-a", {"dry_run": False}))
    assert replay["state"]["type"] == "COMPLETED", replay["state"]
    assert "1 still failing" in replay["state"]["message"]
    assert "no longer in assets" in shared_store(cluster, "demo-a").get(GONE).error_message
    assert shared_store(cluster, "demo-b").get(GONE).error_message == "503 UNAVAILABLE", "demo-b's row untouched"

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MICROSTOCK_"))}
    out = subprocess.run(MICROSTOCK + ["dead-letter", "summary", "--all-accounts", "--workdir",
                                       str(home / "accounts" / "demo-a")],
                         env={**env, **cluster["env"]}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert [line for line in out.stdout.splitlines() if line.startswith("account ")] == [
        "account demo-a: dead-letter: 1 parked", "account demo-b: dead-letter: 1 parked"]


def test_up_twice_is_refused(cluster):
    from tasks.core.errors import ConfigError

    with pytest.raises(ConfigError, match="already up"):
        Cluster(cluster["home"]).up(say=lambda line: None)


def test_down_stops_every_process_and_postgresql_and_removes_the_cluster(cluster):
    state = cluster["state"]
    pg_home = Path(state.pg_home)
    assert cluster["cluster"].down(say=lambda line: None)
    for name, pid in state.pids.items():
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", name
    assert not port_in_use(state.api_port) and not port_in_use(state.pg_port)
    assert not pg_home.exists() and not cluster["home"].exists()
    assert not cluster["cluster"].down(say=lambda line: None), "a second down finds nothing"
