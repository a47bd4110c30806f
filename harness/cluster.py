"""``microstock cluster up|down``: PostgreSQL, a Prefect server on it, two process workers, two demo accounts.

A cluster on one machine, for trying the many-accounts setup and for its
tests; a real deployment runs the same pieces on several machines
(docs/OPERATIONS.md, "Running many accounts"). Everything lives in one
folder, ``home``:

- ``cluster.json`` — ports, process ids and where PostgreSQL's data is;
- ``cluster.env`` and ``pgpass`` (mode 0600) — what a CLI or a worker needs to
  join: ``PREFECT_API_URL``, ``PREFECT_API_AUTH_STRING``,
  ``MICROSTOCK_DEAD_LETTER_URL`` (no password) and ``PGPASSFILE``; the
  generated database password is only in ``pgpass``, the generated auth
  string only in ``cluster.env``; neither is printed or logged;
- ``server.log``, ``worker-<n>.log``, ``accounts.toml`` and ``accounts/<name>/``
  (the demo accounts' workdirs).

The server listens on 127.0.0.1 unless ``host`` says otherwise, and always
requires the auth string (``PREFECT_SERVER_API_AUTH_STRING``): other users
of the machine reach loopback too. As root, PostgreSQL's data is in a folder
under /tmp that the ``postgres`` user can enter (it refuses to run as root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.postgres import Postgres, generate_password
from harness.redis import RedisServer, stop_redis
from tasks.core.errors import ConfigError
from tasks.orchestration.environment import SERVER_BATCHING
from tasks.orchestration.local_server import HOST, free_port, healthy, new_auth_string

POOL = "microstock"
DEMO_ACCOUNTS = ("demo-a", "demo-b")


@dataclass
class ClusterState:
    """What ``cluster.json`` records: enough for ``down`` to stop everything ``up`` started."""

    pg_home: str
    pg_port: int
    api_port: int
    host: str
    pids: dict[str, int] = field(default_factory=dict)
    redis_port: int | None = None  # Prefect's messaging through Redis (``up(redis=True)``), else in memory


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of ``cluster.env``."""
    pairs = (line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


class Cluster:
    """The cluster whose files are in ``home``."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home).resolve()

    @property
    def state_path(self) -> Path:
        return self.home / "cluster.json"

    @property
    def env_path(self) -> Path:
        return self.home / "cluster.env"

    @property
    def accounts_path(self) -> Path:
        return self.home / "accounts.toml"

    def state(self) -> ClusterState | None:
        try:
            return ClusterState(**json.loads(self.state_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None

    def client_env(self) -> dict[str, str]:
        """The environment that joins this cluster (for the CLI, workers and ``prefect`` commands)."""
        return read_env_file(self.env_path)

    # --- up ---------------------------------------------------------------------------

    def up(self, *, host: str = HOST, workers: int = 2, redis: bool = False, say=print) -> None:
        """Start PostgreSQL, the server, ``workers`` process workers, and deploy the demo accounts; with
        ``redis``, a Redis server too, which carries the Prefect server's messaging (no fixed in-memory queue
        that drops events: :mod:`harness.redis`).

        ConfigError when a cluster is already up in ``home`` or a piece does not start (whatever
        started is stopped again).
        """
        if self.state() is not None:
            raise ConfigError(f"a cluster is already up in {self.home}: `microstock cluster down` first")
        if redis:
            import importlib.util

            if importlib.util.find_spec("prefect_redis") is None:
                raise ConfigError("--redis needs prefect-redis: pip install 'prefect-microstock[redis]'")
        self.home.mkdir(parents=True, exist_ok=True)
        pg_home = Path(tempfile.mkdtemp(prefix="microstock-cluster-pg-")) if os.geteuid() == 0 else self.home / "pg"
        state = ClusterState(pg_home=str(pg_home), pg_port=free_port(), api_port=free_port(), host=host,
                             redis_port=free_port() if redis else None)
        self._save(state)
        try:
            self._start(state, workers, say)
        except BaseException:  # stop what started; keep the logs for the reason
            self._stop_all(self.state() or state, say=lambda line: None)
            self.state_path.unlink(missing_ok=True)
            raise

    def _save(self, state: ClusterState) -> None:
        self.state_path.write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")

    def _start(self, state: ClusterState, workers: int, say) -> None:
        password = generate_password()
        pg = Postgres(Path(state.pg_home), state.pg_port, password)
        pg.start()
        pg.create_database("microstock")
        pgpass = self.home / "pgpass"
        server_db = pg.prefect_server_env(pgpass)
        say(f"PostgreSQL on {HOST}:{state.pg_port} (data {pg.data_dir})")
        api_url = f"http://{'127.0.0.1' if state.host in ('0.0.0.0', '::') else state.host}:{state.api_port}/api"
        joined = {
            "PREFECT_API_URL": api_url,
            "PREFECT_API_AUTH_STRING": new_auth_string(),
            "MICROSTOCK_DEAD_LETTER_URL": pg.login_url("microstock"),
            "PGPASSFILE": str(pgpass),
        }
        _write_private(self.env_path, "".join(f"{k}={v}\n" for k, v in joined.items()))

        server_env = {**self._base_env("server"), **server_db, **SERVER_BATCHING,
                      "PREFECT_SERVER_API_AUTH_STRING": joined["PREFECT_API_AUTH_STRING"]}
        if state.redis_port is not None:
            redis = RedisServer(self.home / "redis", state.redis_port)
            state.pids["redis"] = redis.start()
            self._save(state)
            server_env.update(redis.prefect_server_env())
            say(f"Redis on {HOST}:{state.redis_port} (Prefect's messaging; log {redis.log_path})")
        state.pids["server"] = self._spawn("server", [sys.executable, "-m", "prefect", "server", "start", "--host",
                                                      state.host, "--port", str(state.api_port)], server_env)
        self._save(state)
        self._wait_healthy(api_url, state.pids["server"])
        say(f"Prefect server on {api_url.removesuffix('/api')} (PostgreSQL database 'prefect'; auth required)")

        self._write_demo_accounts(joined["MICROSTOCK_DEAD_LETTER_URL"])
        deploy = subprocess.run([sys.executable, "-c", "from flows.cli import main; main()", "accounts", "deploy",
                                 str(self.accounts_path), "--pool", POOL],
                                env={**self._base_env("cli"), **joined}, capture_output=True, text=True, timeout=300)
        if deploy.returncode != 0:
            raise ConfigError(f"deploying the demo accounts failed: {deploy.stderr.strip()[-600:]}")
        say(deploy.stdout.rstrip())
        for n in range(1, workers + 1):
            state.pids[f"worker-{n}"] = self._spawn(
                f"worker-{n}", [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL,
                                "--name", f"{self.home.name}-worker-{n}"],
                {**self._base_env(f"worker-{n}"), **joined})
            self._save(state)
        say(f"{workers} process worker(s) on pool {POOL!r}; join with: set -a; . {self.env_path}; set +a")

    def _base_env(self, role: str) -> dict[str, str]:
        """This process's environment without Prefect's or microstock's settings, with its own PREFECT_HOME."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MICROSTOCK_", "PG"))}
        home = self.home / "prefect-home" / role
        home.mkdir(parents=True, exist_ok=True)
        return {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> int:
        """Start a long-lived process in its own session (it outlives this command), output to ``<name>.log``."""
        with open(self.home / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=self.home)
        return proc.pid

    def _wait_healthy(self, api_url: str, pid: int, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                raise ConfigError(f"the Prefect server exited at start (log {self.home / 'server.log'})")
            if healthy(api_url):
                return
            time.sleep(0.5)
        raise ConfigError(f"the Prefect server did not answer within {timeout_s:.0f} s "
                          f"(log {self.home / 'server.log'})")

    def _write_demo_accounts(self, dead_letter_url: str) -> None:
        lines = [f'work_pool = "{POOL}"', f'dead_letter_url = "{dead_letter_url}"', ""]
        for name in DEMO_ACCOUNTS:
            (self.home / "accounts" / name).mkdir(parents=True, exist_ok=True)
            lines += ["[[account]]", f'name = "{name}"', f'workdir = "accounts/{name}"', ""]
        self.accounts_path.write_text("\n".join(lines), encoding="utf-8")

    # --- down -------------------------------------------------------------------------

    def down(self, say=print) -> bool:
        """Stop the workers, the server and PostgreSQL, and remove ``home``; False when no cluster was up."""
        state = self.state()
        if state is None:
            return False
        self._stop_all(state, say)
        shutil.rmtree(self.home, ignore_errors=True)
        return True

    @staticmethod
    def _stop_all(state: ClusterState, say) -> None:
        order = {"server": 1, "redis": 2}  # workers first, then the server, then its messaging
        for name in sorted(state.pids, key=lambda n: order.get(n, 0)):
            (stop_redis if name == "redis" else _stop_group)(state.pids[name])
            say(f"stopped {name}")
        pg_home = Path(state.pg_home)
        if (pg_home / "data").exists():
            Postgres(pg_home, state.pg_port, password="").stop()
            say("stopped PostgreSQL")
        shutil.rmtree(pg_home, ignore_errors=True)


def _alive(pid: int) -> bool:
    """True while ``pid`` is a running Prefect process (a zombie, or a reused pid of another program, is not)."""
    try:
        running = Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        return running and b"prefect" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False


def _stop_group(pid: int, timeout_s: float = 30) -> None:
    """SIGTERM the process group led by ``pid`` (a process this cluster started), SIGKILL it after ``timeout_s``."""
    if not _alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
