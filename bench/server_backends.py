"""The same stock-batch against a `prefect server start` on SQLite and on PostgreSQL, side by side.

    .venv/bin/python -m bench.server_backends                 # 1,000 assets
    .venv/bin/python -m bench.server_backends --assets 5000 --uploadable  # every stage, 3 local outboxes
    .venv/bin/python -m bench.server_backends --assets 1000 --backends sqlite --tune-sqlite
    .venv/bin/python -m bench.scale --help                    # what one run measures

For each backend a fresh server on 127.0.0.1 — SQLite with Prefect's
defaults; PostgreSQL 15 as ``microstock cluster up`` runs it (the task-run
recorder batched: ``tasks.orchestration.environment.SERVER_BATCHING``) — and one
child process running ``bench.scale``'s measurement (the whole flow over
``--assets`` tiny JPEGs, offline describer) with ``PREFECT_API_URL`` set to
that server. Reported per backend: the flow run and its describe stage, the
server's catch-up (how long after the flow it still needed to record every
describe run), task runs not recorded as finished, server errors in the
client's log, and peak RSS of the flow process and of the server's
processes (``VmHWM``); with ``--uploadable`` (2400×1800 JPEGs every agency
takes, uploaded to the three local outboxes) also the uploads, ledger lines
and every task run of the flow, and the task runs recorded per second (all
of them over the flow time plus the wait until the server had recorded the
last). ``--tune-sqlite`` gives the SQLite server the same
recorder settings, to tell the database's share from the settings'.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import OUT, bench_server, peak_rss_tree_mb, run_child, server_trouble
from tasks.orchestration.environment import SERVER_BATCHING


def measure(backend: str, assets: int, tune_sqlite: bool = False, uploadable: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-backend-{backend}-"))
    try:
        tuned = backend == "postgres" or tune_sqlite
        with bench_server(backend, tmp, SERVER_BATCHING if tuned else None) as server:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_SERVER_DATABASE", "PGPASS"))}
            env.update(PREFECT_API_URL=server.api_url, PREFECT_HOME=str(tmp / "client"),
                       PREFECT_LOGGING_LEVEL="WARNING")
            env.pop("GEMINI_API_KEY", None)
            env.pop("GOOGLE_API_KEY", None)
            out = tmp / "result.json"
            work = tmp / "run"
            work.mkdir()
            rc, wall, log = run_child([sys.executable, "-m", "bench.scale", "--child", str(assets), "--dir", str(work),
                                       "--out", str(out)] + (["--uploadable"] if uploadable else []),
                                      env, tmp / "child.log", timeout=7200)
            server_rss = peak_rss_tree_mb(server.proc.pid)
            result = json.loads(out.read_text()) if out.exists() else {"assets": assets}
        server_log = (tmp / "server" / "server.log").read_text(errors="replace")
        result.update(backend=backend + (" (recorder batched)" if tune_sqlite and backend == "sqlite" else ""),
                      exit_code=rc, process_wall_s=wall, server_peak_rss_mb=server_rss,
                      client_trouble=server_trouble(log)[:5], server_log_trouble=server_trouble(server_log)[:5],
                      client_trouble_lines=len(server_trouble(log)),
                      server_log_trouble_lines=len(server_trouble(server_log)))
        runs = result.get("task_runs")
        result["task_runs_total"] = sum(runs.values()) if isinstance(runs, dict) else runs
        if result.get("all_recorded_after_s") is not None and result.get("flow_run_s") and result["task_runs_total"]:
            result["task_runs_recorded_per_s"] = result["task_runs_total"] / (result["flow_run_s"]
                                                                               + result["all_recorded_after_s"])
        if rc != 0:
            result["log_tail"] = log[-2000:]
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(rows: list[dict]) -> str:
    lines = ["| server | assets | state | flow run s | describe s | upload s | server catch-up s "
             "| describe runs/s incl. catch-up | task runs | task runs recorded/s | uploads (ledger lines) "
             "| task runs not completed | trouble lines (client log / server log) | peak RSS flow | peak RSS server |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|"]
    for r in rows:
        d = r.get("stage_s", {}).get("describe", 0)
        lag = r.get("server_lag_s") or 0
        rate = r["assets"] / (d + lag) if d else 0
        uploads = sum(r.get("uploaded", {}).values()) if isinstance(r.get("uploaded"), dict) else r.get("uploaded")
        recorded = r.get("task_runs_recorded_per_s")
        lines.append(f"| {r['backend']} | {r['assets']:,} | {r.get('state', '?')} | {r.get('flow_run_s', 0):.1f} "
                     f"| {d:.1f} | {r.get('stage_s', {}).get('upload', 0):.1f} | {lag:.1f} | {rate:.0f} "
                     f"| {r.get('task_runs_total', '?')} | {f'{recorded:.0f}' if recorded else '–'} "
                     f"| {uploads} ({r.get('ledger_lines', '?')}) | {r.get('task_runs_not_completed', '?')} "
                     f"| {r.get('client_trouble_lines', 0)} / {r.get('server_log_trouble_lines', 0)} "
                     f"| {r.get('peak_rss_mb', 0):.0f} MB | {r['server_peak_rss_mb']:.0f} MB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.server_backends", description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=int, default=1000)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--uploadable", action="store_true", help="assets every agency takes: pack and upload every one")
    ap.add_argument("--tune-sqlite", action="store_true", help="give the SQLite server the same recorder settings")
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    for backend in args.backends.split(","):
        rows.append(measure(backend, args.assets, args.tune_sqlite, args.uploadable))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "log_tail"}), flush=True)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"server_backends-{backend}-{args.assets}{'-uploadable' if args.uploadable else ''}.json").write_text(
            json.dumps(rows[-1], indent=2))
        if rows[-1]["exit_code"]:
            print(rows[-1]["log_tail"])
    print(f"\n{started}, load average at the end {os.getloadavg()[0]:.2f}\n\n{report(rows)}")


if __name__ == "__main__":
    main()
