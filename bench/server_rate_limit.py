"""How exactly a Prefect server holds a rate limit shared by processes: SQLite server vs PostgreSQL server.

    .venv/bin/python -m bench.server_rate_limit                       # 240/min, 2 processes, 120 s each
    .venv/bin/python -m bench.server_rate_limit --rpm 120 --procs 4 --seconds 180 --limit 2
    .venv/bin/python -m bench.server_rate_limit --client microstock --backends postgres --rpm 600

``--client prefect`` (the default) calls Prefect's own ``rate_limit()``;
``--client microstock`` takes the starts through the project's
``SharedQuotaLimiter`` (tasks/orchestration/shared_quota.py: it sets the
limit and decay itself from ``--rpm``, holding 97 % of it, ten slots a call; ``--threads``
callers per process each "call" for ``--latency`` seconds in a slot).

For each backend a fresh ``prefect server start`` on 127.0.0.1 (SQLite: the
default; PostgreSQL: Debian's, started as in ``microstock cluster up``) gets
one global concurrency limit with ``limit`` slots and a slot decay of
``rpm / 60`` per second — Prefect's way to use it as a rate limit. Then
``--procs`` processes call ``prefect.concurrency.sync.rate_limit(name)`` in a
loop for ``--seconds`` and note the time of every start. Reported: the
starts, the rate achieved as a share of ``rpm``, the most starts in any 60 s
window (the quota is broken above ``rpm``) and in any 1 s window. This is
the question of issue 18 item 2: can the server's limit share one Gemini
quota between processes and machines?
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from bisect import bisect_right
from pathlib import Path

import httpx

from bench.measure import bench_server

NAME = "gemini-quota-bench"


def _shared_caller(api_url: str, seconds: float, out, rpm: int, threads: int, latency: float) -> None:
    os.environ["PREFECT_API_URL"] = api_url
    import threading

    from tasks.orchestration.shared_quota import SharedQuotaLimiter

    limiter = SharedQuotaLimiter(NAME, rpm, threads)
    starts, deadline = [], time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            with limiter.slot():
                starts.append(time.time())
                time.sleep(latency)

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put(starts)


def _caller(api_url: str, seconds: float, out) -> None:
    os.environ["PREFECT_API_URL"] = api_url
    from prefect.concurrency.sync import rate_limit

    starts, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        rate_limit(NAME, strict=True)
        starts.append(time.time())
    out.put(starts)


def max_in_window(times: list[float], window_s: float) -> int:
    """The most starts in any ``window_s``-second window (each window starting at a start)."""
    return max((bisect_right(times, t + window_s - 1e-9) - i for i, t in enumerate(times)), default=0)


def measure(backend: str, *, rpm: int, limit: int, procs: int, seconds: float, client: str = "prefect",
            threads: int = 4, latency: float = 0.25) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"bench-rate-{backend}-"))
    try:
        with bench_server(backend, home) as server:
            if client == "prefect":
                r = httpx.post(f"{server.api_url}/v2/concurrency_limits/", timeout=30,
                               json={"name": NAME, "limit": limit, "slot_decay_per_second": rpm / 60})
                r.raise_for_status()
            ctx = multiprocessing.get_context("spawn")
            out = ctx.Queue()
            if client == "prefect":
                target, args = _caller, (server.api_url, seconds, out)
            else:
                target, args = _shared_caller, (server.api_url, seconds, out, rpm, threads, latency)
            workers = [ctx.Process(target=target, args=args) for _ in range(procs)]
            for w in workers:
                w.start()
            per_proc = [out.get(timeout=seconds + 300) for _ in workers]
            for w in workers:
                w.join(60)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    starts = sorted(t for part in per_proc for t in part)
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    achieved = (len(starts) - 1) / span * 60 if span else 0.0
    if client != "prefect":
        from tasks.orchestration.shared_quota import limit_and_decay

        limit = limit_and_decay(rpm)[0]
    return {"backend": backend, "client": client, "rpm": rpm, "limit": limit, "procs": procs, "seconds": seconds,
            "starts": len(starts), "per_process": [len(p) for p in per_proc],
            "achieved_per_min": round(achieved, 1), "share_of_rpm": round(achieved / rpm, 3),
            "max_in_60s": max_in_window(starts, 60.0), "max_in_1s": max_in_window(starts, 1.0)}


def report(rows: list[dict]) -> str:
    lines = ["| server | client | quota | limit (slots) | processes | starts | achieved | share | most in 60 s "
             "| most in 1 s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r.get('client', 'prefect')} | {r['rpm']}/min | {r['limit']} | {r['procs']} "
                     f"| {r['starts']} "
                     f"| {r['achieved_per_min']}/min | {r['share_of_rpm']:.0%} | {r['max_in_60s']} "
                     f"| {r['max_in_1s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.server_rate_limit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=int, default=240)
    ap.add_argument("--limit", type=int, default=1, help="slots of the limit: the burst it allows")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--client", choices=("prefect", "microstock"), default="prefect")
    ap.add_argument("--threads", type=int, default=4, help="microstock client: callers (concurrency) per process")
    ap.add_argument("--latency", type=float, default=0.25, help="microstock client: seconds each call holds its slot")
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    for backend in args.backends.split(","):
        rows.append(measure(backend, rpm=args.rpm, limit=args.limit, procs=args.procs, seconds=args.seconds,
                            client=args.client, threads=args.threads, latency=args.latency))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{started}, load average at the end {os.getloadavg()[0]:.2f}\n\n{report(rows)}")


if __name__ == "__main__":
    main()
