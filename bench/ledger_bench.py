"""The ledger at a million lines: how long ``pending`` and ``status`` take, and the memory they need.

``python -m bench.ledger_bench [--lines 1000000] [--assets 2000]``

Builds, in a temp folder, a workdir with ``--assets`` described and packed
assets (half of them already recorded) and a ledger of ``--lines`` lines over
the three agencies. Then, each in a fresh process:

- ``Ledger.read()`` — parse the whole file (best of 3, wall and CPU time, peak RSS);
- ``ledger_overview()`` — what ``ledger pending`` and ``ledger status`` compute:
  the ledger read plus the workdir's described + packed assets;
- the commands themselves, ``microstock ledger status`` / ``ledger pending``,
  wall time from start to exit (interpreter and imports included), and the
  bare import of the modules they load, for comparison.

Prints markdown for docs/BENCHMARKS.md and writes ``bench/out/ledger.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parent.parent
AGENCIES = ("adobe", "vecteezy", "dreamstime")


def build(root: Path, lines: int, assets: int) -> Path:
    """A workdir with ``assets`` described + packed assets and a ``lines``-line ledger; returns its root."""
    from tasks.assets import Asset
    from tasks.ledger import HEADER
    from tasks.metadata import Metadata, write_sidecar
    from tasks.workdir import Workdir

    wd = Workdir(root / "work").prepare()
    ready = wd.packs / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    recorded = []
    for i in range(assets):
        path = wd.assets / f"asset_{i:05d}.jpg"
        path.write_bytes(i.to_bytes(4, "big") * 64)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        write_sidecar(wd.sidecar(path.name), Asset(name=path.name, asset_id=sha, path=path),
                      Metadata(title=f"asset {i}", description="bench", keywords=["bench"]))
        (ready / path.name).write_bytes(b"packed")
        if i % 2 == 0:
            recorded.append((path.name, sha))
    with open(wd.ledger, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        for i in range(lines - len(recorded) * len(AGENCIES)):
            agency = AGENCIES[i % 3]
            sha = hashlib.sha256(str(i).encode()).hexdigest()
            fh.write(f"2026-01-01T00:00:00Z\t{agency}\told_{i:07d}.jpg\t{sha}\tsftp://me@host:22/old_{i:07d}.jpg\n")
        for name, sha in recorded:
            for agency in AGENCIES:
                fh.write(f"2026-01-02T00:00:00Z\t{agency}\t{name}\t{sha}\tsftp://me@host:22/{name}\n")
    return wd.root


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
what = sys.argv[2]
if what == "read":
    from tasks.ledger import Ledger
else:
    from tasks.pending import ledger_overview
from tasks.workdir import Workdir
wd = Workdir(Path(sys.argv[1]))
rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
best = None
for _ in range(3):
    wall, cpu = time.perf_counter(), time.process_time()
    if what == "read":
        state = Ledger(wd.ledger).read()
        count = sum(len(s) for s in state.done.values())
    else:
        rows, state = ledger_overview(wd, ["adobe", "vecteezy", "dreamstime"])
        count = sum(len(r.pending) for r in rows)
    took = (time.perf_counter() - wall, time.process_time() - cpu)
    best = took if best is None or took[0] < best[0] else best
    del state
print(json.dumps({"wall_s": best[0], "cpu_s": best[1], "count": count, "rss_after_imports_mb": rss_imports,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(workdir: Path, what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(workdir), what], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout)


def command_time(args: list[str], env: dict[str, str]) -> float:
    """Best of 3, wall seconds from start to exit."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, env=env, cwd=ROOT)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ledger_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--assets", type=int, default=2_000)
    args = ap.parse_args(argv)
    from bench.measure import machine

    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        wd = build(Path(tmp), args.lines, args.assets)
        size_mb = (wd / "uploads.ledger").stat().st_size / 2**20
        read = measure(wd, "read")
        overview = measure(wd, "overview")
        env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_HOME": str(Path(tmp) / "prefect")}
        cli = str(Path(sys.executable).with_name("microstock"))
        status = command_time([cli, "ledger", "status", "--workdir", str(wd)], env)
        pending = command_time([cli, "ledger", "pending", "--workdir", str(wd)], env)
        imports = command_time([sys.executable, "-c", "import flows.cli, tasks.upload"], env)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "load_avg_1m": os.getloadavg()[0], "lines": args.lines, "assets": args.assets,
        "ledger_mb": round(size_mb, 1), "read": read, "overview": overview,
        "cli_status_s": status, "cli_pending_s": pending, "import_s": imports,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "ledger.json").write_text(json.dumps(result, indent=2))
    print(f"{args.lines:,}-line ledger ({size_mb:.0f} MB), {args.assets:,} described + packed assets "
          f"(half recorded); {result['machine']}; load {result['load_avg_1m']:.2f}\n")
    print("| what | wall | CPU | peak RSS (after imports) |\n|---|---|---|---|")
    for label, m in (("`Ledger.read()`", read), ("`ledger_overview()` (pending + status)", overview)):
        print(f"| {label} | {m['wall_s']:.2f} s | {m['cpu_s']:.2f} s | {m['peak_rss_mb']:.0f} MB "
              f"({m['rss_after_imports_mb']:.0f} MB) |")
    print(f"| `microstock ledger status` (whole command) | {status:.2f} s | | |")
    print(f"| `microstock ledger pending` (whole command) | {pending:.2f} s | | |")
    print(f"| of which: Python start + imports | {imports:.2f} s | | |")


if __name__ == "__main__":
    main()
