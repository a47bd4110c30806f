"""The assets stage: the images and clips of a batch, generated or ingested into ``assets/``.

Generation is deterministic (the offline generator) or made by Gemini's image
and clip models; an asset that exists is never made again, and a clip Gemini
is still making when a run ends is taken up by the next (never asked for twice).
Ingestion (:mod:`ingest`) copies the contributor's files unchanged and rejects
unusable ones with a reason.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tasks.core.errors import MicrostockError, StageStopped, TransientError
from tasks.core.files import atomic_write_bytes, disk_full, exclusive_lock, sha256_file
from tasks.core.printable import printable
from tasks.core.records import Asset, Made, iter_asset_files
from tasks.core.reports import Gathered
from tasks.core.retry import delay_before_retry
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.images.demo import DemoPrompt, demo_jpeg_bytes, generated_name, prompts_from
from tasks.images.provenance import pending_generation, record_generation
from tasks.observe.progress import StageProgress
from tasks.stages.ingest import IngestReport, disk_full_stop, ingest, settle_asset_names
from tasks.stages.ingest_report import write_ingest_report
from tasks.stages.kinds import ASSET_EXTENSIONS, KINDS, kind_of, unusable_assets
from tasks.stages.run_context import RunContext

log = logging.getLogger(__name__)

#: Held in ``assets/`` while a run ingests or generates: one run at a time adds assets.
GATHER_LOCK = ".gather.lock"

#: Makes image ``index`` for a prompt (offline or with Gemini): its JPEG and what making it cost.
ImageMaker = Callable[[DemoPrompt, int], Made]
#: Makes clip ``index`` of a prompt, the one that goes to ``path`` (offline or with Gemini): its MP4 and what
#: making it cost. The path names the clip, so a maker can keep what it started for it
#: (tasks/images/provenance.py ``pending_generation``); the stage writes the file.
ClipMaker = Callable[[DemoPrompt, int, Path], Made]


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


def _make_with_retries(make: Callable[..., Made], args: tuple, sleep=time.sleep) -> Made:
    for attempt in range(1, GENERATE_ATTEMPTS + 1):
        try:
            return make(*args)
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
    StageStopped failure (quota, refused key) stops generation at once; a full
    disk stops the run (StageStopped ``disk_full``, the images made kept).
    """
    return _generate(assets_dir, count, prompts, seed, lambda prompt, i, path: make(prompt, i), "generate", sleep)


def generate_clips(assets_dir: Path, count: int, prompts: list[DemoPrompt], seed: int, make: ClipMaker,
                   sleep=time.sleep) -> Generated:
    """Ensure generated clips 0..count-1 exist in ``assets_dir`` (``<slug>_c<index>.mp4``), as :func:`generate`
    does images; what a clip maker kept for a clip still being made is removed once the clip is written."""
    return _generate(assets_dir, count, prompts, seed, make, "generate-clips", sleep, clip=True)


def _generate(assets_dir: Path, count: int, prompts: list[DemoPrompt], seed: int,
              make: Callable[[DemoPrompt, int, Path], Made], label: str, sleep, *, clip: bool = False) -> Generated:
    result = Generated()
    with StageProgress(label, count) as progress:
        for i in range(count):
            prompt = prompts[i % len(prompts)]
            path = assets_dir / generated_name(prompt, seed, i, clip=clip)
            if not path.exists():
                try:
                    made = _make_with_retries(make, (prompt, i, path), sleep)
                    record_generation(path, made)  # first: an asset is never there without its cost
                    atomic_write_bytes(path, made.data)
                except OSError as exc:  # the run stops, as at ingest: describing on a full disk loses paid answers
                    if not disk_full(exc):
                        raise
                    raise StageStopped(disk_full_stop(assets_dir, exc, len(result.assets), count - i),
                                       kind="disk_full") from None
                except StageStopped as exc:
                    result.stopped = f"generation stopped: {exc.message}"
                    result.failed[path.name] = exc.message
                    break
                except MicrostockError as exc:
                    result.failed[path.name] = exc.message
                    progress.advance()
                    continue
            if clip:  # written: nothing left to take up (only a clip maker keeps a pending record)
                pending_generation(path).unlink(missing_ok=True)
            result.assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
            progress.advance()
    return result


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


def clip_maker(settings: Settings, api_key: str | None, wd: Workdir) -> ClipMaker:
    """Gemini's clip model when a key is set (counting the day's requests in ``wd``), else the offline demo
    generator's clips."""
    if api_key:
        from tasks.gemini.clip_generation import GeminiClipMaker  # the SDK loads only when it is used
        from tasks.gemini.daybudget import FILE_NAME, DailyBudget

        gemini = settings.gemini
        return GeminiClipMaker(gemini, api_key, settings.generate,
                               DailyBudget(wd.root / FILE_NAME, gemini.clip_model, gemini.requests_per_day))
    from tasks.images.demo_clip import demo_clip_bytes

    seed = settings.generate.seed
    return lambda prompt, i, path: Made(demo_clip_bytes(prompt, seed, i))


def gather(assets_dir: Path, count: int, source: Path | None, prompts: list[DemoPrompt], seed: int,
           make: ImageMaker, unusable: Callable[[list[Asset]], dict[str, str]], clips: int = 0,
           make_clip: ClipMaker | None = None) -> Gathered:
    """Ingest ``source`` when given, else make ``count`` images with ``make`` and ``clips`` clips with
    ``make_clip``; then list every asset, images and clips.

    An asset ``unusable`` names (each kind's check: an image below the minimum size of every chosen agency, a
    clip that cannot be probed, :func:`tasks.stages.kinds.unusable_assets`) is rejected here, before anything
    is spent on it: it stays in ``assets/`` and is never described while those are the agencies chosen.

    One run at a time adds to ``assets/`` (``assets/.gather.lock``): a second
    run waits, then finds what the first added (the same bytes are never two
    assets, the same image is never made twice).
    """
    with exclusive_lock(assets_dir / GATHER_LOCK, "adding assets", waiting=lambda: log.warning(
            "another run is adding assets to %s: waiting for it to finish", assets_dir)):
        for old, new in settle_asset_names(assets_dir).items():
            log.warning("renamed assets/%s to %s: not UTF-8, or a stem another asset has (one sidecar, one upload "
                        "name each)", printable(old), printable(new))
        before = {p.name for p in iter_asset_files(assets_dir, ASSET_EXTENSIONS)}
        rejected: dict[str, str] = {}
        generated = Generated()
        ingested = IngestReport()
        if source is not None:
            ingested = ingest(source, assets_dir)
            rejected = {**ingested.rejected, **ingested.duplicates}
            for old, new in ingested.renamed.items():
                log.warning("ingested %s as assets/%s (asset names: NFC, UTF-8, one per stem, within the disk's "
                            "limit)", printable(old), printable(new))
        else:
            if count > 0:
                generated = generate(assets_dir, count, prompts, seed, make)
            if clips > 0 and make_clip is not None:  # the clip model has its own quota: asked even if images stopped
                made = generate_clips(assets_dir, clips, prompts, seed, make_clip)
                generated.failed.update(made.failed)
                generated.stopped = "; ".join(s for s in (generated.stopped, made.stopped) if s) or None
    assets, unreadable = [], {}
    for path in iter_asset_files(assets_dir, ASSET_EXTENSIONS):  # the images, then the clips: the kinds' order
        try:
            assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
        except OSError as exc:  # one unreadable asset never stops the others
            unreadable[path.name] = f"cannot be read ({exc.strerror or exc}); not described"
    assets.sort(key=lambda a: a.is_clip)
    unfit = unusable(assets)
    rejected.update({**unreadable, **unfit})  # the names above are the source folder's: only these are assets
    return Gathered(assets=[a for a in assets if a.name not in unfit],
                    new=[p.name for p in iter_asset_files(assets_dir, ASSET_EXTENSIONS) if p.name not in before],
                    rejected=rejected,
                    not_generated=generated.failed, stopped=generated.stopped,
                    left_out=ingested.left_out)


def gather_assets(ctx: RunContext, count: int, source: str | None, clips: int = 0) -> Gathered:
    """The assets stage: ingest ``source``, or make ``count`` images and ``clips`` clips (with Gemini when the run
    has a key: the flow checked the image and clip models first,
    :meth:`~tasks.stages.run_context.RunContext.check`); every asset of the workdir after it, of every kind, that
    its kind's check finds usable for the run's agencies (:func:`~tasks.stages.kinds.unusable_assets`)."""
    wd, settings = ctx.wd, ctx.settings
    make = image_maker(settings, ctx.gemini_key if count > 0 and not source else None, wd)  # ingesting: no key
    make_clip = clip_maker(settings, ctx.gemini_key, wd) if clips > 0 and not source else None
    gathered = gather(wd.assets, count, Path(source) if source else None, prompts_from(settings.generate.prompts),
                      settings.generate.seed, make, lambda assets: unusable_assets(ctx, assets), clips, make_clip)
    if count == 0 and clips == 0 and not source:
        log.info("nothing generated (no --count): finishing the %d assets already in %s",
                 len(iter_asset_files(wd.assets, ASSET_EXTENSIONS)), wd.assets)
    for name, reason in sorted(gathered.rejected.items()):
        log.warning("rejected %s: %s", printable(name), printable(reason))
    for name, note in sorted(gathered.left_out.items()):
        log.warning("ingested %s: %s", printable(name), note)
    write_ingest_report(wd, gathered)  # a full disk: StageStopped, the assets kept
    log.info("%s (%d new)", ", ".join(f"{sum(1 for a in gathered.assets if kind_of(a.name) is kind)} {kind.name}s"
                                      for kind in KINDS), len(gathered.new))
    return gathered
