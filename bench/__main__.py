"""``make bench`` = ``python -m bench``: the four throughput benchmarks of issue 8, one after another.

1. the describe stage against the quota, and the seed's sequential loop (``bench.quota``);
2. per-asset orchestration overhead for 100, 1,000 and 5,000 assets, and
3. peak RSS for the same sizes (both from ``bench.scale``: one flow run per size);
4. ``microstock run`` for a 40-image batch, by stage (``bench.e2e_run``).

Each runs in fresh processes on the embedded default Prefect server. The
figures are printed as markdown and recorded with the machine, the date and
the load average in ``bench/out/issue8.json`` (the numbers that go into
``docs/BENCHMARKS.md``). ``--quick`` runs smaller sizes (100 and 1,000
assets) for a check that everything works.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from bench import e2e_run, quota, scale
from bench.measure import OUT, machine


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="scale benchmark at 100 and 1,000 assets only")
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"machine: {machine()}\nstarted: {started}, load average {os.getloadavg()[0]:.2f}\n", flush=True)

    results: dict = {"machine": machine(), "date": started, "command": "make bench  (python -m bench)",
                     "load_average_at_start": os.getloadavg()}

    results["quota"] = q = quota.measure()
    print("\n## 1. Describe stage vs the quota\n\n" + quota.report(q) + "\n", flush=True)

    sizes = [100, 1000] if args.quick else list(scale.SIZES)
    results["scale"] = s = []
    for n in sizes:
        print(f"scale: {n:,} assets …", flush=True)
        s.append(scale.measure(n))
    print("\n## 2–3. Orchestration overhead and peak RSS by batch size\n\n" + scale.report(s) + "\n", flush=True)

    results["e2e_run"] = e = e2e_run.measure()
    print("\n## 4. microstock run, 40 images, by stage\n\n" + e2e_run.report(e) + "\n", flush=True)

    results["load_average_at_end"] = os.getloadavg()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "issue8.json").write_text(json.dumps(results, indent=2))
    print(f"recorded in {OUT / 'issue8.json'}")


if __name__ == "__main__":
    main()
