"""The cluster's Prefect server on Redis publishes each event as it arrives, and no timer publishes beside it
(tasks/orchestration/redis_publisher.py: prefect-redis's timed publish clears events it never published)."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import pytest

from harness.redis import RedisServer, find_redis_server, stop_redis
from tasks.orchestration.local_server import free_port

pytestmark = pytest.mark.skipif(find_redis_server() is None and not os.environ.get("MICROSTOCK_REQUIRE_REDIS"),
                                reason="redis-server is not installed (make redis)")


def test_each_event_is_in_the_stream_when_its_publish_returns_and_no_timer_runs(tmp_path, monkeypatch):
    if not os.environ.get("MICROSTOCK_REQUIRE_REDIS"):  # where Redis is required (CI), a missing extra fails
        pytest.importorskip("prefect_redis", reason="the redis extra is not installed")
    redis = RedisServer(tmp_path / "redis", free_port())
    pid = redis.start()
    try:
        for name, value in redis.prefect_server_env().items():  # the server's environment, as `cluster up` sets it
            monkeypatch.setenv(name, value)
        from prefect_redis.client import clear_cached_clients, get_async_redis_client
        from prefect_redis.messaging import Cache, Publisher, RedisMessagingPublisherSettings

        assert RedisMessagingPublisherSettings().publish_every > timedelta(days=365 * 30), "the timer never fires"

        async def publish(events: int) -> list[int]:
            await clear_cached_clients()  # a client for this Redis, not one another test left for its port
            client = get_async_redis_client()
            lengths = []
            # As the server's /api/events/in handler publishes a flow-run process's events (de-duplicated by id).
            async with Publisher("events", Cache(), deduplicate_by="id") as publisher:
                for n in range(events):
                    await publisher.publish_data(b"{}", {"id": f"event-{n}"})
                    lengths.append(await client.xlen("events"))
            return lengths

        assert asyncio.run(publish(100)) == list(range(1, 101)), "an event waited in the batch"
    finally:
        stop_redis(pid)
