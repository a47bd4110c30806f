"""Benchmark 4: wall time of ``microstock run`` for a 40-image batch (the seed's batch size), by stage.

    .venv/bin/python -m bench.e2e_run                              # offline describer
    .venv/bin/python -m bench.e2e_run --gemini-latency 0.25        # fake Gemini, the config's 60 RPM

Runs the real command line, ``microstock run --count 40 --workdir W``, on a
fresh workdir and the embedded default (no PREFECT_API_URL, no
PREFECT_HOME: the CLI keeps Prefect's state in ``W/.prefect`` and starts its
ephemeral server). Afterwards the flow run's record is read back from that
state, giving the wall span of each stage's task runs; what the process
spent outside the flow run is Prefect's start-up and shutdown.

With ``--gemini-latency`` a fake Gemini server on 127.0.0.1 answers after
that many seconds and the command gets ``GEMINI_API_KEY`` and
``GOOGLE_GEMINI_BASE_URL``: the describe stage then runs at the configured
quota (``requests_per_minute = 60`` by default). The fake does not draw
images, so that variant ingests the same 40 demo images, made beforehand,
with ``microstock run --source DIR`` instead of generating them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from bench.measure import OUT, prefect_env, run_child, server_trouble
from tasks.images.demo import DEMO_PROMPTS, demo_jpeg_bytes, generated_name

STAGES = ["assets", "describe", "pack", "csv", "zip", "upload"]


def child(workdir: Path, out: Path) -> None:
    """Read the run's record back (this process has PREFECT_HOME = the workdir's Prefect state)."""
    from bench.measure import latest_flow_run_id, stage_times

    times = stage_times(latest_flow_run_id("stock-batch"), described=len(list((workdir / "assets").glob("*.json"))),
                        wait_s=10)
    out.write_text(json.dumps({"flow_run_s": times.flow_s, "flow_state": times.flow_state, "stage_s": times.span_s,
                               "task_runs": times.runs, "task_runs_not_completed": times.not_completed,
                               "describe_runs_recorded_late_s": times.server_lag_s}))


def measure(count: int = 40, gemini_latency: float | None = None, timeout: float = 1800) -> dict:
    microstock = shutil.which("microstock", path=str(Path(sys.executable).parent)) or "microstock"
    fake = None
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        root = Path(tmp)
        wd = root / "work"
        env = prefect_env(root / "unused")
        env.pop("PREFECT_HOME")  # the CLI's own default: <workdir>/.prefect
        if gemini_latency is not None:
            from tests.fakes.gemini import FAKE_KEY, FakeGemini, slow

            fake = FakeGemini().start()
            fake.default = lambda req: slow(gemini_latency)
            env.update(GEMINI_API_KEY=FAKE_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        command = [microstock, "run", "--count", str(count), "--workdir", str(wd)]
        if fake is not None:
            source = root / "source"
            source.mkdir()
            for i in range(count):
                prompt = DEMO_PROMPTS[i % len(DEMO_PROMPTS)]
                (source / generated_name(prompt, 0, i)).write_bytes(demo_jpeg_bytes(prompt, 0, i))
            command = [microstock, "run", "--source", str(source), "--workdir", str(wd)]
        result_command = " ".join(["microstock"] + command[1:3] + ["…"])
        try:
            rc, wall, log = run_child(command, env, root / "run.log", timeout)
        finally:
            if fake is not None:
                fake.stop()
        result: dict = {"count": count, "command": result_command, "describer": "fake Gemini" if fake else "offline",
                        "gemini_latency_s": gemini_latency, "exit_code": rc, "process_wall_s": wall,
                        "server_trouble": server_trouble(log)[:10],
                        "gemini_requests": len(fake.requests) if fake else 0}
        if rc != 0:
            result["log_tail"] = log[-3000:]
            return result
        out = root / "record.json"
        read_env = prefect_env(wd / ".prefect")
        rc2, _, log2 = run_child([sys.executable, "-m", "bench.e2e_run", "--child", "--dir", str(wd), "--out",
                                  str(out)],
                                 read_env, root / "read.log", timeout)
        if rc2 != 0:
            result["log_tail"] = log2[-3000:]
            return result
        result.update(json.loads(out.read_text()))
    result["outside_flow_run_s"] = result["process_wall_s"] - result["flow_run_s"]
    return result


def report(r: dict) -> str:
    if "stage_s" not in r:
        return f"e2e benchmark failed (exit {r.get('exit_code')}):\n{r.get('log_tail', '')}"
    st = r["stage_s"]
    lines = [f"`{r['command']}` ({r['count']} images), {r['describer']} describer"
             + (f" ({1000 * r['gemini_latency_s']:.0f} ms per call, {r['gemini_requests']} requests)"
                if r["gemini_latency_s"] else ""),
             "",
             "| process | Prefect start-up + shutdown | flow run | " + " | ".join(STAGES)
             + " | between stages | task runs | not recorded as finished | server errors |",
             "|---:|---:|---:|" + "---:|" * len(STAGES) + "---:|---:|---:|---:|",
             f"| {r['process_wall_s']:.1f} s | {r['outside_flow_run_s']:.1f} s | {r['flow_run_s']:.1f} s | "
             + " | ".join(f"{st[s]:.1f} s" if s in st else "–" for s in STAGES)
             + f" | {r['flow_run_s'] - sum(st.values()):.1f} s | {sum(r['task_runs'].values())} | "
             f"{r['task_runs_not_completed']} | {len(r['server_trouble'])} |"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.e2e_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--gemini-latency", type=float, default=None, help="use a fake Gemini answering after this many s")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.dir, args.out)
        return {}
    print(f"e2e: microstock run --count {args.count} …", flush=True)
    r = measure(args.count, args.gemini_latency)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "e2e_run.json").write_text(json.dumps(r, indent=2))
    print(report(r))
    return r


if __name__ == "__main__":
    main()
