"""Many accounts on the cluster, one shared Gemini quota: 4 accounts × 1,000 assets on 2 process workers.

    .venv/bin/python -m bench.cluster_accounts                      # 4 × 1,000, 600 RPM shared, 250 ms per call
    .venv/bin/python -m bench.cluster_accounts --accounts 2 --assets 50 --rpm 120   # a quick look
    .venv/bin/python -m bench.cluster_accounts --redis     # the server's messaging on Redis (`redis` extra)
    .venv/bin/python -m bench.cluster_accounts --redis --accounts 1 --assets 400 --prefect-redis-timer 1

``microstock cluster up`` (PostgreSQL, a Prefect server on it, two process
workers; harness/cluster.py) in a fresh folder, then
``--accounts`` accounts deployed with ``microstock accounts deploy``, each with
``--assets`` 2400×1800 JPEGs every agency takes, local outboxes, and one
``[gemini]`` setting shared by all: ``requests_per_minute = --rpm``,
``concurrency = --concurrency``, ``quota_project = "bench-project"`` — so every
flow run takes its describe calls from one server-side rate limit
(tasks/orchestration/shared_quota.py). The test Gemini server
(tests/fakes/gemini.py) runs in this process and answers every call after
``--latency`` seconds; the workers reach it through ``GOOGLE_GEMINI_BASE_URL``.
One ``stock-batch`` run per account is started at once; the bench waits for
all and reads back:

- per account: described (sidecars), parked (the shared dead-letter store),
  files in the outboxes, ledger lines and distinct ledger entries (every
  file once), task runs recorded and not finished, and task-run state events
  in the server's event store by name (an event lost before Redis is
  missing there too);
- at the test Gemini server: requests, the most in any 60 s window (must be
  ≤ the quota), and the share of the quota used while calling (requests
  after the first per minute between the first and the last, / quota);
- the 1-minute load average every 30 s (the machine is shared).

Figures go to stdout and ``bench/out/cluster_accounts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from pathlib import Path

import httpx

from bench.measure import OUT, server_trouble, write_uploadable_assets
from harness.cluster import POOL, Cluster
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore

PROJECT = "bench-project"
AGENCIES = ("adobe", "vecteezy", "dreamstime")
FINISHED = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def most_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


class Api:
    def __init__(self, env: dict[str, str]) -> None:
        self.url = env["PREFECT_API_URL"]
        self.auth = tuple(env["PREFECT_API_AUTH_STRING"].split(":", 1))

    def __call__(self, method: str, path: str, body: dict | None = None):
        r = httpx.request(method, f"{self.url}{path}", json=body, auth=self.auth, timeout=60)
        r.raise_for_status()
        return r.json() if r.content else None

    def task_runs(self, flow_run_id: str, states: tuple[str, ...] | None = None) -> int:
        body: dict = {"flow_runs": {"id": {"any_": [flow_run_id]}}}
        if states:
            body["task_runs"] = {"state": {"type": {"any_": list(states)}}}
        return self("POST", "/task_runs/count", body)

    def task_run_events(self, run: dict) -> dict[str, int]:
        """The flow run's task-run state events in the server's event store, by name (each task run's Pending,
        Running and Completed: one fewer than its task runs is an event lost on its way)."""
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
        occurred = {"since": run["created"], "until": until}
        body = {"filter": {"occurred": occurred, "event": {"prefix": ["prefect.task-run."]},
                           "related": {"id": [f"prefect.flow-run.{run['id']}"]}}}
        return {c["value"]: c["count"] for c in self("POST", "/events/count-by/event", body)}


def write_accounts(home: Path, accounts: int, assets: int, rpm: int, concurrency: int,
                   dead_letter_url: str) -> list[str]:
    names = [f"bench-{n}" for n in range(1, accounts + 1)]
    lines = [f'work_pool = "{POOL}"', f'dead_letter_url = "{dead_letter_url}"', ""]
    for name in names:
        wd = home / "bench-accounts" / name
        write_uploadable_assets(wd / "assets", assets, prefix=name)
        (wd / "microstock.toml").write_text(
            f"[gemini]\nrequests_per_minute = {rpm}\nrequests_per_day = 0\nconcurrency = {concurrency}\n"
            f'quota_project = "{PROJECT}"\n', encoding="utf-8")
        lines += ["[[account]]", f'name = "{name}"', f'workdir = "{wd}"', ""]
    (home / "bench-accounts.toml").write_text("\n".join(lines), encoding="utf-8")
    return names


def account_figures(api: Api, wd: Path, name: str, run: dict, dead_letter_url: str) -> dict:
    ledger = [line.split("\t") for line in (wd / "uploads.ledger").read_text().splitlines()
              if line.strip() and not line.startswith("#")] if (wd / "uploads.ledger").exists() else []
    entries = [(f[1], Path(f[2]).name) for f in ledger if len(f) > 2]
    parked = len(PostgresDeadLetterStore(dead_letter_url, name).list())
    start, end = run.get("start_time"), run.get("end_time")
    return {
        "account": name, "state": run["state"]["type"], "message": run["state"].get("message"),
        "flow_run_s": run.get("total_run_time"), "start": start, "end": end,
        "described": len(list((wd / "assets").glob("*.json"))), "parked": parked,
        "outbox_files": {a: len(list((wd / "outbox" / a).glob("*.jpg"))) for a in AGENCIES},
        "ledger_lines": len(ledger), "ledger_distinct": len(set(entries)),
        "task_runs": api.task_runs(run["id"]),
        "task_runs_not_finished": api.task_runs(run["id"], ("PENDING", "RUNNING", "SCHEDULED", "PAUSED")),
        "task_runs_not_completed": api.task_runs(run["id"]) - api.task_runs(run["id"], ("COMPLETED",)),
        "task_run_events": api.task_run_events(run),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster_accounts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--accounts", type=int, default=4)
    ap.add_argument("--assets", type=int, default=1000)
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5400)
    ap.add_argument("--redis", action="store_true", help="the cluster's messaging on Redis (cluster up --redis)")
    ap.add_argument("--prefect-redis-timer", type=int, default=None, metavar="SECONDS",
                    help="with --redis, for comparison: the server's event publisher as prefect-redis ships it "
                         "(batch of 5, timed publish every SECONDS; 10 is its default) instead of "
                         "tasks/orchestration/redis_publisher.py's settings")
    args = ap.parse_args(argv)

    from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json, slow

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    loads: list[tuple[str, float]] = []
    stop = threading.Event()

    def sample_load() -> None:
        while not stop.is_set():
            loads.append((time.strftime("%H:%M:%S", time.gmtime()), os.getloadavg()[0]))
            stop.wait(30)

    threading.Thread(target=sample_load, daemon=True).start()
    fake = FakeGemini().start()
    fake.default = lambda req: slow(args.latency, answer_json())
    saved = dict(os.environ)
    os.environ.update(GEMINI_API_KEY=FAKE_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)  # the workers inherit them
    home = Path(tempfile.mkdtemp(prefix="bench-cluster-")) / "cluster"
    cluster = Cluster(home)
    result: dict = {"started": started, "accounts": args.accounts, "assets_each": args.assets, "rpm": args.rpm,
                    "concurrency": args.concurrency, "latency_s": args.latency, "workers": args.workers,
                    "messaging": "redis" if args.redis else "in-memory"}
    if args.prefect_redis_timer is not None:  # what harness.redis.RedisServer.prefect_server_env gives the server
        import harness.redis

        harness.redis.REDIS_PUBLISHER_SETTINGS = {
            "PREFECT_REDIS_MESSAGING_PUBLISHER_BATCH_SIZE": "5",
            "PREFECT_REDIS_MESSAGING_PUBLISHER_PUBLISH_EVERY": str(args.prefect_redis_timer)}
        result["redis_publisher"] = f"prefect-redis's: batch of 5, timed publish every {args.prefect_redis_timer} s"
    try:
        t0 = time.monotonic()
        cluster.up(workers=args.workers, redis=args.redis, say=lambda line: print(line, flush=True))
        env = cluster.client_env()
        api = Api(env)
        names = write_accounts(home, args.accounts, args.assets, args.rpm, args.concurrency,
                               env["MICROSTOCK_DEAD_LETTER_URL"])
        cli_env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MICROSTOCK_", "PG"))}
        deploy = subprocess.run([sys.executable, "-c", "from flows.cli import main; main()", "accounts", "deploy",
                                 str(home / "bench-accounts.toml"), "--pool", POOL],
                                env={**cli_env, **env}, capture_output=True, text=True, timeout=600)
        if deploy.returncode:
            raise SystemExit(f"accounts deploy failed: {deploy.stderr[-2000:]}")
        flows = {f["id"]: f["name"] for f in api("POST", "/flows/filter", {})}
        deps = {f"{flows[d['flow_id']]}/{d['name']}": d["id"] for d in api("POST", "/deployments/filter", {})}
        result["setup_s"] = time.monotonic() - t0
        print(f"cluster up and {len(names)} accounts deployed in {result['setup_s']:.0f} s", flush=True)

        t0 = time.monotonic()
        runs = {n: api("POST", f"/deployments/{deps[f'stock-batch/{n}']}/create_flow_run",
                       {"parameters": {"count": 0}})["id"] for n in names}
        deadline = time.monotonic() + args.timeout
        done: dict[str, dict] = {}
        while len(done) < len(runs) and time.monotonic() < deadline:
            for n, rid in runs.items():
                if n not in done:
                    try:
                        fr = api("GET", f"/flow_runs/{rid}")
                    except (httpx.HTTPStatusError, httpx.TransportError) as exc:  # a busy server: ask again
                        result["poll_errors"] = result.get("poll_errors", 0) + 1
                        print(f"poll of {n}: {exc}", flush=True)
                        continue
                    if fr["state"]["type"] in FINISHED:
                        done[n] = fr
                        print(f"{n}: {fr['state']['type']} after {time.monotonic() - t0:.0f} s: "
                              f"{fr['state'].get('message')}", flush=True)
            time.sleep(5)
        result["all_runs_s"] = time.monotonic() - t0
        # The server's record of the last task runs: until none is unfinished (at most 180 s), how long it took.
        unfinished = ("PENDING", "RUNNING", "SCHEDULED", "PAUSED")
        t_rec = time.monotonic()
        while (sum(api.task_runs(rid, unfinished) for rid in runs.values())
               and time.monotonic() - t_rec < 180):
            time.sleep(2)
        result["all_task_runs_recorded_after_s"] = time.monotonic() - t_rec
        os.environ["PGPASSFILE"] = env["PGPASSFILE"]
        result["per_account"] = [account_figures(api, home / "bench-accounts" / n, n,
                                                 api("GET", f"/flow_runs/{runs[n]}"), env["MICROSTOCK_DEAD_LETTER_URL"])
                                 for n in names]
        arrivals = sorted(r.at for r in fake.requests if ":generateContent" in r.path)
        span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
        result["gemini"] = {
            "requests": len(arrivals), "first_to_last_s": span,
            "most_in_60s": most_in_window(arrivals, 60.0), "most_in_1s": most_in_window(arrivals, 1.0),
            "share_of_quota_while_calling": (len(arrivals) - 1) / span * 60 / args.rpm if span else None,
            "share_of_quota_busiest_60s": most_in_window(arrivals, 60.0) / args.rpm,
        }
        server_log = (home / "server.log").read_text(errors="replace")
        result["server_log_trouble"] = len(server_trouble(server_log))
        result["server_log_trouble_first"] = server_trouble(server_log)[:5]
        result["queue_full_dropped"] = server_log.count("Subscription queue is full")
    finally:
        stop.set()
        result["load_1min"] = loads
        OUT.mkdir(parents=True, exist_ok=True)
        if (home / "server.log").exists():  # down removes the cluster's folder
            shutil.copy(home / "server.log", OUT / "cluster_accounts-server.log")
        cluster.down(say=lambda line: None)
        shutil.rmtree(home.parent, ignore_errors=True)
        fake.stop()
        os.environ.clear()
        os.environ.update(saved)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cluster_accounts.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
