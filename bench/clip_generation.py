"""Generated clips measured (issue 38 item 4): the offline generator's clip, and the memory of taking a clip
Gemini returns inline (base64 in the interaction's JSON) through ``GeminiClipMaker``.

    .venv/bin/python -m bench.clip_generation                 # the figures in docs/BENCHMARKS.md
    .venv/bin/python -m bench.clip_generation --seconds 4     # a quick look

Run by hand, like the other standalone benchmarks (not part of ``make bench`` or ``make test``).

**Offline**: ``demo_clip_bytes`` (a 6 s 1920×1080 H.264 pan) in a fresh child process, three rounds; time and
the child's peak resident set (``VmHWM``) over the peak after its imports.

**Gemini**: the test Gemini server (``tests.fakes.gemini``) runs in this process and answers the child's
interaction with a clip made here (4K H.264 at ``--mbit`` Mbit/s, ``--seconds`` long); the child runs
``GeminiClipMaker`` against it — the real SDK's Interactions client, the JSON answer, base64 decoding, the remux
that tags the clip — and reports the time and its peak resident set over the peak after its imports. The server
is stopped before this returns.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import OUT, machine, peak_hwm_mb

ROUNDS = 3


def make_big_clip(path: Path, seconds: int, mbit_s: int) -> Path:
    """A 3840×2160 H.264 clip at 24 fps and about ``mbit_s`` Mbit/s (x264 ``ultrafast`` with that bitrate, of
    noise-like frames it cannot squeeze below it): the size a 4K camera or model clip has."""
    import av
    from PIL import Image

    with av.open(str(path), "w") as out:
        stream = out.add_stream("h264", rate=24, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 3840, 2160, "yuv420p"
        stream.bit_rate = mbit_s * 1_000_000
        tiles = [Image.effect_noise((3840, 2160), 60 + 10 * i).convert("RGB") for i in range(4)]
        frames = [av.VideoFrame.from_image(t).reformat(format="yuv420p") for t in tiles]
        for i in range(seconds * 24):
            frame = frames[i % 4]
            frame.pts = None
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def run_step(step: str, folder: Path) -> dict:
    """The child's side: imports first, then the peak, then the step timed, then the peak again."""
    import av  # noqa: F401  (loaded before the clock: the steps import it on first use)

    from tasks.images.demo import DEMO_PROMPTS

    if step == "offline":
        from tasks.images.demo_clip import demo_clip_bytes

        before = peak_hwm_mb()
        start = time.perf_counter()
        size = len(demo_clip_bytes(DEMO_PROMPTS[0], 0, 0))
    else:
        from tasks.core.settings import GeminiSettings, GenerateSettings
        from tasks.gemini.clip_generation import GeminiClipMaker

        maker = GeminiClipMaker(GeminiSettings(clip_poll_s=0.05, timeout_s=120, requests_per_minute=6000),
                                "AIzaSyBENCH-key-0123456789abcdefghijklm", GenerateSettings(clip_resolution="4k"))
        before = peak_hwm_mb()
        start = time.perf_counter()
        size = len(maker(DEMO_PROMPTS[0], 0, folder / "bench_c000.mp4").data)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": peak_hwm_mb(), "peak_before_mb": before, "bytes": size}


def in_child(step: str, folder: Path, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.clip_generation", "--step", step, str(folder)], check=True,
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(rounds: list[dict]) -> dict:
    return {"median_s": statistics.median(r["seconds"] for r in rounds), "peak_mb": max(r["peak_mb"] for r in rounds),
            "growth_mb": max(r["peak_mb"] - r["peak_before_mb"] for r in rounds), "bytes": rounds[0]["bytes"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of the clip the test server returns")
    parser.add_argument("--mbit", type=int, default=40, help="its bitrate, Mbit/s")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("folder", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps(run_step(args.step, Path(args.folder))))
        return

    from tests.fakes.gemini import FakeGemini

    results: dict = {"machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = dict(os.environ)
        results["offline"] = summary([in_child("offline", folder, env) for _ in range(ROUNDS)])
        made = time.perf_counter()
        clip = make_big_clip(folder / "big.mp4", args.seconds, args.mbit).read_bytes()
        results["clip"] = {"bytes": len(clip), "seconds": args.seconds, "mbit_s": args.mbit,
                           "made_in_s": time.perf_counter() - made}
        data = base64.b64encode(clip).decode()
        fake = FakeGemini().start()
        try:
            fake.interactions.end = lambda asked: {
                "status": "completed",
                "steps": [{"type": "model_output", "content": [{"type": "video", "mime_type": "video/mp4",
                                                                "data": data}]}],
                "usage": {"total_input_tokens": 24, "total_output_tokens": 5792 * args.seconds}}
            env["GOOGLE_GEMINI_BASE_URL"] = fake.url
            rounds = []
            for _ in range(ROUNDS):
                rounds.append(in_child("gemini", folder, env))
                for pending in folder.glob(".*.pending.json"):
                    pending.unlink()
            results["gemini"] = summary(rounds)
        finally:
            fake.stop()
    OUT.mkdir(exist_ok=True)
    (OUT / "clip_generation.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
