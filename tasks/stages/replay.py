"""Replaying parked describe jobs: the same jobs and retry policy as the batch, for jobs a replay claimed.

The ``replay-dead-letters`` flow claims parked jobs atomically (two replays
never take the same one), runs them through :func:`tasks.stages.describe.describe_jobs`
(with the runner it is given: Prefect's task runs in the flow) and settles
each: described → ``recovered``; still failing → parked again (the one park
path) and released; image gone → released with that message. By default a
replay leaves alone the jobs whose class fails again unless something is
changed first (``permanent:*``, ``blocked:*``: the image, the prompt, the
model) and says so; ``include_doomed`` takes them too. No Prefect here.
"""

from __future__ import annotations

import logging

from tasks.core.errors import fails_again_unchanged
from tasks.core.files import sha256_file
from tasks.core.records import CLIP_EXTENSIONS, Asset, list_assets, read_sidecar
from tasks.core.reports import ReplayReport
from tasks.core.secrets import redact
from tasks.core.workdir import Workdir
from tasks.stages.describe import DescribeWith, describe_jobs
from tasks.stages.describe_job import DescribeRun, Outcome
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter import DeadLetterStore, ParkedJob

log = logging.getLogger(__name__)


def label(job: ParkedJob) -> str:
    """A job as the tables name it: its asset, else its id."""
    return job.asset_name or str(job.payload.get("asset", "")) or job.job_id


def list_replayable(store: DeadLetterStore, limit: int, error_class: str | None = None,
                    include_doomed: bool = False) -> ReplayReport:
    """A dry run: the parked jobs a replay would take (oldest first), and those it would skip (classes that fail
    again unless changed first, unless ``include_doomed``), changing nothing."""
    parked = store.list(status="parked", error_class=error_class)
    skipped = [] if include_doomed else [j for j in parked if fails_again_unchanged(j.error_class)]
    jobs = [j for j in parked if j not in skipped][:limit]
    return ReplayReport(scanned=len(jobs), dry_run=True, would_replay=[dry_run_line(job) for job in jobs],
                        error_classes={label(j): j.error_class for j in jobs},
                        skipped={label(j): j.error_class for j in skipped})


def claim_replayable(store: DeadLetterStore, claimant: str, limit: int, error_class: str | None = None,
                     include_doomed: bool = False) -> tuple[list[ParkedJob], dict[str, str]]:
    """Claim up to ``limit`` parked jobs for ``claimant`` (the store's atomic claim), and the jobs left alone:
    (claimed, skipped asset -> class). Without ``include_doomed`` only classes that may recover are claimed, a
    class at a time in the order of their oldest job (oldest first within each)."""
    if include_doomed:
        return store.claim(claimant, limit=limit, error_class=error_class), {}
    parked = store.list(status="parked", error_class=error_class)
    skipped = {label(j): j.error_class for j in parked if fails_again_unchanged(j.error_class)}
    classes = list(dict.fromkeys(j.error_class for j in parked if not fails_again_unchanged(j.error_class)))
    claimed: list[ParkedJob] = []
    for cls in classes:
        if len(claimed) >= limit:
            break
        # a class that may recover is no prefix of one that fails again (those start with their kind)
        claimed += store.claim(claimant, limit=limit - len(claimed), error_class=cls)
    return claimed, skipped


def dry_run_line(job: ParkedJob) -> str:
    """The original design's dry-run line, with the asset and the attempts so far."""
    return f"[dry-run] would replay {job.job_id} ({job.error_class}) {job.asset_name}, {job.attempts} attempt(s) so far"


class _AssetFinder:
    """Finds a parked job's image or clip: by its recorded name, else by content (the file was renamed)."""

    def __init__(self, wd: Workdir) -> None:
        self.wd = wd
        self._by_id: dict[str, Asset] | None = None

    def find(self, job: ParkedJob) -> Asset | None:
        path = self.wd.assets / (job.asset_name or str(job.payload.get("asset", "")))
        if path.name and path.is_file() and sha256_file(path) == job.job_id:
            return Asset(name=path.name, asset_id=job.job_id, path=path)
        if self._by_id is None:
            found = list_assets(self.wd.assets) + list_assets(self.wd.assets, CLIP_EXTENSIONS)
            self._by_id = {a.asset_id: a for a in found}
        return self._by_id.get(job.job_id)


def replay_jobs(ctx: RunContext, claimant: str, jobs: list[ParkedJob],
                how: DescribeWith = DescribeWith()) -> ReplayReport:
    """Run jobs claimed by ``claimant`` through the describe jobs again (run as ``how`` says), with the same
    retry policy.

    A success writes the sidecar and marks the job ``recovered``; a failure
    is parked again (attempts add up, ``last_seen``, class
    and message updated) and released; a job whose image is gone is released
    with that message. Every claimed job ends recovered or released, whatever
    happens to the others (a released job with a claim that could not be
    dropped is free again after ``CLAIM_TIMEOUT_S``).
    """
    wd, store = ctx.wd, ctx.store
    report = ReplayReport(scanned=len(jobs), dry_run=False,
                          error_classes={label(j): j.error_class for j in jobs})
    finder = _AssetFinder(wd)
    runnable: list[tuple[ParkedJob, Asset]] = []

    def settle(job: ParkedJob, asset: Asset | None, outcome: Outcome | None, message: str | None = None) -> None:
        label = asset.name if asset else (job.asset_name or job.job_id)
        try:
            if outcome is not None and outcome.status == "described":
                if store.mark_recovered(job.job_id, claimant):
                    ctx.events.job_recovered(job.job_id, label, job.attempts)
                else:
                    log.warning("replay %s: described, but this replay no longer held the job", label)
                report.recovered += 1
                report.recovered_assets.append(label)
                log.info("replay %s: recovered", label)
                return
            report.still_failing += 1
            report.failing[label] = message or (outcome.detail if outcome else "not replayed")
            store.release(job.job_id, claimant, error_message=message)
            log.warning("replay %s: still failing (%s)", label, report.failing[label])
        except Exception as exc:  # one job's bookkeeping never stops the others
            log.error("replay %s: %s", label, redact(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))

    for job in jobs:
        try:
            asset = finder.find(job)
        except OSError as exc:
            asset, message = None, f"replay: cannot read the image ({exc.strerror or exc})"
        else:
            message = None if asset else "replay: the image is no longer in assets/ with this content"
        if asset is None:
            settle(job, None, None, message)
            continue
        sidecar = read_sidecar(wd.sidecar(asset.name))
        if sidecar is not None and sidecar.asset_id == job.job_id:  # described meanwhile (e.g. by hand)
            settle(job, asset, Outcome(asset, "described"))
        else:
            runnable.append((job, asset))
    if not runnable:
        return report
    run = DescribeRun.start(ctx, how.describer, how.quota)
    try:
        with how.jobs(run) as submit:
            outcomes = describe_jobs(run, [asset for _, asset in runnable], submit)
    except BaseException:
        for job, _ in runnable:
            store.release(job.job_id, claimant)
        raise
    for (job, asset), outcome in zip(runnable, outcomes, strict=True):
        settle(job, asset, outcome)
    if run.gate.stopped is not None:
        report.stopped = run.gate.stopped.message
    return report
