"""Issue 27: the seed's machine — the 40-image batch on one CPU and 2 GB.

    .venv/bin/python -m bench.small_machine            # microstock run --count 40, fresh workdir
    .venv/bin/python -m bench.small_machine --count 12

``microstock run --count 40`` in a fresh workdir (the first command on a
fresh machine: it starts the workdir's server, which inherits both limits)
under ``taskset -c 0`` and a memory limit of 2 GB. The limit is a cgroup
(v1 memory controller: ``memory.limit_in_bytes``) made inside this
process's own cgroup, so it nests under whatever limits the machine
already has; systemd-run needs systemd as init, which this machine may not
have. Reported: exit code, wall time, the cgroup's peak memory
(``memory.max_usage_in_bytes``: every process of the batch together, the
server included, page cache included) and the peak of the summed RSS of
the command and every process under it, sampled every 0.2 s, and whether
the limit was hit (``memory.failcnt``). The server is stopped afterwards.
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
from pathlib import Path

from bench.measure import OUT, machine, prefect_env

LIMIT = 2 * 2**30


def own_memory_cgroup() -> Path:
    """This process's cgroup of the v1 memory controller; OSError when there is none."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    raise OSError("no v1 memory cgroup")


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def measure(count: int = 40, timeout: float = 1800) -> dict:
    from tasks.orchestration.workdir_server import stop

    group = own_memory_cgroup() / f"microstock-small-{os.getpid()}"
    group.mkdir()
    result: dict = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "count": count, "cpus": "taskset -c 0", "limit": "2 GB (cgroup v1 memory.limit_in_bytes)",
                    "load_before": os.getloadavg()[0]}
    try:
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
        with tempfile.TemporaryDirectory(prefix="bench-small-") as tmp:
            wd = Path(tmp) / "work"
            env = prefect_env(Path(tmp) / "unused")
            env.pop("PREFECT_HOME")
            env.pop("MICROSTOCK_PREFECT_SERVER", None)  # the default: the workdir's own server
            microstock = shutil.which("microstock", path=str(Path(sys.executable).parent)) or "microstock"
            peak = [0.0]
            t0 = time.perf_counter()
            with open(Path(tmp) / "run.log", "wb") as log:
                proc = subprocess.Popen(["taskset", "-c", "0", microstock, "run", "--count", str(count),
                                         "--workdir", str(wd)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                        preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
                done = threading.Event()

                def sample() -> None:
                    while not done.wait(0.2):
                        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
                        peak[0] = max(peak[0], _rss_mb(pids))

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                rc = proc.wait(timeout)
                wall = time.perf_counter() - t0
                done.set()
                sampler.join()
            result.update(exit_code=rc, wall_s=round(wall, 1), peak_rss_sum_mb=round(peak[0]),
                          cgroup_peak_mb=round(int((group / "memory.max_usage_in_bytes").read_text()) / 2**20),
                          limit_hit=int((group / "memory.failcnt").read_text()),
                          summary_tail=(Path(tmp) / "run.log").read_text(errors="replace")[-1500:])
            stop(wd / ".prefect")
    finally:
        for _ in range(50):  # the stopped server's processes leave the group, then it can go
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.2)
    result["load_after"] = os.getloadavg()[0]
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.small_machine", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=40)
    args = ap.parse_args(argv)
    r = measure(args.count)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "small_machine.json").write_text(json.dumps(r, indent=2))
    print(json.dumps({k: v for k, v in r.items() if k != "summary_tail"}, indent=2))
    print(r.get("summary_tail", "")[-600:])
    return r


if __name__ == "__main__":
    main()
