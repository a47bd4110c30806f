"""One process describing through the server's shared quota, for test_shared_quota (run as a module).

    python -m tests.orchestration.quota_caller WORKDIR SECONDS RPM CONCURRENCY PROJECT

With ``PREFECT_API_URL``, ``GEMINI_API_KEY`` and ``GOOGLE_GEMINI_BASE_URL`` in
its environment (the test Gemini server), it makes a ``DescribeRun`` as the
describe stage does in a flow run (with the Prefect side's shared quota), with ``[gemini] quota_project`` set, and keeps
``CONCURRENCY`` threads describing the workdir's assets, round and round,
for ``SECONDS``. It prints one JSON line: the limiter's class and name, and
how many describe calls returned.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from itertools import cycle
from pathlib import Path

from tasks.core.records import list_assets
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.orchestration.describe_runs import IN_PREFECT
from tasks.stages.describe_job import DescribeRun
from tasks.stages.run_context import RunContext
from tests.fakes.dead_letter_memory import MemoryDeadLetterStore


def main(root: str, seconds: float, rpm: int, concurrency: int, project: str) -> dict:
    wd = Workdir(Path(root))
    settings = Settings(gemini=GeminiSettings(requests_per_minute=rpm, concurrency=concurrency, requests_per_day=0,
                                              quota_project=project, timeout_s=30))
    run = DescribeRun.start(RunContext(wd, settings, given_store=MemoryDeadLetterStore()), quota=IN_PREFECT.quota)
    assets = cycle(list_assets(wd.assets))
    lock = threading.Lock()
    done = [0]
    deadline = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            with lock:
                asset = next(assets)
            run.gate.describe(asset)
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=loop) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limiter = run.gate.limiter
    return {"limiter": type(limiter).__name__, "name": getattr(limiter, "name", None), "described": done[0]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))
