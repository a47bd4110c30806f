"""The assets stage: the images of a batch, generated or ingested into ``assets/``.

Generation is deterministic (the offline generator) or made by Gemini's image
model; an image that exists is never made again. Ingestion copies the
contributor's files unchanged and rejects unusable ones with a reason.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tasks.core.errors import BadInput, MicrostockError, StageStopped, TransientError
from tasks.core.files import atomic_file, atomic_write_bytes, sha256_file
from tasks.core.records import ACCEPTED_EXTENSIONS, Asset, Made, iter_asset_files, list_assets
from tasks.core.reports import Gathered
from tasks.core.retry import delay_before_retry
from tasks.core.secrets import gemini_key
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.models import check_generation
from tasks.images.demo import DemoPrompt, demo_jpeg_bytes, generated_name, prompts_from
from tasks.images.inspect import IMAGE_EXTENSIONS, ImageRules, image_rules, inspect_image, open_image
from tasks.images.provenance import record_generation
from tasks.observe.progress import StageProgress

log = logging.getLogger(__name__)

#: Makes image ``index`` for a prompt (offline or with Gemini): its JPEG and what making it cost.
ImageMaker = Callable[[DemoPrompt, int], Made]


@dataclass
class Generated:
    """What generation left: the images made or already there, and the ones it could not make this run."""

    assets: list[Asset] = field(default_factory=list)
    #: name -> reason; nothing is written for them, so the next run tries again.
    failed: dict[str, str] = field(default_factory=dict)
    #: Why generation stopped early (daily quota, refused key), if it did.
    stopped: str | None = None


#: Attempts per image for transient failures (the next run tries again after that).
GENERATE_ATTEMPTS = 3
#: Wait before the second attempt of an image (:mod:`tasks.core.retry` doubles it).
GENERATE_RETRY_DELAY_S = 2.0


def _make_with_retries(make: ImageMaker, prompt: DemoPrompt, index: int, sleep=time.sleep) -> Made:
    for attempt in range(1, GENERATE_ATTEMPTS + 1):
        try:
            return make(prompt, index)
        except TransientError as exc:
            if attempt == GENERATE_ATTEMPTS:
                raise
            sleep(delay_before_retry(GENERATE_RETRY_DELAY_S, attempt, exc))
    raise AssertionError("unreachable")


def generate(assets_dir: Path, count: int, prompts: list[DemoPrompt], seed: int, make: ImageMaker,
             sleep=time.sleep) -> Generated:
    """Ensure generated images 0..count-1 exist in ``assets_dir``; existing ones are kept as they are.

    An image that cannot be made (after a few attempts for transient
    failures) is reported and left for the next run; the others go on. A
    StageStopped failure (quota, refused key) stops generation at once.
    """
    result = Generated()
    with StageProgress("generate", count) as progress:
        for i in range(count):
            prompt = prompts[i % len(prompts)]
            path = assets_dir / generated_name(prompt, seed, i)
            if not path.exists():
                try:
                    made = _make_with_retries(make, prompt, i, sleep)
                    record_generation(path, made)  # first: an image is never there without its cost
                    atomic_write_bytes(path, made.jpeg)
                except StageStopped as exc:
                    result.stopped = f"generation stopped: {exc.message}"
                    result.failed[path.name] = exc.message
                    break
                except MicrostockError as exc:
                    result.failed[path.name] = exc.message
                    progress.advance()
                    continue
            result.assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
            progress.advance()
    return result


# --- ingestion ------------------------------------------------------------------


@dataclass
class IngestReport:
    """What ingesting a folder did: new assets, files already there, files rejected (name → reason)."""

    added: list[Asset] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)


def ingest(source: Path, assets_dir: Path) -> IngestReport:
    """Copy the usable JPEG/PNG files of ``source`` into ``assets_dir``, unchanged.

    A file whose content is already an asset (under any name) is not copied
    again. A different image with a name already taken gets the name with its
    hash appended. Unusable files are rejected with a reason; they never stop
    the others.
    """
    report = IngestReport()
    known = {sha256_file(p): p.name for p in iter_asset_files(assets_dir)}
    for path in sorted(source.iterdir()):
        if not path.is_file() or path.name.startswith(".") or path.suffix.lower() not in IMAGE_EXTENSIONS:
            continue
        try:
            if path.suffix.lower() not in ACCEPTED_EXTENSIONS:
                raise BadInput(path.name, f"unsupported file type {path.suffix} (only JPEG and PNG are accepted)")
            inspect_image(path)
        except BadInput as exc:
            report.rejected[path.name] = exc.reason
            continue
        digest = sha256_file(path)
        if digest in known:
            report.already.append(path.name)
            continue
        target = assets_dir / path.name
        if target.exists():
            target = assets_dir / f"{path.stem}_{digest[:8]}{path.suffix}"
        with open(path, "rb") as src, atomic_file(target) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        known[digest] = target.name
        report.added.append(Asset(name=target.name, asset_id=digest, path=target))
    return report


# --- the assets stage -------------------------------------------------------------


def image_maker(settings: Settings, api_key: str | None, wd: Workdir) -> ImageMaker:
    """Gemini's image model when a key is set (counting the day's requests in ``wd``), else the offline demo
    generator."""
    if api_key:
        from tasks.gemini.daybudget import FILE_NAME, DailyBudget
        from tasks.gemini.images import GeminiImageMaker  # the SDK loads only when it is used

        gemini = settings.gemini
        return GeminiImageMaker(gemini, api_key, settings.generate,
                                DailyBudget(wd.root / FILE_NAME, gemini.image_model, gemini.requests_per_day))
    seed = settings.generate.seed
    return lambda prompt, i: Made(demo_jpeg_bytes(prompt, seed, i))


def gather(assets_dir: Path, count: int, source: Path | None, prompts: list[DemoPrompt], seed: int,
           make: ImageMaker, rules: list[ImageRules]) -> Gathered:
    """Ingest ``source`` when given, else make ``count`` images with ``make``; then list every asset.

    An asset below the minimum size of every agency in ``rules`` (the chosen
    agencies) is rejected here, before anything is spent on it: it stays in
    ``assets/`` and is never described while those are the agencies chosen.
    """
    before = {p.name for p in iter_asset_files(assets_dir)}
    rejected: dict[str, str] = {}
    generated = Generated()
    if source is not None:
        rejected = ingest(source, assets_dir).rejected
    elif count > 0:
        generated = generate(assets_dir, count, prompts, seed, make)
    assets = list_assets(assets_dir)
    rejected.update(too_small_for_all(assets, rules))
    return Gathered(assets=[a for a in assets if a.name not in rejected],
                    new=[a.name for a in assets if a.name not in before], rejected=rejected,
                    not_generated=generated.failed, stopped=generated.stopped)


def too_small_for_all(assets: list[Asset], rules: list[ImageRules]) -> dict[str, str]:
    """asset name -> why no agency of ``rules`` takes it: fewer pixels than every one's minimum."""
    floor = min((r.min_pixels for r in rules), default=0)
    small = {}
    for asset in assets:
        try:
            with open_image(asset.path) as im:
                width, height = im.size
        except BadInput as exc:
            small[asset.name] = exc.reason
            continue
        if width * height < floor:
            small[asset.name] = (f"too small for {', '.join(r.agency for r in rules)}: {width}×{height} = "
                                 f"{width * height / 1e6:.1f} MP, below the smallest of their minimums "
                                 f"({floor / 1e6:g} MP); not described")
    return small


def gather_assets(wd: Workdir, settings: Settings, count: int, source: str | None, agencies: list[str]) -> Gathered:
    """The assets stage: ingest ``source``, or make ``count`` images; every asset of the workdir after it
    that at least one of ``agencies`` takes by size."""
    key = gemini_key() if count > 0 and not source else None  # ingesting asks for no key
    if key:
        check_generation(settings, agencies, wd)  # before any image is paid for
    make = image_maker(settings, key, wd)
    rules = [image_rules(a, wd) for a in agencies]
    gathered = gather(wd.assets, count, Path(source) if source else None, prompts_from(settings.generate.prompts),
                      settings.generate.seed, make,
                      [] if any(settings.pack.upscales(a) for a in agencies) else rules)
    for name, reason in sorted(gathered.rejected.items()):
        log.warning("rejected %s: %s", name, reason)
    log.info("%d assets (%d new)", len(gathered.assets), len(gathered.new))
    return gathered
