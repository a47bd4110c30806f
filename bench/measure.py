"""What the benchmarks measure with: the machine, memory, Prefect's own record of a run, small assets, a server.

Every benchmark runs in a fresh process with its own ``PREFECT_HOME`` (the
embedded default: an ephemeral Prefect server on SQLite), so figures of one
do not leak into another.
"""

from __future__ import annotations

import os
import platform
import random
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from PIL import Image

if TYPE_CHECKING:
    from tasks.orchestration.local_server import LocalServer

OUT = Path(__file__).resolve().parent / "out"


def machine() -> str:
    """One line: CPU model, cores, memory, OS, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GB RAM, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def prefect_env(home: Path) -> dict[str, str]:
    """Environment for a child process on Prefect's ephemeral server, with its own Prefect home."""
    env = dict(os.environ)
    for key in ("PREFECT_API_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        env.pop(key, None)
    # MICROSTOCK_PREFECT_SERVER=ephemeral: a `microstock` child runs on its own ephemeral server, as these
    # benchmarks always measured, and leaves no workdir server running (bench.server_run measures that one).
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", MICROSTOCK_PREFECT_SERVER="ephemeral",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180", PREFECT_LOGGING_LEVEL="WARNING")
    return env


# --- memory ------------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (``getrusage``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_hwm_mb() -> float:
    """This process's peak resident set (``VmHWM``, per address space). Not ``ru_maxrss`` (:func:`peak_rss_mb`)
    where a parent made something large first: Linux keeps that across ``execve``, so a child started by a parent
    that made a 4K clip reported the parent's 500 MB."""
    kb = _status_kb(os.getpid(), "VmHWM")
    if not kb:
        raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")
    return kb / 1024


def _status_kb(pid: int, key: str) -> int:
    """``key`` (``VmRSS``, ``VmHWM`` …) of ``/proc/<pid>/status`` in KiB; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            out.extend(int(c) for c in text)
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children …)."""
    out, todo = [], _children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(_children(child))
    return out


def peak_rss_tree_mb(pid: int) -> float:
    """The largest peak resident set (``VmHWM``) among ``pid`` and its descendants, in MB."""
    return max(_status_kb(p, "VmHWM") for p in [pid, *descendants(pid)]) / 1024


class ChildRssSampler:
    """Samples the peak RSS of this process's descendants (the ephemeral Prefect server) every ``every`` s."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> "ChildRssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.every):
            self.peak_kb = max(self.peak_kb, sum(_status_kb(pid, "VmRSS") for pid in descendants(me)))

    @property
    def peak_mb(self) -> float:
        return self.peak_kb / 1024


# --- Prefect's record of a flow run ---------------------------------------------------------------


@dataclass
class StageTimes:
    """Per stage (task name before the first ``-``): wall span from first start to last end, and task-run count."""

    span_s: dict[str, float] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    not_completed: int = 0
    flow_s: float = 0.0
    flow_state: str = ""
    #: Seconds after the flow run returned until the server had recorded every task run as finished.
    server_lag_s: float = 0.0


def seconds_until_all_recorded(flow_run_id, quiet_s: float = 3.0, limit_s: float = 1800) -> float | None:
    """How long after now the server took to record every task run of the flow run as finished (None: not
    within ``limit_s``). Recorded: none Running or Scheduled, and the finished count still for ``quiet_s``."""
    from prefect.client.orchestration import get_client

    of_run = {"flow_runs": {"id": {"any_": [str(flow_run_id)]}}}
    unfinished = {**of_run, "task_runs": {"state": {"type": {"any_": ["RUNNING", "SCHEDULED", "PAUSED"]}}}}
    finished = {**of_run, "task_runs": {"state": {"type": {"any_": ["COMPLETED", "FAILED", "CRASHED",
                                                                     "CANCELLED"]}}}}
    t0 = time.monotonic()
    last, since = None, t0
    with get_client(sync_client=True) as client:
        while time.monotonic() - t0 < limit_s:
            now = tuple(client.request("POST", "/task_runs/count", json=body).json() for body in (unfinished, finished))
            if now != last:
                last, since = now, time.monotonic()
            elif now[0] == 0 and time.monotonic() - since >= quiet_s:
                return since - t0
            time.sleep(0.25)
    return None


def stage_times(flow_run_id, described: int = 0, wait_s: float = 600) -> StageTimes:
    """Read the flow run and its task runs back from the Prefect API (paged; works for thousands).

    The server records task runs from the flow's events, behind the flow: this first waits (up
    to ``wait_s``) until ``described`` ``describe-…`` task runs are recorded as finished, and
    says how long that took after the flow returned.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    out = StageTimes()
    with get_client(sync_client=True) as client:
        if described:
            t0 = time.monotonic()
            finished = {"flow_runs": {"id": {"any_": [str(flow_run_id)]}},
                        "task_runs": {"name": {"like_": "describe-"},
                                      "state": {"type": {"any_": ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]}}}}
            while time.monotonic() - t0 < wait_s:
                done = client.request("POST", "/task_runs/count", json=finished).json()
                if done >= described:
                    break
                time.sleep(1)
            out.server_lag_s = time.monotonic() - t0
        fr = client.read_flow_run(flow_run_id)
        out.flow_state = fr.state.type.value if fr.state else ""
        if fr.start_time and fr.end_time:
            out.flow_s = (fr.end_time - fr.start_time).total_seconds()
        spans: dict[str, list] = {}
        offset = 0
        while True:
            page = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fr.id])), limit=200, offset=offset)
            for tr in page:
                stage = tr.name.split("-", 1)[0]
                out.runs[stage] = out.runs.get(stage, 0) + 1
                if tr.state is None or not tr.state.is_completed():
                    out.not_completed += 1
                if tr.start_time and tr.end_time:
                    s = spans.setdefault(stage, [tr.start_time, tr.end_time])
                    s[0], s[1] = min(s[0], tr.start_time), max(s[1], tr.end_time)
            if len(page) < 200:
                break
            offset += 200
        out.span_s = {k: (b - a).total_seconds() for k, (a, b) in spans.items()}
    return out


def latest_flow_run_id(flow_name: str):
    """The id of the most recent run of ``flow_name`` in this Prefect home."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                     sort=FlowRunSort.START_TIME_DESC, limit=1)
    return runs[0].id


# --- assets -----------------------------------------------------------------------------------------


def tiny_jpeg(i: int, size: tuple[int, int] = (96, 64)) -> bytes:
    """A small JPEG whose bytes differ for every ``i`` (so every asset has its own SHA-256)."""
    im = Image.new("RGB", size, (i % 251, (i // 251) % 251, (i * 7) % 253))
    im.putpixel((0, 0), (i & 255, (i >> 8) & 255, (i >> 16) & 255))
    buf = BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


#: Words the uploadable assets' descriptions are drawn from (each its own few: no two named alike).
_WORDS = ("amber azure birch brick cedar chalk cobalt copper coral dune ember fern flint frost glacier granite "
          "harbor hazel indigo ivory jade lagoon lava linen maple marble meadow mist moss ochre olive onyx opal "
          "orchid pebble pine plum quartz reef rust saffron sage sand scarlet shale slate spruce steel stone "
          "storm teal thistle timber topaz tundra umber velvet violet walnut willow zinc").split()


def uploadable_picture(i: int) -> Image.Image:
    """Picture ``i`` of the uploadable assets: 2400×1800 (4.3 MP: every agency takes it), 8×6 blocks of random
    colours of its own seed. Distinct by the similarity check's measure (random hashes and colour layouts): of
    5,000, one pair scores 0.4 or more (two versions, under every cap); a smooth field of 12×9 colours had 50
    pairs in 1,000, its colour layouts all near grey (issue 55: 1,000 copies of one picture are one asset, so the
    benchmarks uploaded 3 files per account)."""
    rng = random.Random(i)
    cells = Image.frombytes("RGB", (8, 6), bytes(rng.randrange(256) for _ in range(8 * 6 * 3)))
    return cells.resize((2400, 1800), Image.Resampling.NEAREST)


def write_uploadable_assets(assets_dir: Path, n: int, prefix: str = "asset") -> list[Path]:
    """``n`` distinct 2400×1800 JPEGs (:func:`uploadable_picture`), named like the tiny ones, each with an EXIF
    description of its own words (the offline describer's title and the five keywords Vecteezy asks for).

    Each picture is encoded once (≈ 40 ms); the benchmarks' copies of one picture with their own EXIF were one
    asset since duplicates are found by picture, so they measured 3 uploads per account, not 3 per asset.
    """
    assets_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        exif = Image.Exif()
        words = random.Random(-1 - i).sample(_WORDS, 6)
        exif[0x010E] = f"{' '.join(words).capitalize()} {i}"  # no word all share: the titles are not alike
        p = assets_dir / f"{prefix}_{i:05d}.jpg"
        uploadable_picture(i).save(p, "JPEG", quality=90, exif=exif)
        paths.append(p)
    return paths


def write_tiny_assets(assets_dir: Path, n: int, prefix: str = "asset") -> list[Path]:
    """``n`` tiny distinct JPEGs named ``<prefix>_00000.jpg`` … in ``assets_dir``."""
    assets_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = assets_dir / f"{prefix}_{i:05d}.jpg"
        p.write_bytes(tiny_jpeg(i))
        paths.append(p)
    return paths


@contextmanager
def bench_server(backend: str, home: Path, env: dict[str, str] | None = None) -> Iterator["LocalServer"]:
    """``prefect server start`` on 127.0.0.1 in ``home``: SQLite (Prefect's default) or a fresh PostgreSQL as
    ``microstock cluster up`` runs it (``backend`` ``postgres``), with ``env`` added to the server's environment.

    This process's environment is what the server is started with, and is restored afterwards; the
    PostgreSQL server is stopped and its data removed. The server's log stays in ``home / "server"``.
    """
    # Here, not at the top: bench.scale's child imports this module and measures its memory before Prefect.
    from harness.postgres import Postgres, generate_password
    from tasks.orchestration.local_server import LocalServer, free_port

    saved = dict(os.environ)
    pg = None
    try:
        os.environ.pop("PREFECT_API_URL", None)
        os.environ.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", **(env or {}))
        if backend == "postgres":
            pg = Postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")), free_port(), generate_password())
            pg.start()
            os.environ.update(pg.prefect_server_env(home / "pgpass"))
        with LocalServer(home / "server", free_port()) as server:
            yield server
    finally:
        if pg is not None:
            pg.stop()
            shutil.rmtree(pg.home, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)


def run_child(args: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int, float, str]:
    """Run a child process with output to ``log``; (exit code, wall seconds, the log's text)."""
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        rc = subprocess.run(args, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout).returncode
    return rc, time.perf_counter() - t0, log.read_text(errors="replace")


#: What a Prefect server in trouble says in a client's log (503s, SQLite lock, crashed runs).
SERVER_TROUBLE = ("status code 503", "Service Unavailable", "database is locked", "Crashed",
                  "Subscription queue is full")


def server_trouble(log_text: str) -> list[str]:
    """Lines of a child's log that show server errors."""
    return [line for line in log_text.splitlines() if any(s in line for s in SERVER_TROUBLE)]
