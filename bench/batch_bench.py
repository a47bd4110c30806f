"""Batch mode vs sync mode for the describe requests (issue 17), against the test Gemini server.

    .venv/bin/python -m bench.batch_bench                    # 1,000 assets, jobs finished after 30 s
    .venv/bin/python -m bench.batch_bench --assets 200 --delay 10 --part stage

The real google-genai SDK talks to the test server (``tests/fakes/gemini.py``)
on 127.0.0.1. The same ``--assets`` photo-sized JPEGs (1,200 × 800, distinct)
are described twice:

1. **sync** — :class:`~tasks.gemini.describer.GeminiDescriber`, one
   ``generateContent`` call per asset (four threads);
2. **batch** — :class:`~tasks.gemini.batch.GeminiBatches`: one inline
   request per asset, split under the 20 MB inline limit, submitted as jobs,
   collected when the server has finished them.

Counted at the server: the requests it received (HTTP ``generateContent``
calls for sync, inline requests of the created jobs for batch), the bytes of
each request's JSON, whether each asset's inline request is the same JSON as
its sync request, and the tokens of each request by the server's own rule
(:func:`tokens_of`: 258 per image, one per four characters of text — a fixed
rule standing in for Google's tokenizer, which the test server does not
have; the server answers each request with that many prompt tokens). The cost
is the sum of the sidecar metadata's ``cost_usd`` (``tasks/gemini/prices.toml``,
the sync or the batch price).

**Stage part** (``--part stage``), in a fresh process on the embedded default
Prefect server (its own ``PREFECT_HOME``): a workdir with ``--assets``
agency-sized JPEGs (2,400 × 1,800) and ``[gemini] mode = "batch"``; the test
server finishes each job ``--delay`` seconds after its create. ``stock-batch``
runs once (it submits the jobs), then ``collect-batches`` runs every
``--poll`` seconds (the deployment's schedule is 30 minutes; the poll stands
in for it) until no asset is left in a job. Reported: the submitting run's
wall time, the first and last create, each collect run, and the time from
the first create to the last file written to an agency's outbox.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageDraw

#: Tokens the test server counts per inline image (Google's figure for a small image; a stand-in here).
IMAGE_TOKENS = 258


def tokens_of(request_json: dict) -> int:
    """The test server's token count of a generateContent body: 258 per image, 1 per 4 characters of text."""
    parts = [p for c in request_json.get("contents", []) for p in c.get("parts", [])]
    images = sum(1 for p in parts if "inlineData" in p or "inline_data" in p)
    text = sum(len(p.get("text", "")) for p in parts)
    return images * IMAGE_TOKENS + -(-text // 4)


def photo_jpeg(i: int, size=(1200, 800)) -> bytes:
    """A distinct photo-sized JPEG: a gradient with a few shapes (compresses like a simple photo)."""
    rnd = random.Random(i)
    im = Image.linear_gradient("L").resize(size).convert("RGB")
    draw = ImageDraw.Draw(im)
    for _ in range(12):
        x, y = rnd.randrange(size[0]), rnd.randrange(size[1])
        draw.ellipse((x, y, x + rnd.randrange(40, 300), y + rnd.randrange(40, 300)),
                     fill=(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)))
    buf = BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def write_photos(folder: Path, n: int) -> list:
    from tasks.core.files import sha256_file
    from tasks.core.records import Asset

    folder.mkdir(parents=True, exist_ok=True)
    assets = []
    for i in range(n):
        path = folder / f"photo_{i:05d}.jpg"
        path.write_bytes(photo_jpeg(i))
        assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
    return assets


def boundary(n: int, root: Path) -> dict:
    """Sync and batch for ``n`` assets at the Gemini boundary; the server's counts and the computed cost."""
    from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json

    fake = FakeGemini().start()
    fake.default = lambda req: answer_json(tokens=tokens_of(req.json or {}) + 60)
    os.environ["GOOGLE_GEMINI_BASE_URL"] = fake.url
    try:
        from tasks.core.settings import GeminiSettings
        from tasks.gemini.batch import GeminiBatches
        from tasks.gemini.describer import GeminiDescriber

        assets = write_photos(root / "assets", n)
        settings = GeminiSettings(timeout_s=120)

        describer = GeminiDescriber(settings, FAKE_KEY)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            sync_meta = list(pool.map(describer.describe, assets))
        sync_s = time.perf_counter() - t0
        sync_requests = [r for r in fake.requests if r.path.endswith(":generateContent")]
        sync_in_order = _in_asset_order(sync_requests, assets)
        sync_by_asset = {a.asset_id: r.json for a, r in zip(assets, sync_in_order, strict=True)}

        batches = GeminiBatches(settings, FAKE_KEY)
        t0 = time.perf_counter()
        requests = [batches.request(a) for a in assets]
        jobs = batches.split(requests)
        names = [batches.submit(job, f"bench-batch-{i}").name for i, job in enumerate(jobs)]
        submit_s = time.perf_counter() - t0
        create_bodies = [len(r.raw_body) for r in fake.requests if r.path.endswith(":batchGenerateContent")]
        answers = []
        for name in names:
            job = batches.get(name)
            while not job.done:
                job = batches.get(name)
            answers.extend(job.answers)
        batch_s = time.perf_counter() - t0
        inline = fake.batch.requests
        inline_by_asset = {item["metadata"]["asset_id"]: item["request"]
                           for body in (r.json for r in fake.requests if r.path.endswith(":batchGenerateContent"))
                           for item in body["batch"]["inputConfig"]["requests"]["requests"]}
    finally:
        fake.stop()

    def cost(metas) -> float:
        return sum(m.cost_usd for m in metas)

    batch_meta = [a.metadata for a in answers if a.metadata is not None]
    return {
        "assets": n,
        "sync": {"requests": len(sync_requests), "request_bytes": sum(len(r.raw_body) for r in sync_requests),
                 "tokens_sent": sum(tokens_of(r.json) for r in sync_requests), "described": len(sync_meta),
                 "cost_usd": cost(sync_meta), "seconds": sync_s},
        "batch": {"requests": len(inline), "request_bytes": sum(len(json.dumps(inline_by_asset[a.asset_id]))
                                                                for a in assets),
                  "tokens_sent": sum(tokens_of(r.json) for r in inline), "described": len(batch_meta),
                  "cost_usd": cost(batch_meta), "jobs": len(jobs), "largest_create_body_bytes": max(create_bodies),
                  "submit_seconds": submit_s, "seconds": batch_s},
        "same_request_per_asset": sum(1 for a in assets
                                      if inline_by_asset.get(a.asset_id) == sync_by_asset[a.asset_id]),
        "usage_equal_per_asset": sum(1 for s, b in zip(sync_meta, _answers_in_order(answers, assets), strict=True)
                                     if b is not None and b.metadata is not None and b.metadata.usage == s.usage),
    }


def _in_asset_order(requests: list, assets: list) -> list:
    """Sync requests by asset: each carries its asset's image, so match on the image bytes sent."""
    import hashlib

    from tasks.gemini.describer import image_for_model

    by_image = {hashlib.sha256(r.inline_images()[0][1]).hexdigest(): r for r in requests}
    return [by_image[hashlib.sha256(image_for_model(a)).hexdigest()] for a in assets]


def _answers_in_order(answers: list, assets: list) -> list:
    by_id = {a.asset_id: a for a in answers}
    return [by_id.get(a.asset_id) for a in assets]


def report(r: dict) -> str:
    s, b = r["sync"], r["batch"]
    rows = [
        "| | requests at the server | request JSON, MB | tokens sent (server's count) | described | cost USD "
        "| wall s |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| sync | {s['requests']} | {s['request_bytes'] / 1e6:.1f} | {s['tokens_sent']:,} | {s['described']} | "
        f"{s['cost_usd']:.4f} | {s['seconds']:.1f} |",
        f"| batch | {b['requests']} | {b['request_bytes'] / 1e6:.1f} | {b['tokens_sent']:,} | {b['described']} | "
        f"{b['cost_usd']:.4f} | {b['seconds']:.1f} (submit {b['submit_seconds']:.1f}) |",
    ]
    return "\n".join(rows) + (
        f"\n\nbatch/sync cost: {b['cost_usd'] / s['cost_usd']:.3f}; jobs: {b['jobs']} (largest create body "
        f"{b['largest_create_body_bytes'] / 2**20:.2f} MiB of 20); assets whose inline request is their sync request, "
        f"JSON for JSON: {r['same_request_per_asset']} of {r['assets']}; same usage per asset: "
        f"{r['usage_equal_per_asset']} of {r['assets']}")


BATCH_TOML = '[gemini]\nmode = "batch"\nrequests_per_minute = 6000\nrequests_per_day = 0\ntimeout_s = 300\n'


def stage_child(n: int, delay: float, poll: float, root: Path, out: Path) -> None:
    """Runs inside the fresh process: stock-batch submits, collect-batches collects until nothing is in a job."""
    from tests.fakes.gemini import FAKE_KEY, FakeGemini

    fake = FakeGemini().start()
    fake.batch.finish_after_s = delay
    os.environ.update(GEMINI_API_KEY=FAKE_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    from flows.collect_batches import collect_batches_flow
    from flows.stock_batch import stock_batch
    from tasks.core.workdir import Workdir

    wd = Workdir(root / "work").prepare()
    wd.config_file.write_text(BATCH_TOML)
    for i in range(n):
        (wd.assets / f"photo_{i:05d}.jpg").write_bytes(photo_jpeg(i, size=(2400, 1800)))
    wall = time.time() - time.monotonic()  # the fake stamps requests with time.monotonic()

    t0 = time.monotonic()
    nightly = stock_batch(workdir=str(wd.root), count=0, return_state=True)
    submit_run_s = time.monotonic() - t0
    from tasks.observe.summary import INCOMPLETE  # uploads left undone: a Failed-type state, the summary kept

    summary = nightly.result(raise_on_failure=False) if nightly.is_completed() or nightly.name == INCOMPLETE else {}
    creates = [r.at for r in fake.requests if r.path.endswith(":batchGenerateContent")]
    collects = []
    while True:
        next_at = (collects[-1]["started"] if collects else t0) + poll
        time.sleep(max(0.0, next_at - time.monotonic()))
        started = time.monotonic()
        state = collect_batches_flow(workdir=str(wd.root), return_state=True)
        result = state.result() if state.is_completed() else {}
        collects.append({"started": started, "seconds": time.monotonic() - started,
                         "described": len(result.get("described", [])), "in_batch": len(result.get("in_batch", [])),
                         "state": state.type.value})
        if not result.get("in_batch") or len(collects) > 1000:
            break
    fake.stop()
    outbox_files = [p for a in ("adobe", "vecteezy", "dreamstime") if wd.outbox(a).exists()
                    for p in wd.outbox(a).rglob("*") if p.is_file()]
    last_upload = max(p.stat().st_mtime for p in outbox_files) - wall if outbox_files else None
    productive = [c for c in collects if c["described"]]
    out.write_text(json.dumps({
        "assets": n, "delay_s": delay, "poll_s": poll, "submit_run_s": submit_run_s,
        "submit_run_state": nightly.type.value, "jobs": len(creates),
        "in_batch_after_submit": summary.get("in_batch"),
        "first_create_after_run_start_s": creates[0] - t0 if creates else None,
        "creates_span_s": creates[-1] - creates[0] if creates else None,
        "collect_runs": len(collects), "collect_idle_run_s": [round(c["seconds"], 2) for c in collects
                                                               if not c["described"]][:5],
        "collect_productive_runs": [{k: round(v, 2) if isinstance(v, float) else v for k, v in c.items()
                                     if k != "started"} for c in productive],
        "described": sum(c["described"] for c in collects),
        "outbox_files": len(outbox_files),
        "last_create_to_productive_collect_start_s": productive[0]["started"] - creates[-1] if productive else None,
        "first_create_to_last_upload_s": last_upload - creates[0] if last_upload and creates else None,
    }))


def stage(n: int, delay: float, poll: float, timeout: float = 7200) -> dict:
    from bench.measure import prefect_env, run_child, server_trouble

    with tempfile.TemporaryDirectory(prefix="bench-batch-stage-") as tmp:
        root = Path(tmp)
        out = root / "result.json"
        args = [sys.executable, "-m", "bench.batch_bench", "--part", "stage-child", "--assets", str(n), "--delay",
                str(delay), "--poll", str(poll), "--dir", tmp, "--out", str(out)]
        rc, wall, log = run_child(args, prefect_env(root / "prefect"), root / "child.log", timeout)
        result = json.loads(out.read_text()) if out.exists() else {}
        result.update(exit_code=rc, process_wall_s=wall, server_trouble=server_trouble(log)[:10])
        if rc != 0 or not out.exists():
            result["log_tail"] = log[-3000:]
    return result


def stage_report(r: dict) -> str:
    if "jobs" not in r:
        return f"stage part failed (exit {r.get('exit_code')}):\n{r.get('log_tail', '')}"
    lines = [
        f"{r['assets']} assets, jobs finished {r['delay_s']:g} s after their create, collect-batches every "
        f"{r['poll_s']:g} s:",
        f"- stock-batch (submits): {r['submit_run_s']:.1f} s, {r['jobs']} jobs, {r['in_batch_after_submit']} assets "
        f"in them; first create {r['first_create_after_run_start_s']:.1f} s into the run, creates spread over "
        f"{r['creates_span_s']:.1f} s",
        f"- collect runs: {r['collect_runs']}"
        + (f" ({', '.join(f'{s:.1f}' for s in r['collect_idle_run_s'])} s each while the jobs ran)"
           if r["collect_idle_run_s"] else "") + "; collecting ones: " + "; ".join(
            f"{c['seconds']:.1f} s, {c['described']} described" for c in r["collect_productive_runs"]),
        f"- last create → start of the first collecting run: {r['last_create_to_productive_collect_start_s']:.1f} s",
        f"- **first create → last file in an outbox: {r['first_create_to_last_upload_s']:.1f} s** "
        f"({r['described']} described, {r['outbox_files']} files in the outboxes)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.batch_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=int, default=1000)
    ap.add_argument("--part", choices=["both", "boundary", "stage", "stage-child"], default="both")
    ap.add_argument("--delay", type=float, default=30.0, help="seconds after its create when the server ends a job")
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between collect-batches runs")
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes
    if args.part == "stage-child":
        stage_child(args.assets, args.delay, args.poll, args.dir, args.out)
        return
    results: dict = {"load_average_at_start": os.getloadavg()}
    if args.part in ("both", "boundary"):
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            results["boundary"] = r = boundary(args.assets, Path(tmp))
        print(report(r), flush=True)
    if args.part in ("both", "stage"):
        results["stage"] = r = stage(args.assets, args.delay, args.poll)
        print(stage_report(r), flush=True)
    results["load_average_at_end"] = os.getloadavg()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
