"""The describe stage's throughput with each describer that sees pictures: Gemini's (the google-genai SDK against
the fake Gemini server) beside the OpenAI-compatible one (the openai SDK against the project's own Chat Completions
server), same images, same quota, same model time, both SDKs imported before the timing, in one process without
Prefect (the plain stage, :func:`tasks.stages.describe.describe_stage`, jobs in threads).

    .venv/bin/python -m bench.describers                         # 60 images, 250 ms per call, 600 RPM, 4 at once
    .venv/bin/python -m bench.describers --images 120 --latency 0.5 --rpm 300 --concurrency 8

Two measurements per describer:

1. **at the quota**: ``--images`` assets at ``requests_per_minute = --rpm`` and ``concurrency = --concurrency``,
   each call answered after ``--latency`` s: requests per second, and that as a share of the quota;
2. **overhead per asset**: the same assets one at a time with no quota and no model time (the servers answer at
   once): the wall time per asset is what the project and the SDK add around a call (reading and reducing the
   image, the request, the answer's parse, keyword rules, the sidecar).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from PIL import Image


def _images(wd, count: int) -> list:
    from tasks.core.files import sha256_file
    from tasks.core.records import Asset

    assets = []
    for i in range(count):
        path = wd.assets / f"bench_{i:04d}.jpg"
        Image.new("RGB", (1600, 1200), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)).save(path, quality=85)
        assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
    return assets


def _run(which: str, count: int, rpm: int, concurrency: int, latency: float) -> dict:
    """One describe stage of ``count`` fresh images with ``which`` describer; its wall time and figures."""
    from tasks.core.settings import DescriberSettings, GeminiSettings, Settings
    from tasks.core.workdir import Workdir
    from tasks.stages.describe import describe_stage
    from tasks.stages.run_context import RunContext
    from tests.fakes.chat_completions import MODEL, FakeChat
    from tests.fakes.dead_letter_memory import MemoryDeadLetterStore
    from tests.fakes.gemini import FAKE_KEY, FakeGemini, slow

    gemini = GeminiSettings(requests_per_minute=rpm, concurrency=concurrency, requests_per_day=0)
    with tempfile.TemporaryDirectory() as tmp:
        wd = Workdir(Path(tmp) / "work").prepare()
        assets = _images(wd, count)
        if which == "gemini":
            fake = FakeGemini().start()
            fake.default = lambda req: slow(latency)
            os.environ["GOOGLE_GEMINI_BASE_URL"] = fake.url
            settings, key = Settings(gemini=gemini), FAKE_KEY
        else:
            fake = FakeChat(latency=latency)
            settings, key = Settings(gemini=gemini, describer=DescriberSettings(
                provider="openai", base_url=fake.url, model=MODEL, requests_per_minute=rpm,
                concurrency=concurrency)), None
        ctx = RunContext(wd, settings, ["adobe"], given_store=MemoryDeadLetterStore(), key_from=lambda: key)
        started = time.perf_counter()
        report = describe_stage(ctx, assets)
        wall = time.perf_counter() - started
        (fake.stop if which == "gemini" else fake.close)()
    assert len(report.described) == count, report
    return {"wall_s": wall, "requests_per_s": count / wall, "share_of_quota": count / wall / (rpm / 60)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.describers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=60)
    ap.add_argument("--latency", type=float, default=0.25, help="seconds each server takes per describe call")
    ap.add_argument("--rpm", type=int, default=600, help="requests_per_minute of either describer (the quota)")
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args(argv)
    import google.genai  # noqa: F401  both SDKs imported before either side is timed
    import openai  # noqa: F401

    figures = {}
    for which in ("gemini", "openai"):
        at_quota = _run(which, args.images, args.rpm, args.concurrency, args.latency)
        bare = _run(which, args.images, 600_000, 1, 0.0)
        figures[which] = {**at_quota, "overhead_ms_per_asset": 1000 * bare["wall_s"] / args.images}
    print(f"{args.images} images (1600×1200), {args.latency * 1000:.0f} ms per call, quota {args.rpm} RPM, "
          f"concurrency {args.concurrency}; load average {os.getloadavg()[0]:.1f}\n")
    print("| describer | wall s at the quota | requests / s | share of the quota | overhead per asset (ms) |")
    print("|---|---:|---:|---:|---:|")
    for which, f in figures.items():
        print(f"| {which} | {f['wall_s']:.2f} | {f['requests_per_s']:.2f} | {f['share_of_quota']:.1%} | "
              f"{f['overhead_ms_per_asset']:.0f} |")
    print("\n" + json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
