"""Flow ``replay-dead-letters``: give parked describe jobs another go, once their cause is fixed.

Dry run by default: it lists what it would replay and changes nothing. With
``dry_run=False`` it claims up to ``limit`` parked jobs (oldest first,
optionally only error classes starting with ``error_class``) atomically, so
two replays never take the same job; runs each through the same describe
task and retry policy as ``stock-batch``
(:data:`tasks.orchestration.describe_runs.IN_PREFECT`); marks the successes ``recovered``
and takes those assets on through CSVs, pack and upload, exactly as
``stock-batch`` does after describing. Failures stay parked with their
attempts, ``last_seen`` and message updated. Jobs whose class fails again
unless something is changed first (``permanent:*``, ``blocked:*``) are left
parked and named, unless ``include_doomed``. The ``replay-assets`` table has
a row per job: recovered and where it went, still failing and why, skipped.
"""

from __future__ import annotations

from dataclasses import asdict

from prefect import flow, runtime
from prefect.logging import get_run_logger
from prefect.states import Completed

from flows.stock_batch import publish_described
from tasks.observe.artifacts import publish_dead_letters
from tasks.observe.replay_table import publish_replay
from tasks.observe.run_names import replay_run_name
from tasks.orchestration.describe_runs import IN_PREFECT
from tasks.stages.replay import claim_replayable, list_replayable, replay_jobs
from tasks.stages.run_context import RunContext


@flow(name="replay-dead-letters", flow_run_name=replay_run_name)
def replay_dead_letters(
    limit: int = 20,
    dry_run: bool = True,
    error_class: str | None = None,
    workdir: str | None = None,
    config: str | None = None,
    include_doomed: bool = False,
):
    """Replay up to ``limit`` parked jobs (dry run unless ``dry_run=False``); returns the counts.

    The result has ``scanned``, ``recovered``, ``still_failing`` and
    ``dry_run`` (the original design's four numbers), plus the recovered
    assets and why the others still fail.

    Args:
        limit: At most this many parked jobs, oldest first.
        dry_run: Only list what would be replayed; set to false to replay.
        error_class: Only jobs whose error class starts with this (e.g. exhausted: or permanent:429).
        workdir: The workdir (empty: $MICROSTOCK_WORKDIR, else ./microstock-data).
        config: Config file (empty: microstock.toml in the workdir).
        include_doomed: Also replay jobs whose class fails again unless something is changed first
            (permanent:*, blocked:*); by default they stay parked, named in the replay-assets table.
    """
    logger = get_run_logger()
    ctx = RunContext.open(workdir, config)
    ctx.wd.prepare()
    store = ctx.store

    published = None
    if dry_run:
        report = list_replayable(store, limit, error_class, include_doomed)
        for line in report.would_replay:
            logger.info(line)
    else:
        claimant = f"replay-{runtime.flow_run.id}"
        jobs, skipped = claim_replayable(store, claimant, limit, error_class, include_doomed)
        report = replay_jobs(ctx, claimant, jobs, IN_PREFECT)
        report.skipped = skipped
        if report.recovered_assets:
            published = publish_described(ctx)
    if report.skipped:
        logger.warning("left parked, not replayed: %d job(s) whose class fails again unless something is changed "
                       "first (%s); change the image or the settings, then replay with include_doomed "
                       "(`microstock replay --apply --include-doomed`)", len(report.skipped),
                       ", ".join(sorted(set(report.skipped.values()))))

    logger.info(report.headline())
    publish_replay(report, published.csvs if published else None, published.uploads if published else None)
    publish_dead_letters(ctx.wd, lambda: store)
    return Completed(message=report.headline(), data=asdict(report))
