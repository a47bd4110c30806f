"""Clips measured (issue 38 item 7): probe, poster and signature of a 60-second 1080p clip and a 4K one, and the
memory of uploading a 500 MB file over FTP (and SFTP).

    .venv/bin/python -m bench.clips                              # the figures in docs/BENCHMARKS.md ("Clips")
    .venv/bin/python -m bench.clips --seconds 10 --upload-mb 100 --no-sftp   # a quick look

Run by hand, like the other standalone benchmarks (not part of ``make bench`` or ``make test``).

**The clips** are made here with PyAV in a temporary folder: H.264 (x264 ``ultrafast``), yuv420p, 25 fps,
a key frame every 25 frames (one a second, scene-cut detection off), CRF 30: a smooth texture panning 8 px a
frame, so every frame differs and P-frames carry data, at a few Mbit/s — far below a camera's 50–150 Mbit/s,
to keep making them fast (a minute of 4K takes about half a minute here). What the steps cost depends on
frames decoded, not on bitrate alone: the poster decodes from the key frame before the middle up to it, the
signature does so at five points, so a longer GOP (a camera's: often 1–2 s, some 0.5 s) costs more per seek.

**Each step runs in a fresh subprocess** (``--step``), three rounds, the median time reported. Memory is the
child's peak resident set after the step, and its growth over the peak after the
imports and before the step (``VmHWM`` of ``/proc/self/status``): FFmpeg's buffers are C allocations, which
``tracemalloc`` does not see, so the resident set is the honest measure (it includes Python, PyAV's FFmpeg
libraries and Pillow).

**The upload** is a sparse file of ``--upload-mb`` MB (a few random blocks, holes between) sent with the
project's own transport (``FtpTarget.put``, ``SftpTarget.put``) from a child process to a real loopback
server in this process (``tests.fakes.servers``: pyftpdlib, paramiko); the child's peak RSS and its growth
during the upload, and the time. The servers are stopped before this returns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import OUT, machine, peak_hwm_mb

SIZES = {"1080p": (1920, 1080), "4K": (3840, 2160)}
FPS, GOP, CRF = 25, 25, 30
ROUNDS = 3


def make_clip(path: Path, width: int, height: int, seconds: int) -> float:
    """Write the benchmark clip (see the module); returns the seconds it took."""
    import av
    from PIL import Image

    started = time.monotonic()
    with av.open(str(path), "w") as out:
        stream = out.add_stream("h264", rate=FPS, options={
            "crf": str(CRF), "preset": "ultrafast", "g": str(GOP), "keyint_min": str(GOP), "sc_threshold": "0"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        texture = Image.effect_noise((width // 32 + 8, height // 32), 60).convert("RGB")
        texture = texture.resize((width + 8 * FPS, height), Image.Resampling.BILINEAR)
        frames = [av.VideoFrame.from_image(texture.crop((8 * i, 0, 8 * i + width, height))).reformat(
            format="yuv420p") for i in range(FPS)]  # converted once, sent again and again
        for i in range(seconds * FPS):
            frame = frames[i % FPS]
            frame.pts = None
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return time.monotonic() - started


def sparse_file(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        for offset in (0, size // 2, size - (1 << 20)):
            fh.seek(offset)
            fh.write(os.urandom(1 << 20))


# --- one step, in a child process -------------------------------------------------------------


def run_step(step: str, path: Path, port: int) -> dict:
    """The child's side: import what the step needs, note the peak RSS, do the step, note time and peak again."""
    if step in ("probe", "poster", "signature"):
        import av  # noqa: F401  (the steps import it late, on the first clip: loaded before the clock here)

        from tasks.images.clip_poster import poster_jpegs
        from tasks.images.clip_probe import probe_clip
        from tasks.images.clip_signature import clip_signature

        work = {"probe": lambda: probe_clip(path),
                "poster": lambda: poster_jpegs(path, 1000, 400),
                "signature": lambda: clip_signature(path)}[step]
    else:
        from tests.fakes.servers import PASSWORD, USER

        if step == "upload-ftp":
            from tasks.transports.ftp import FtpTarget

            target = FtpTarget("127.0.0.1", port, USER, PASSWORD, timeout=60)
        else:
            from tasks.transports.sftp import SftpTarget

            target = SftpTarget("127.0.0.1", port, USER, PASSWORD, timeout=60,
                                known_hosts=path.with_name("known_hosts"))

        def work() -> None:
            with target:
                target.put(path, path.name)
    before = peak_hwm_mb()
    started = time.monotonic()
    work()
    took = time.monotonic() - started
    return {"seconds": took, "peak_before_mb": before, "peak_mb": peak_hwm_mb()}


def in_child(step: str, path: Path, port: int = 0) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.clips", "--step", step, str(path), str(port)],
                         check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_clip(path: Path) -> dict:
    figures = {}
    for step in ("probe", "poster", "signature"):
        rounds = [in_child(step, path) for _ in range(ROUNDS)]
        figures[step] = {"median_s": statistics.median(r["seconds"] for r in rounds),
                         "peak_mb": max(r["peak_mb"] for r in rounds),
                         "growth_mb": max(r["peak_mb"] - r["peak_before_mb"] for r in rounds)}
    return figures


def measure_upload(folder: Path, megabytes: int, sftp: bool) -> dict:
    from tests.fakes.servers import FtpServer, SftpServer

    clip = folder / "upload" / "harbour_dawn.mp4"
    clip.parent.mkdir()
    sparse_file(clip, megabytes * 1_000_000)
    figures = {}
    kinds = [("ftp", FtpServer)] + ([("sftp", SftpServer)] if sftp else [])
    for kind, server_class in kinds:
        server = server_class(folder / f"{kind}-root").start()
        try:
            if kind == "sftp":
                clip.with_name("known_hosts").write_text(server.known_hosts_line())
            figures[kind] = in_child(f"upload-{kind}", clip, server.port)
            received = server.file(clip.name).stat().st_size
            assert received == clip.stat().st_size, f"{kind}: the server kept {received} bytes"
            server.file(clip.name).unlink()  # 500 MB of disk back before the next
        finally:
            server.stop()
    return figures


def report(results: dict) -> str:
    lines = ["| clip | file | made in | step | time (median of 3) | peak RSS | growth over imports |",
             "|---|---|---|---|---|---|---|"]
    for name, clip in results["clips"].items():
        for step, f in clip["steps"].items():
            lines.append(f"| {name} {clip['seconds']} s | {clip['mb']:.1f} MB | {clip['made_s']:.0f} s | {step} | "
                         f"{f['median_s']:.3f} s | {f['peak_mb']:.0f} MB | {f['growth_mb']:.0f} MB |")
    lines += ["", "| upload | file | time | rate | peak RSS | growth during the upload |", "|---|---|---|---|---|---|"]
    for kind, f in results["upload"].items():
        mb = results["upload_mb"]
        lines.append(f"| {kind} (loopback) | {mb} MB sparse | {f['seconds']:.1f} s | {mb / f['seconds']:.0f} MB/s | "
                     f"{f['peak_mb']:.0f} MB | {f['peak_mb'] - f['peak_before_mb']:.1f} MB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.clips", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="length of each clip")
    ap.add_argument("--upload-mb", type=int, default=500, help="size of the uploaded file")
    ap.add_argument("--no-sftp", action="store_true", help="FTP upload only (paramiko is slower)")
    ap.add_argument("--step", nargs=3, metavar=("STEP", "PATH", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.step:
        step, path, port = args.step
        print(json.dumps(run_step(step, Path(path), int(port))))
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: dict = {"machine": machine(), "date": started, "load_average_at_start": os.getloadavg(),
                     "command": " ".join(["python -m bench.clips", *(argv if argv is not None else sys.argv[1:])]),
                     "clip_encoding": f"H.264 ultrafast, yuv420p, {FPS} fps, GOP {GOP}, CRF {CRF}",
                     "clips": {}, "upload_mb": args.upload_mb}
    print(f"machine: {results['machine']}\nstarted: {started}, load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-clips-") as tmp:
        folder = Path(tmp)
        for name, (width, height) in SIZES.items():
            path = folder / f"clip_{name}.mp4"
            print(f"making the {name} clip ({args.seconds} s) …", flush=True)
            made_s = make_clip(path, width, height, args.seconds)
            results["clips"][name] = {"seconds": args.seconds, "mb": path.stat().st_size / 1e6, "made_s": made_s,
                                      "steps": measure_clip(path)}
            path.unlink()
        print(f"uploading {args.upload_mb} MB …", flush=True)
        results["upload"] = measure_upload(folder, args.upload_mb, sftp=not args.no_sftp)
    results["load_average_at_end"] = os.getloadavg()
    print("\n" + report(results))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "clips.json").write_text(json.dumps(results, indent=2))
    print(f"\nrecorded in {OUT / 'clips.json'}")


if __name__ == "__main__":
    main()
