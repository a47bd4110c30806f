"""Pack-stage benchmark: preview + thumbnail speed against libvips, and peak memory of packing.

    .venv/bin/python -m bench.pack_bench                 # both parts, defaults below
    .venv/bin/python -m bench.pack_bench --images 8 --rounds 3 --pack-count 500

Part 1 generates ``--images`` distinct 24 MP (6000×4000) JPEGs with photo-like
detail (cached in ``bench/out/``) and makes a 1000 px preview and a 400 px
thumbnail of each, encoded as JPEG, with ``tasks.images.ready.preview_jpegs``
and with pyvips (``thumbnail`` = shrink-on-load, then ``thumbnail_image``),
one image at a time, ``--rounds`` times each, the contenders alternating
(so load from elsewhere hits both alike), libvips' operation cache off;
it reports the mean over images of the median time and the ratios. libvips
runs with its default thread pool and again with one thread, since our side
is one thread per image. Then the batch throughput: all images through our
worker pool (as the pack stage runs) against libvips one image after
another with its own threads.

Part 2 packs ``--pack-count`` assets (hard links to the generated images, so
the sources cost no disk) through ``tasks.stages.pack.pack_assets`` in a fresh
subprocess with the default worker pool, and reports the peak RSS
(``getrusage``) after every 10 % so flatness is visible; ``--rotated`` packs
EXIF-rotated copies instead, which take the full decode + re-encode path.

Needs the bench extra: ``pip install pyvips pyvips-binary``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

OUT = Path(__file__).resolve().parent / "out" / "pack"
SIZE = (6000, 4000)
PREVIEW_PX, THUMB_PX, QUALITY = 1000, 400, 85


# --- images ------------------------------------------------------------------------------


def make_photo(i: int) -> bytes:
    """A 24 MP JPEG with gradients, shapes and sensor-like noise (≈ 7–10 MB at quality 92)."""
    w, h = SIZE
    base = Image.linear_gradient("L").resize(SIZE).convert("RGB")
    tint = Image.new("RGB", SIZE, ((40 * i) % 255, 120, (255 - 30 * i) % 255))
    im = Image.blend(base, tint, 0.5)
    d = ImageDraw.Draw(im)
    for k in range(60):
        x, y = (k * 977 + i * 131) % w, (k * 613 + i * 71) % h
        r = 80 + (k * 37) % 400
        d.ellipse((x - r, y - r, x + r, y + r), fill=((k * 50) % 255, (k * 90 + i) % 255, (k * 20) % 255))
    im = im.filter(ImageFilter.GaussianBlur(3))
    noise = Image.merge("RGB", [Image.effect_noise(SIZE, 40) for _ in range(3)])
    im = Image.blend(im, noise, 0.2)
    buf = BytesIO()
    im.save(buf, "JPEG", quality=92)
    return buf.getvalue()


def photos(n: int) -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = OUT / f"photo_{i:02d}.jpg"
        if not p.exists():
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(make_photo(i))
            tmp.replace(p)
        paths.append(p)
    return paths


def rotated(src: Path) -> Path:
    """A copy of ``src`` tagged EXIF orientation 6 (forces decode + rotate + re-encode)."""
    p = src.with_name(src.stem + "_rot6.jpg")
    if not p.exists():
        with Image.open(src) as im:
            exif = im.getexif()
            exif[0x0112] = 6
            im.save(p, "JPEG", quality=92, exif=exif)
    return p


# --- part 1: speed ---------------------------------------------------------------------------


def ours(path: Path) -> int:
    from tasks.images.ready import preview_jpegs

    preview, thumb, _ = preview_jpegs(path, PREVIEW_PX, THUMB_PX)
    return len(preview) + len(thumb)


def vips(path: Path) -> int:
    import pyvips

    preview = pyvips.Image.thumbnail(str(path), PREVIEW_PX).copy_memory()  # used twice: keep it, as ours does
    a = preview.write_to_buffer(".jpg", Q=QUALITY)
    thumb = preview.thumbnail_image(THUMB_PX)
    b = thumb.write_to_buffer(".jpg", Q=QUALITY)
    return len(a) + len(b)


def compare(paths: list[Path], rounds: int, fns: dict) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per image for each of ``fns``: mean over images of the median of ``rounds``.

    The contenders alternate on every image and round, so a busy neighbour
    on a shared machine slows them alike; CPU time (``process_time``, which
    counts libvips' worker threads too) is the figure such a neighbour
    disturbs least. Each one first warms up once.
    """
    per: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for fn in fns.values():
        fn(paths[0])
    for p in paths:
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                wall, cpu = time.perf_counter(), time.process_time()
                fn(p)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        for name in fns:
            per[name].append((statistics.median(w for w, _ in times[name]),
                              statistics.median(c for _, c in times[name])))
    return {name: (statistics.mean(w for w, _ in v), statistics.mean(c for _, c in v)) for name, v in per.items()}


def vips_threads(n: int):
    """``vips`` with libvips' thread pool set to ``n`` threads."""
    import pyvips

    def run(path: Path) -> int:
        pyvips.concurrency_set(n)
        return vips(path)
    return run


def batch_wall(fn, paths: list[Path], workers: int) -> float:
    """Seconds per image for the whole list with ``workers`` images at a time (best of two passes)."""
    from concurrent.futures import ThreadPoolExecutor

    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fn, paths))
        best = min(best, time.perf_counter() - t)
    return best / len(paths)


def speed(paths: list[Path], rounds: int) -> dict:
    import pyvips

    from tasks.stages.pack import DEFAULT_WORKERS

    pyvips.cache_set_max(0)  # no operation cache: every call decodes the file again, as ours does
    threads = pyvips.concurrency_get()
    load_before = os.getloadavg()[0]
    t = compare(paths, rounds, {"ours": ours, "vips": vips_threads(threads), "vips1": vips_threads(1)})
    pyvips.concurrency_set(threads)
    ours_pool = batch_wall(ours, paths, DEFAULT_WORKERS)
    vips_seq = batch_wall(vips, paths, 1)
    return {
        "images": len(paths),
        "mean_mb": round(statistics.mean(p.stat().st_size for p in paths) / 1e6, 1),
        "vips_threads": threads,
        **{f"{name}_{kind}_s": round(t[name][i], 4) for name in t for i, kind in enumerate(("wall", "cpu"))},
        "ratio_wall": round(t["ours"][0] / t["vips"][0], 2),
        "ratio_wall_1thread": round(t["ours"][0] / t["vips1"][0], 2),
        "ratio_cpu": round(t["ours"][1] / t["vips"][1], 2),
        "ratio_cpu_1thread": round(t["ours"][1] / t["vips1"][1], 2),
        "batch_ours_pool_s": round(ours_pool, 4),
        "batch_vips_s": round(vips_seq, 4),
        "batch_ratio": round(ours_pool / vips_seq, 2),
        "pool_workers": DEFAULT_WORKERS,
        "load_avg_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "vips_version": f"{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}",
    }


# --- part 2: memory ---------------------------------------------------------------------------


def pack_child(count: int, sources: list[str], steps: int) -> None:
    """Runs in a fresh process: pack ``count`` assets in growing slices, print peak RSS after each."""
    from tasks.core.records import Metadata, Sidecar
    from tasks.core.settings import PackSettings
    from tasks.core.workdir import Workdir
    from tasks.stages.pack import DEFAULT_WORKERS, pack_assets

    root = Path(tempfile.mkdtemp(prefix="pack-bench-", dir=OUT))
    try:
        wd = Workdir(root).prepare()
        md = Metadata(title="Bench photo", description="A generated photo-like image for the pack benchmark",
                      keywords=["bench", "photo", "gradient", "noise", "shapes"])
        sidecars = []
        for i in range(count):
            name = f"asset_{i:04d}.jpg"
            os.link(sources[i % len(sources)], wd.assets / name)
            sidecars.append(Sidecar(asset_id=str(i), name=name, metadata=md))
        rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        samples = []
        t0 = time.perf_counter()
        for k in range(1, steps + 1):
            upto = count * k // steps
            report = pack_assets(wd, PackSettings(), sidecars[:upto])  # earlier ones are reused, not repacked
            assert not report.rejected, report.rejected
            samples.append([upto, round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)])
        elapsed = time.perf_counter() - t0
        print(json.dumps({"count": count, "workers": DEFAULT_WORKERS, "rss_before_mb": round(rss_start),
                          "peak_rss_mb_after": samples, "seconds": round(elapsed, 1),
                          "per_image_s": round(elapsed / count, 3)}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def memory(paths: list[Path], count: int, rotate: bool) -> dict:
    sources = [str(rotated(p) if rotate else p) for p in paths]
    out = subprocess.run(
        [sys.executable, "-m", "bench.pack_bench", "--pack-child", str(count), "--sources", *sources],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine() -> dict:
    import PIL
    from PIL import features

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem_kb = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                  if ln.startswith("MemTotal"))
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": round(mem_kb / 1024 / 1024, 1),
            "python": platform.python_version(), "pillow": PIL.__version__,
            "libjpeg_turbo": features.version("libjpeg_turbo"), "date": time.strftime("%Y-%m-%d")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=8, help="distinct 24 MP JPEGs for the speed part")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pack-count", type=int, default=500, help="assets packed in the memory part (0: skip)")
    ap.add_argument("--rotated", action="store_true", help="memory part on EXIF-rotated copies (re-encode path)")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--pack-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sources", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pack_child:
        pack_child(args.pack_child, args.sources, steps=10)
        return
    paths = photos(args.images)
    result = {"machine": machine()}
    if not args.skip_speed:
        result["preview_thumb"] = speed(paths, args.rounds)
        print(json.dumps(result["preview_thumb"]), flush=True)
    if args.pack_count:
        result["pack_memory"] = memory(paths, args.pack_count, args.rotated)
        print(json.dumps(result["pack_memory"]), flush=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
