"""Benchmarks 2 and 3: orchestration overhead per asset and peak memory, for 100, 1,000 and 5,000 assets.

    .venv/bin/python -m bench.scale                      # sizes 100 1000 5000
    .venv/bin/python -m bench.scale --sizes 100 1000
    .venv/bin/python -m bench.scale --sizes 1000 --uploadable   # every stage, uploads included

Each size runs the whole ``stock-batch`` flow once, in a fresh process on the
embedded default (ephemeral Prefect server on SQLite, offline describer: zero
model latency), over that many tiny distinct JPEGs placed in ``assets/``.
Prefect's own record of the run gives each stage's wall time; the describe
stage is one task run per asset (its retries and parking hook are why), the
other stages are one task each (one per agency for uploads).

With ``--uploadable`` the assets are 2400×1800 JPEGs every agency takes, so
every stage has work: pack makes upload-ready files, previews and
thumbnails, and the upload stage sends each asset to the three local
outboxes. Then the server's record is awaited for every task run, not only
the describe runs.

Reported per size: wall time of the whole process, the flow run and each
stage; the describe stage per asset, the offline describer's own work per
asset (describe + sidecar, timed bare in the same process), and the
difference = Prefect's per-asset overhead; peak RSS of the flow process
(``getrusage``) and of the ephemeral server process (sampled); whether any
task run did not complete, any server trouble (503, locked database) and how
often the server dropped an event ("Subscription queue is full") in
the log. Linear growth shows as a flat per-asset time across sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from bench.measure import OUT, prefect_env, run_child, server_trouble

SIZES = (100, 1000, 5000)
#: The flow's stages in order (task name before the first ``-``).
STAGES = ["assets", "describe", "pack", "csv", "zip", "upload"]


def child(n: int, root: Path, out: Path, uploadable: bool = False) -> None:
    """Runs inside the fresh process: make the assets, run the flow, read its record back, write JSON."""
    from bench.measure import (
        ChildRssSampler,
        peak_rss_mb,
        seconds_until_all_recorded,
        stage_times,
        write_tiny_assets,
        write_uploadable_assets,
    )
    from tasks.orchestration.environment import set_prefect_env

    set_prefect_env(root / "work")  # Prefect's environment as `microstock run` sets it (the recorder's batching)

    wd_root = root / "work"
    paths = (write_uploadable_assets if uploadable else write_tiny_assets)(wd_root / "assets", n)
    if not uploadable:  # tiny assets no agency takes: with none chosen, none is rejected before describe (issue 14)
        (wd_root / "microstock.toml").write_text("".join(f"[agencies.{a}]\nenabled = false\n"
                                                         for a in ("adobe", "vecteezy", "dreamstime")))
    rss_before = peak_rss_mb()

    from flows.stock_batch import stock_batch

    with ChildRssSampler() as server_rss:
        t0 = time.perf_counter()
        state = stock_batch(workdir=str(wd_root), count=0, return_state=True)
        flow_call_s = time.perf_counter() - t0
    rss_flow = peak_rss_mb()
    described = sum(1 for p in (wd_root / "assets").glob("*.json"))
    all_recorded_s = None
    if uploadable:  # the upload runs come last: wait for the server to record every run, not just describe's
        all_recorded_s = seconds_until_all_recorded(state.state_details.flow_run_id)
    times = stage_times(state.state_details.flow_run_id, described)
    from flows.run_outcome import INCOMPLETE  # uploads left undone: a Failed-type state, the summary kept

    summary = state.result(raise_on_failure=False) if state.is_completed() or state.name == INCOMPLETE else {}

    # The describer's own work per asset, without Prefect: describe + write the sidecar.
    from tasks.core.records import Asset, write_sidecar
    from tasks.stages.offline_describer import OfflineDescriber

    sample = paths[: min(n, 300)]
    bare_dir = root / "bare"
    bare_dir.mkdir()
    describer = OfflineDescriber()
    t0 = time.perf_counter()
    for p in sample:
        asset = Asset(name=p.name, asset_id="0" * 64, path=p)
        write_sidecar(bare_dir / f"{p.stem}.json", asset, describer.describe(asset))
    bare_per_asset = (time.perf_counter() - t0) / len(sample)

    out.write_text(json.dumps({
        "assets": n,
        "state": state.type.value,
        "message": state.message,
        "described": described,
        "flow_call_s": flow_call_s,
        "flow_run_s": times.flow_s,
        "stage_s": times.span_s,
        "task_runs": times.runs,
        "task_runs_not_completed": times.not_completed,
        "server_lag_s": times.server_lag_s,
        "uploadable": uploadable,
        "all_recorded_after_s": all_recorded_s,
        "uploaded": summary.get("uploaded_now", {}),
        "ledger_lines": sum(1 for line in open(wd_root / "uploads.ledger") if not line.startswith("#"))
        if (wd_root / "uploads.ledger").exists() else 0,
        "bare_describe_ms": bare_per_asset * 1000,
        "peak_rss_mb_before_flow": rss_before,
        "peak_rss_mb": rss_flow,
        "server_peak_rss_mb": server_rss.peak_mb,
    }))


def measure(n: int, uploadable: bool = False, timeout: float = 5400) -> dict:
    """One size in a fresh process; its figures, with the process's wall time and server trouble added."""
    with tempfile.TemporaryDirectory(prefix=f"bench-scale-{n}-") as tmp:
        root = Path(tmp)
        out = root / "result.json"
        rc, wall, log = run_child([sys.executable, "-m", "bench.scale", "--child", str(n), "--dir", tmp, "--out",
                                   str(out)]
                                  + (["--uploadable"] if uploadable else []),
                                  prefect_env(root / "prefect"), root / "child.log", timeout)
        result = json.loads(out.read_text()) if out.exists() else {"assets": n}
        result.update(exit_code=rc, process_wall_s=wall, server_trouble=server_trouble(log)[:10],
                      queue_full=log.count("Subscription queue is full"))
        if rc != 0:
            result["log_tail"] = log[-3000:]
    d = result.get("stage_s", {}).get("describe")
    if d:
        result["describe_ms_per_asset"] = 1000 * d / n
        result["overhead_ms_per_asset"] = result["describe_ms_per_asset"] - result["bare_describe_ms"]
    if result.get("flow_run_s"):
        result["flow_ms_per_asset"] = 1000 * result["flow_run_s"] / n
    return result


def report(results: list[dict]) -> str:
    """The figures as a markdown table, and the growth verdict."""
    lines = ["| assets | state | process s | flow run s | " + " | ".join(f"{s} s" for s in STAGES)
             + " | between stages s | describe ms/asset | bare ms/asset | overhead ms/asset | flow ms/asset "
             "| peak RSS MB (flow) | peak RSS MB (server) | server recorded all describe runs after s "
             "| task runs not completed | server errors |",
             "|---:|---|---:|---:|" + "---:|" * len(STAGES) + "---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        st = r.get("stage_s", {})
        between = r.get("flow_run_s", 0) - sum(st.values())
        lines.append(
            f"| {r['assets']:,} | {r.get('state', 'no result')} | {r.get('process_wall_s', 0):.1f} | "
            f"{r.get('flow_run_s', 0):.1f} | "
            + " | ".join(f"{st[s]:.1f}" if s in st else "–" for s in STAGES)
            + f" | {between:.1f} | {r.get('describe_ms_per_asset', 0):.1f} | {r.get('bare_describe_ms', 0):.1f} | "
            f"{r.get('overhead_ms_per_asset', 0):.1f} | {r.get('flow_ms_per_asset', 0):.1f} | "
            f"{r.get('peak_rss_mb', 0):.0f} | {r.get('server_peak_rss_mb', 0):.0f} | {r.get('server_lag_s', 0):.1f} | "
            f"{r.get('task_runs_not_completed', '?')} | {len(r.get('server_trouble', []))} |")
    # A small batch leaves part of its cost to the server (it records the runs after the flow), a big one
    # waits for it (the pace): the describe stage's whole cost is its time plus the server's catch-up.
    total = [(r["assets"], r["stage_s"]["describe"] + r.get("server_lag_s", 0))
             for r in results if "describe" in r.get("stage_s", {})]
    if len(total) >= 2:
        lines.append("")
        lines.append("Describe stage + server catch-up: " + ", ".join(
            f"{n:,} assets {t:.1f} s ({1000 * t / n:.1f} ms/asset)" for n, t in total) + ".")
        slopes = [(n1, 1000 * (t1 - t0) / (n1 - n0)) for (n0, t0), (n1, t1) in pairwise(total)]
        lines.append("Each further asset costs " + ", ".join(
            f"{ms:.1f} ms up to {n:,}" for n, ms in slopes) + "; "
            + ("linear (the cost per further asset grows less than 1.5×)."
               if max(ms for _, ms in slopes) < 1.5 * min(ms for _, ms in slopes)
               else "NOT linear (the cost per further asset grows 1.5× or more)."))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--uploadable", action="store_true",
                    help="assets every agency takes (2400×1800), so pack, zip and upload have work too")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.dir, args.out, args.uploadable)
        return []
    results = []
    for n in args.sizes:
        print(f"scale: {n:,} assets …", flush=True)
        r = measure(n, args.uploadable)
        results.append(r)
        print(f"  exit {r['exit_code']}, {r.get('state')}, {r.get('described')} described, "
              f"process {r['process_wall_s']:.1f} s, peak RSS {r.get('peak_rss_mb', 0):.0f} MB", flush=True)
        if args.uploadable:
            print(f"  uploaded {r.get('uploaded')}, {r.get('ledger_lines')} ledger lines, "
                  f"task runs {r.get('task_runs')}, "
                  f"every run recorded {r.get('all_recorded_after_s')} s after the flow", flush=True)
        print(f"  'Subscription queue is full' in the server log: {r.get('queue_full', 0)} times", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / ("scale-uploadable.json" if args.uploadable else "scale.json")).write_text(json.dumps(results, indent=2))
    print(report(results))
    return results


if __name__ == "__main__":
    main()
