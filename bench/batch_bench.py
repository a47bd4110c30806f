"""Batch mode vs sync mode for the describe requests (issue 17), against the test Gemini server.

    .venv/bin/python -m bench.batch_bench                    # 1,000 assets
    .venv/bin/python -m bench.batch_bench --assets 200

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
        sync_by_asset = {a.asset_id: r.json for a, r in zip(assets, _in_asset_order(sync_requests, assets))}

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
        "same_request_per_asset": sum(1 for a in assets if inline_by_asset.get(a.asset_id) == sync_by_asset[a.asset_id]),
        "usage_equal_per_asset": sum(1 for s, b in zip(sync_meta, _answers_in_order(answers, assets))
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
        "| | requests at the server | request JSON, MB | tokens sent (server's count) | described | cost USD | wall s |",
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.batch_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=int, default=1000)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        r = boundary(args.assets, Path(tmp))
    r["load_average"] = os.getloadavg()
    print(report(r))
    print(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
