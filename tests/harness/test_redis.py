"""Debian's redis-server as `microstock cluster up --redis` starts it: loopback, a password that is on no command
line, the settings Prefect's server reads to put its messaging on it, and a stop that never signals another
program's pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.redis import RedisServer, find_redis_server, stop_redis
from tasks.orchestration.local_server import free_port, port_in_use

pytestmark = pytest.mark.skipif(find_redis_server() is None and not os.environ.get("MICROSTOCK_REQUIRE_REDIS"),
                                reason="redis-server is not installed (make redis)")


def test_redis_starts_with_a_password_off_the_command_line_and_stops(tmp_path):
    redis = RedisServer(tmp_path / "redis", free_port())
    pid = redis.start()
    try:
        assert redis.ping()
        assert not RedisServer(tmp_path / "other", redis.port, password="wrong").ping(), "a password is required"
        assert redis.password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert oct((tmp_path / "redis" / "redis.conf").stat().st_mode & 0o777) == "0o600"
        env = redis.prefect_server_env()
        assert env["PREFECT_MESSAGING_BROKER"] == env["PREFECT_MESSAGING_CACHE"] == "prefect_redis.messaging"
        assert (env["PREFECT_REDIS_MESSAGING_HOST"], env["PREFECT_REDIS_MESSAGING_PORT"]) == ("127.0.0.1",
                                                                                              str(redis.port))
        stop_redis(os.getpid())  # not a redis-server: left alone (this test still runs)
    finally:
        stop_redis(pid)
    assert not port_in_use(redis.port)
