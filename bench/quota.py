"""Benchmark 1: the describe stage against the quota, and the seed's sequential loop on the same jobs.

    .venv/bin/python -m bench.quota                                  # 120 images, 250 ms, 600 RPM
    .venv/bin/python -m bench.quota --images 240 --latency 0.5 --rpm 300 --concurrency 8

A fake Gemini REST server on 127.0.0.1 (``tests/fake_gemini.py``) answers
every request with valid metadata after ``--latency`` seconds; the real
google-genai SDK talks to it. In a fresh process on the embedded default
Prefect server:

1. the project's describe stage (``tasks.orchestration.describe_runs.describe_assets``: one task
   run per asset, the shared rate limiter, ``gemini.concurrency`` at once)
   describes ``--images`` assets at ``requests_per_minute = --rpm``;
2. the seed's loop (``bench/seed_loop.py``: ``run_with_dead_letter`` one job
   after another) runs the same jobs against the same server.

Reported: each side's wall time and achieved rate as a share of the quota,
the ratio of the two, requests per asset, and the fake server's own record
of arrivals: the most requests in any 60 s window (must stay ≤ the quota),
in any 1 s window, and the smallest gap between two requests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from bisect import bisect_left
from itertools import pairwise
from pathlib import Path

from bench.measure import OUT, prefect_env, run_child, server_trouble


def most_in_window(times: list[float], window: float) -> int:
    """Most arrivals inside one half-open window ``[t, t + window)``."""
    times = sorted(times)
    return max((bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


def arrivals(times: list[float], rpm: int) -> dict:
    times = sorted(times)
    gaps = [b - a for a, b in pairwise(times)]
    return {
        "requests": len(times),
        "first_to_last_s": times[-1] - times[0] if times else 0.0,
        "most_in_60s": most_in_window(times, 60.0),
        "most_in_1s": most_in_window(times, 1.0),
        "quota_per_1s": rpm / 60,
        "min_gap_ms": 1000 * min(gaps) if gaps else None,
        "spacing_ms": 60_000 / rpm,
        #: The rate while calling: requests after the first per second between the first and the last, / quota.
        "calling_share_of_quota": (len(times) - 1) / (times[-1] - times[0]) * 60 / rpm if len(times) > 1 else None,
    }


def child(images: int, latency: float, rpm: int, concurrency: int, root: Path, out: Path) -> None:
    """Runs inside the fresh process."""
    from tests.fakes.gemini import FAKE_KEY, FakeGemini, slow

    fake = FakeGemini().start()
    fake.default = lambda req: slow(latency)
    os.environ.update(GEMINI_API_KEY=FAKE_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)

    from google import genai  # noqa: F401  (the SDK's import, ≈ 0.5–1 s once per process, is timed on neither side)
    from prefect import flow

    from bench.measure import write_tiny_assets
    from bench.seed_loop import gemini_call_model, run_jobs
    from tasks.core.records import list_assets
    from tasks.core.settings import GeminiSettings, Settings
    from tasks.core.workdir import Workdir
    from tasks.orchestration.describe_runs import describe_assets
    from tasks.stages.run_context import RunContext

    wd = Workdir(root / "work").prepare()
    write_tiny_assets(wd.assets, images, prefix="photo")
    assets = list_assets(wd.assets)
    settings = Settings(gemini=GeminiSettings(requests_per_minute=rpm, concurrency=concurrency, timeout_s=30))

    @flow(name="bench-describe-stage")
    def describe_stage() -> dict:
        t0 = time.monotonic()  # the fake server stamps arrivals with the same clock
        report = describe_assets(RunContext(wd, settings), assets)
        t1 = time.monotonic()
        return {"seconds": t1 - t0, "started": t0, "ended": t1,
                "described": len(report.described), "parked": len(report.parked),
                "pending": len(report.pending), "tokens": report.tokens}

    ours = describe_stage()
    ours_arrivals = arrivals([r.at for r in fake.requests], rpm)
    # Time the stage spent before its first request (setup, first task run) and after its last (tail).
    ours["before_first_request_s"] = min(r.at for r in fake.requests) - ours.pop("started")
    ours["after_last_request_s"] = ours.pop("ended") - max(r.at for r in fake.requests)
    ours_per_asset = len(fake.requests) / images

    fake.requests.clear()
    jobs = [{"job_id": a.asset_id, "path": str(a.path), "asset": a.name} for a in assets]
    t0 = time.perf_counter()
    call_model = gemini_call_model(settings.gemini.model, FAKE_KEY,
                                   timeout_s=30)  # as ours makes its client in the stage
    results = run_jobs(jobs, settings.gemini.model, call_model, str(root / "seed_dead_letter.db"))
    seed_s = time.perf_counter() - t0
    seed_arrivals = arrivals([r.at for r in fake.requests], rpm)
    fake.stop()

    def share(done: int, seconds: float) -> float:
        return done / seconds * 60 / rpm

    out.write_text(json.dumps({
        "images": images, "latency_s": latency, "rpm": rpm, "concurrency": concurrency,
        "ours": ours | {"share_of_quota": share(ours["described"], ours["seconds"]),
                        "requests_per_asset": ours_per_asset, "arrivals": ours_arrivals},
        "seed": {"seconds": seed_s, "described": sum(1 for r in results if r is not None),
                 "share_of_quota": share(sum(1 for r in results if r is not None), seed_s),
                 "arrivals": seed_arrivals},
    }))


def measure(images: int = 120, latency: float = 0.25, rpm: int = 600, concurrency: int = 4,
            timeout: float = 1800) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-quota-") as tmp:
        root = Path(tmp)
        out = root / "result.json"
        args = [sys.executable, "-m", "bench.quota", "--images", str(images), "--latency", str(latency),
                "--rpm", str(rpm), "--concurrency", str(concurrency), "--child", "--dir", tmp, "--out", str(out)]
        rc, wall, log = run_child(args, prefect_env(root / "prefect"), root / "child.log", timeout)
        result = json.loads(out.read_text()) if out.exists() else {}
        result.update(exit_code=rc, process_wall_s=wall, server_trouble=server_trouble(log)[:10])
        if rc != 0:
            result["log_tail"] = log[-3000:]
    if "ours" in result:
        result["ratio_ours_to_seed"] = result["ours"]["share_of_quota"] / result["seed"]["share_of_quota"]
    return result


def report(r: dict) -> str:
    if "ours" not in r:
        return f"quota benchmark failed (exit {r.get('exit_code')}):\n{r.get('log_tail', '')}"
    o, s = r["ours"], r["seed"]
    oa, sa = o["arrivals"], s["arrivals"]
    rows = [
        f"{r['images']} images, {1000 * r['latency_s']:.0f} ms per call, quota {r['rpm']} RPM, "
        f"concurrency {r['concurrency']}",
        "",
        "| | wall s | described | share of quota (wall) | share of quota (first→last request) | requests/asset "
        "| most in any 60 s | most in any 1 s | min gap ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| describe stage (limiter) | {o['seconds']:.2f} | {o['described']} | {100 * o['share_of_quota']:.1f} % | "
        f"{100 * oa['calling_share_of_quota']:.1f} % | "
        f"{o['requests_per_asset']:.2f} | {oa['most_in_60s']} (≤ {r['rpm']}) | "
        f"{oa['most_in_1s']} (quota/s {oa['quota_per_1s']:g}) | "
        f"{oa['min_gap_ms']:.1f} (spacing {oa['spacing_ms']:g}) |",
        f"| seed loop (sequential) | {s['seconds']:.2f} | {s['described']} | {100 * s['share_of_quota']:.1f} % | "
        f"{100 * sa['calling_share_of_quota']:.1f} % | "
        f"{sa['requests'] / r['images']:.2f} | {sa['most_in_60s']} | {sa['most_in_1s']} | {sa['min_gap_ms']:.1f} |",
        "",
        f"Describe stage: {o['before_first_request_s']:.2f} s from its start to the first request (client, store, "
        f"first task run), {o['after_last_request_s']:.2f} s from the last request to its end (that call's "
        f"{1000 * r['latency_s']:.0f} ms, settling). The quota's own minimum for {r['images']} calls is "
        f"{(r['images'] - 1) * 60 / r['rpm'] + r['latency_s']:.2f} s.",
        "",
        f"Ours / seed: {r['ratio_ours_to_seed']:.2f}×. Goal ≥ 95 % of quota: "
        f"{'met' if o['share_of_quota'] >= 0.95 else 'NOT met'}; no 60 s window over quota: "
        f"{'met' if oa['most_in_60s'] <= r['rpm'] else 'NOT met'}.",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.quota", description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=120)
    ap.add_argument("--latency", type=float, default=0.25, help="seconds the fake Gemini takes per call")
    ap.add_argument("--rpm", type=int, default=600, help="gemini.requests_per_minute (the quota)")
    ap.add_argument("--concurrency", type=int, default=4, help="gemini.concurrency")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.images, args.latency, args.rpm, args.concurrency, args.dir, args.out)
        return {}
    print(f"quota: {args.images} images at {args.latency * 1000:.0f} ms, {args.rpm} RPM …", flush=True)
    r = measure(args.images, args.latency, args.rpm, args.concurrency)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "quota.json").write_text(json.dumps(r, indent=2))
    print(report(r))
    return r


if __name__ == "__main__":
    main()
