"""prefect-redis's event publisher on a real Redis: how many events never reach the stream, by its settings.

    .venv/bin/python -m bench.redis_publisher          # 3 rounds × 2,000 events, 0.5 ms apart and back to back
    .venv/bin/python -m bench.redis_publisher --events 500 --rounds 1 --gaps 0

One ``redis-server`` (harness/redis.py, as ``cluster up --redis`` starts it)
and, in this process, prefect-redis's ``Publisher`` used as the Prefect
server's ``/api/events/in`` handler uses it (one publisher for a flow-run
process's websocket, de-duplicated by event id): ``--events`` events handed
over one by one, each of ``--gaps`` seconds apart (0: only yielding to the
loop between them), then the publisher closed and the
stream's length read. Three settings:

- ``default, timer 10 ms``: prefect-redis's batch of 5 with its timed
  publish every 10 ms instead of 10 s — the same race as on the cluster,
  1,000 times as often, so a small run shows it;
- ``batch 1, timer 10 ms``: a batch of one alone;
- ``cluster``: :data:`tasks.orchestration.redis_publisher.REDIS_PUBLISHER_SETTINGS`.

Figures go to stdout and ``bench/out/redis_publisher.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench.measure import OUT
from harness.redis import RedisServer, stop_redis
from tasks.orchestration.local_server import free_port
from tasks.orchestration.redis_publisher import REDIS_PUBLISHER_SETTINGS

SETTINGS = {
    "default, timer 10 ms": {"batch_size": 5, "publish_every": timedelta(milliseconds=10)},
    "batch 1, timer 10 ms": {"batch_size": 1, "publish_every": timedelta(milliseconds=10)},
    "cluster": {},  # from the environment: REDIS_PUBLISHER_SETTINGS
}


async def lost_events(topic: str, events: int, gap: float, settings: dict) -> int:
    from prefect_redis.client import clear_cached_clients, get_async_redis_client
    from prefect_redis.messaging import Cache, Publisher

    await clear_cached_clients()
    async with Publisher(topic, Cache(), deduplicate_by="id", **settings) as publisher:
        for n in range(events):
            await publisher.publish_data(b"{}", {"id": f"{topic}-{n}"})
            await asyncio.sleep(gap)
    return events - await get_async_redis_client().xlen(topic)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.redis_publisher", description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--gaps", type=float, nargs="+", default=[0.0005, 0.0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    redis = RedisServer(Path(tempfile.mkdtemp(prefix="bench-redis-")), free_port())
    pid = redis.start()
    saved = dict(os.environ)
    result: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "events": args.events,
                    "gaps_s": args.gaps, "load_1min_start": os.getloadavg()[0], "lost": {}}
    try:
        os.environ.update(redis.prefect_server_env())  # includes REDIS_PUBLISHER_SETTINGS
        assert all(os.environ[k] == v for k, v in REDIS_PUBLISHER_SETTINGS.items())
        for gap in args.gaps:
            for name, settings in SETTINGS.items():
                key = f"{name}, gap {gap * 1000:g} ms"
                result["lost"][key] = [asyncio.run(lost_events(f"events-{key}-{r}".replace(" ", ""), args.events,
                                                               gap, settings))
                                       for r in range(args.rounds)]
                print(f"{key}: lost {result['lost'][key]} of {args.events} each round", flush=True)
    finally:
        stop_redis(pid)
        shutil.rmtree(redis.home, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)
    result["load_1min_end"] = os.getloadavg()[0]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "redis_publisher.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
