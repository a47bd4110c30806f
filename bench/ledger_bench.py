"""The ledger at a million lines: how long ``pending`` and ``status`` take, cold and warm, and their memory.

``python -m bench.ledger_bench [--lines 1000000] [--assets 2000] [--appends 1000]``

Builds, in a temp folder, a workdir with ``--assets`` described and packed
assets (half of them already recorded) and a ledger of ``--lines`` lines over
the three agencies. Then measures, each in a fresh process and best of 3:

- ``Ledger.read()`` (wall and CPU time, peak RSS);
- ``ledger_overview()`` — what ``ledger pending`` and ``ledger status``
  compute: the ledger read plus the workdir's described + packed assets;
- the commands themselves, ``microstock ledger status`` / ``ledger pending``,
  from start to exit (interpreter and imports included; CPU time of the
  process too, as the machine may be shared);

in three states of the digest index (``.uploads.ledger.index``):

- **cold** — no index: the ledger is read in full and the index written
  (deleted again before each of the 3 runs);
- **warm** — the index covers the whole ledger;
- **warm + appends** — ``--appends`` lines appended after the index was
  written (fewer than the 20,000 that make a read rewrite it).

The commands run as after an ordinary install: Python caches the byte code
of the project's modules (``PYTHONDONTWRITEBYTECODE`` unset, the cache in a
temp folder), and once with ``PYTHONDONTWRITEBYTECODE=1`` for comparison.
Prints markdown for docs/BENCHMARKS.md and writes ``bench/out/ledger.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parent.parent
AGENCIES = ("adobe", "vecteezy", "dreamstime")
STATES = ("cold", "warm", "appended")


def build(root: Path, lines: int, assets: int) -> Path:
    """A workdir with ``assets`` described + packed assets and a ``lines``-line ledger; returns its root."""
    from tasks.core.records import Asset, Metadata, write_sidecar
    from tasks.core.workdir import Workdir
    from tasks.stores.ledger_lines import HEADER

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
    # what the last run records as it ends (the ledger commands answer from it): every asset accepted everywhere
    from tasks.core.reports import AgencyCsv, CsvReport, PackReport
    from tasks.stages.pack import finish_batch

    names = sorted(p.name for p in ready.iterdir())
    packed = PackReport(ready={n: ready / n for n in names},
                        asset_ids={n: hashlib.sha256((wd.assets / n).read_bytes()).hexdigest() for n in names})
    finish_batch(wd, packed, CsvReport(agencies={a: AgencyCsv(agency=a, display_name=a, accepted=names)
                                                 for a in AGENCIES}))
    with open(wd.ledger, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        for i in range(lines - len(recorded) * len(AGENCIES)):
            fh.write(_old_line(i))
        for name, sha in recorded:
            for agency in AGENCIES:
                fh.write(f"2026-01-02T00:00:00Z\t{agency}\t{name}\t{sha}\tsftp://me@host:22/{name}\n")
    return wd.root


def _old_line(i: int) -> str:
    sha = hashlib.sha256(str(i).encode()).hexdigest()
    return f"2026-01-01T00:00:00Z\t{AGENCIES[i % 3]}\told_{i:07d}.jpg\t{sha}\tsftp://me@host:22/old_{i:07d}.jpg\n"


def append(workdir: Path, count: int) -> None:
    """``count`` more lines, as ``Ledger.record`` writes them (in one write: the bench is not about fsync)."""
    with open(workdir / "uploads.ledger", "a", encoding="utf-8") as fh:
        fh.write("".join(_old_line(10**8 + i) for i in range(count)))


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
what, cold = sys.argv[2], sys.argv[3] == "cold"
from tasks.stores.ledger import Ledger
from tasks.stores.ledger_index import index_path
from tasks.stores.pending import ledger_overview
from tasks.core.workdir import Workdir
wd = Workdir(Path(sys.argv[1]))
rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
best = None
for _ in range(3):
    if cold:
        index_path(wd.ledger).unlink(missing_ok=True)
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


def measure(workdir: Path, what: str, state: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(workdir), what, state], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout)


def command_time(args: list[str], env: dict[str, str], before=None) -> dict:
    """Best of 3 by wall time: wall and CPU seconds from start to exit."""
    best = None
    for _ in range(3):
        if before:
            before()
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        took = {"wall_s": wall, "cpu_s": after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime}
        best = took if best is None or took["wall_s"] < best["wall_s"] else best
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ledger_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--assets", type=int, default=2_000)
    ap.add_argument("--appends", type=int, default=1_000)
    args = ap.parse_args(argv)
    from bench.measure import machine
    from tasks.stores.ledger_index import index_path

    results: dict[str, dict] = {state: {} for state in STATES}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        wd = build(Path(tmp), args.lines, args.assets)
        size_mb = (wd / "uploads.ledger").stat().st_size / 2**20
        env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_HOME": str(Path(tmp) / "prefect"),
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        no_cache = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
        cli = str(Path(sys.executable).with_name("microstock"))
        status = [cli, "ledger", "status", "--workdir", str(wd)]
        pending = [cli, "ledger", "pending", "--workdir", str(wd)]
        subprocess.run(status, check=True, capture_output=True, env=env, cwd=ROOT)  # fills the byte-code cache

        def drop() -> None:
            index_path(wd / "uploads.ledger").unlink(missing_ok=True)

        for state in STATES:
            if state == "appended":
                append(wd, args.appends)
            r = results[state]
            r["read"] = measure(wd, "read", state)
            r["overview"] = measure(wd, "overview", state)
            r["status"] = command_time(status, env, drop if state == "cold" else None)
            r["pending"] = command_time(pending, env, drop if state == "cold" else None)
            r["status_no_bytecode_cache"] = command_time(status, no_cache, drop if state == "cold" else None)
        index_mb = index_path(wd / "uploads.ledger").stat().st_size / 2**20
        imports = command_time([sys.executable, "-c", "import flows.cli, tasks.core.settings, tasks.stores.pending"],
                               env)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "load_avg_1m": os.getloadavg()[0], "lines": args.lines, "assets": args.assets, "appends": args.appends,
        "ledger_mb": round(size_mb, 1), "index_mb": round(index_mb, 1), "imports": imports, **results,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "ledger.json").write_text(json.dumps(result, indent=2))
    print(f"{args.lines:,}-line ledger ({size_mb:.0f} MB; index {index_mb:.0f} MB), {args.assets:,} described + "
          f"packed assets (half recorded); {result['machine']}; load {result['load_avg_1m']:.2f}\n")
    print(f"| wall (CPU) | cold: no index | warm: index current | warm + {args.appends:,} appended lines |")
    print("|---|---|---|---|")

    def cells(key: str) -> str:
        return " | ".join(f"{results[s][key]['wall_s']:.2f} s ({results[s][key]['cpu_s']:.2f} s)" for s in STATES)

    print(f"| `Ledger.read()` | {cells('read')} |")
    print(f"| `ledger_overview()` (pending + status) | {cells('overview')} |")
    print(f"| `microstock ledger status`, whole command | {cells('status')} |")
    print(f"| `microstock ledger pending`, whole command | {cells('pending')} |")
    print(f"| `ledger status` with `PYTHONDONTWRITEBYTECODE=1` | {cells('status_no_bytecode_cache')} |")
    rss = " | ".join(f"{results[s]['read']['peak_rss_mb']:.0f} MB" for s in STATES)
    print(f"| peak RSS of `Ledger.read()` (after imports: {results['warm']['read']['rss_after_imports_mb']:.0f} MB) "
          f"| {rss} |")
    print("\nPython start + imports (`flows.cli`, `tasks.core.settings`, `tasks.stores.pending`): "
          f"{imports['wall_s']:.2f} s "
          f"({imports['cpu_s']:.2f} s CPU)")


if __name__ == "__main__":
    main()
