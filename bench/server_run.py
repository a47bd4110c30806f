"""Issue 27: ``microstock run --count 12`` side by side with a bare Prefect flow of as many task runs.

    .venv/bin/python -m bench.server_run            # both pairs, median of 3 each
    .venv/bin/python -m bench.server_run --rounds 1
    .venv/bin/python -m bench.server_run --rounds 5 --warm-only   # the second+ run only, median of 5
    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python -m bench.server_run --rounds 5 --warm-only --before /tmp/before   # and that tree's, interleaved

Two paired comparisons, whole processes, run one after the other in each round:

* **warm**: the workdir's server already runs (started once before the
  rounds, its home shared by every workdir of the benchmark). A fresh workdir
  runs ``microstock run --count 12`` (which finds the server through the
  record, as a contributor's second command does) against the bare flow
  with ``PREFECT_API_URL`` set to the same server.
* **cold**: the first command on a fresh machine. ``microstock run --count 12``
  in a fresh workdir with no Prefect home (it starts the workdir's server)
  against the bare flow in a fresh ``PREFECT_HOME`` on Prefect's ephemeral
  server (the one a plain ``python flow.py`` gets). The server the command left
  running is stopped after each round, outside the timing.

The bare flow has :data:`TASK_RUNS` trivial tasks: the task runs of a
``--count 12`` run (12 describe runs, 5 stage runs, 3 agencies' upload runs
less the one stage run they are counted with: 19 in all, read back from the
server). Wall and CPU are the child's (CPU: ``RUSAGE_CHILDREN``; the detached
server's CPU is not in it). The load average is recorded with every round.

Both run as after an ordinary install: Python caches the byte code of the
project's modules (``PYTHONDONTWRITEBYTECODE`` unset, the cache in the
benchmark's temp folder; Prefect's own is cached by pip), and the warm rounds
follow one untimed ``microstock run`` that fills that cache, as a
contributor's earlier runs did.

``--before TREE`` adds a third comparison, interleaved with the warm one
round by round on the same server: the same pair with the project's modules
taken from ``TREE`` (an unpacked older commit, first on ``PYTHONPATH``), so
a change is measured before and after under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import OUT, machine, prefect_env

#: Task runs of ``microstock run --count 12`` with the three shipped agencies (read back from its record).
TASK_RUNS = 19
BARE_FLOW = f"""
from prefect import flow, task

@task
def work(i):
    return i

@flow
def bare(n={TASK_RUNS}):
    return [work(i) for i in range(n)]

bare()
"""


def timed(args: list[str], env: dict[str, str], log: Path, timeout: float = 900) -> dict:
    """Run a child; its exit code, wall and CPU seconds, and the load average just before."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        rc = subprocess.run(args, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = {"rc": rc, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load": round(load, 2)}
    if rc:
        result["log_tail"] = log.read_text(errors="replace")[-2000:]
    return result


def _microstock() -> str:
    return shutil.which("microstock", path=str(Path(sys.executable).parent)) or "microstock"


def _env(root: Path, home: Path | None, tree: Path | None = None) -> dict[str, str]:
    env = prefect_env(root / "unused")
    if tree is not None:  # the project's modules from that tree, not from this checkout
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PREFECT_HOME")
    env.pop("MICROSTOCK_PREFECT_SERVER", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    return env


def warm_round(root: Path, home: Path, i: int, tree: Path | None = None) -> dict:
    """One pair on the running server; odd rounds run the bare flow first (neither always follows the other).
    ``tree``: the project's modules from there (``--before``)."""
    from tasks.orchestration.workdir_server import client_env, read_record

    env = _env(root, home, tree)
    kind = "warm" if tree is None else "before"
    pair = {"microstock": lambda: timed([_microstock(), "run", "--count", "12", "--workdir", str(root / f"{kind}-{i}")],
                                        env, root / f"{kind}-ms-{i}.log"),
            "bare": lambda: timed([sys.executable, "-c", BARE_FLOW],
                                  dict(env, **client_env(home, read_record(home))), root / f"{kind}-bare-{i}.log")}
    order = ["microstock", "bare"] if i % 2 == 0 else ["bare", "microstock"]
    return {who: pair[who]() for who in order}


def cold_round(root: Path, i: int) -> dict:
    from tasks.orchestration.workdir_server import stop

    wd = root / f"cold-{i}"
    try:
        ms = timed([_microstock(), "run", "--count", "12", "--workdir", str(wd)], _env(root, None),
                   root / f"cold-ms-{i}.log")
    finally:
        stop(wd / ".prefect")
    bare = timed([sys.executable, "-c", BARE_FLOW], _env(root, root / f"cold-bare-home-{i}"),
                 root / f"cold-bare-{i}.log")
    return {"microstock": ms, "bare": bare}


def _median(rounds: list[dict], who: str, key: str) -> float:
    return statistics.median(r[who][key] for r in rounds)


def measure(rounds: int = 3, cold: bool = True, before: Path | None = None) -> dict:
    from tasks.orchestration.workdir_server import stop

    result: dict = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "task_runs": TASK_RUNS, "warm": [], "before": [], "cold": [],
                    "before_tree": str(before or "")}
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        root = Path(tmp)
        home = root / "home"
        try:  # started by a command, as a contributor's first one does (its CPU is no child's of this process)
            subprocess.run([_microstock(), "server", "start"], env=_env(root, home), check=True,
                           stdout=subprocess.DEVNULL, timeout=300)
            for tree in [None, before] if before else [None]:
                warm_up = root / f"warm-up-{'before' if tree else 'this'}"
                subprocess.run([_microstock(), "run", "--count", "12", "--workdir", str(warm_up)],
                               env=_env(root, home, tree), check=True, stdout=subprocess.DEVNULL, timeout=900)
            for i in range(rounds):
                trees = [None, before] if i % 2 == 0 else [before, None]
                for tree in trees if before else [None]:
                    result["warm" if tree is None else "before"].append(warm_round(root, home, i, tree))
        finally:
            stop(home)
        for i in range(rounds if cold else 0):
            result["cold"].append(cold_round(root, i))
    for kind in _kinds(result):
        rs = result[kind]
        result[f"{kind}_median"] = {who: {k: _median(rs, who, k) for k in ("wall_s", "cpu_s")}
                                    for who in ("microstock", "bare")}
        m = result[f"{kind}_median"]
        m["ratio"] = round(m["microstock"]["wall_s"] / m["bare"]["wall_s"], 2)
        m["cpu_ratio"] = round(m["microstock"]["cpu_s"] / m["bare"]["cpu_s"], 2)
    return result


def _kinds(r: dict) -> list[str]:
    """The comparisons ``r`` has rounds of (``cold`` is left out by ``--warm-only``)."""
    return [kind for kind in ("warm", "before", "cold") if r[kind]]


def report(r: dict) -> str:
    lines = [f"{r['machine']}; {r['date']}; bare flow: {r['task_runs']} trivial tasks", "",
             "| comparison | microstock run --count 12 wall (CPU) | bare flow wall (CPU) | ratio (CPU) "
             "| load per round |",
             "|---|---:|---:|---:|---|"]
    names = {"warm": "second+ run, the workdir's server running",
             "before": f"the same, modules of {r['before_tree']} (interleaved)", "cold": "first run, fresh machine"}
    for kind in _kinds(r):
        m = r[f"{kind}_median"]
        loads = ", ".join(f"{x['microstock']['load']:.1f}" for x in r[kind])
        lines.append(f"| {names[kind]} | {m['microstock']['wall_s']:.1f} s ({m['microstock']['cpu_s']:.1f} s) | "
                     f"{m['bare']['wall_s']:.1f} s ({m['bare']['cpu_s']:.1f} s) | {m['ratio']:.2f}× "
                     f"({m['cpu_ratio']:.2f}×) | {loads} |")
    failed = [x for kind in _kinds(r) for x in r[kind] for who in x.values() if who["rc"]]
    if failed:
        lines.append(f"\n{len(failed)} run(s) failed: {failed[0].get('log_tail', '')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.server_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm-only", action="store_true", help="only the second+ run on the running server")
    ap.add_argument("--before", type=Path, help="an unpacked older tree of the project, measured interleaved")
    args = ap.parse_args(argv)
    r = measure(args.rounds, cold=not args.warm_only, before=args.before)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "server_run.json").write_text(json.dumps(r, indent=2))
    print(report(r))
    return r


if __name__ == "__main__":
    main()
