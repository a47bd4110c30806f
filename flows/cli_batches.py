"""``microstock batches``: the workdir's Gemini batch jobs (list, cancel), without running a flow.

The jobs come from the workdir's record (``batch_jobs.jsonl``,
:mod:`tasks.stores.batch_jobs`); the state of a live one is asked of Gemini
(one list call). Registered on the ``microstock`` app by :mod:`flows.cli`;
Prefect is loaded only when the key must come from a Secret block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from flows.cli_common import WorkdirOpt, console, err, resolve_workdir
from tasks.core.errors import ConfigError, MicrostockError

batches_app = typer.Typer(help=escape("Gemini batch jobs of [gemini] mode = \"batch\": list them, cancel one."),
                          invoke_without_command=True)


def _key(workdir: Path) -> str | None:
    """The Gemini key: the environment's, else the Secret block (Prefect's environment set first)."""
    from tasks.core.secrets import gemini_api_key

    key = gemini_api_key()
    if key:
        return key
    from tasks.orchestration.environment import set_prefect_env

    set_prefect_env(workdir)
    from tasks.core.secrets import gemini_key

    return gemini_key()


def _batches(workdir: Path):
    """The workdir's record and a Gemini batch client (None without a key)."""
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.gemini.batch import GeminiBatches
    from tasks.stores.batch_jobs import BatchJobs

    wd = Workdir(workdir)
    settings = load_settings(wd.config_file)
    key = _key(workdir)
    return wd, BatchJobs(wd), (GeminiBatches(settings.gemini, key) if key else None)


@batches_app.callback()
def batches_list(ctx: typer.Context, workdir: Optional[Path] = WorkdirOpt) -> None:
    """List the jobs: name, display name, state, assets and what became of them, when submitted."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Column, Table

    from tasks.stores.batch_jobs import workdir_prefix

    wd_path = resolve_workdir(workdir)
    wd, jobs, batches = _batches(wd_path)
    records = jobs.records()
    if not records:
        err.print("no batch jobs in this workdir")
        return
    states: dict[str, str] = {}
    if batches is None:
        err.print("no Gemini key: the states of live jobs are not asked of Gemini")
    elif any(r.live for r in records):
        try:
            states = {job.name: job.state for job in batches.jobs(workdir_prefix(wd))}
        except MicrostockError as exc:
            err.print(f"cannot ask Gemini for the jobs' states: {exc.message}", highlight=False)
    # The names are what `microstock batches cancel` takes: folded onto a second line, never cut with "…".
    table = Table(Column("job", overflow="fold"), Column("display name", overflow="fold"), "state", "assets",
                  "outcome", "submitted at", title=f"batch jobs · {wd_path}", title_justify="left")
    for r in records:
        if r.ended:
            state = r.ended
        elif r.job_name is None:
            state = "create not confirmed (the next run resolves it)"
        else:
            state = states.get(r.job_name, "live")
        outcome = ", ".join(f"{n} {what}" for what, n in sorted(r.counts.items()))
        table.add_row(r.job_name or "—", r.display_name, state, str(len(r.assets)), outcome,
                      (r.submitted_at or r.intended_at).replace("T", " ").replace("Z", " UTC"))
    console.print(table)


@batches_app.command("cancel")
def batches_cancel(
    name: str = typer.Argument(..., help="The job's name (batches/…) or display name, as `microstock batches` "
                                         "lists it."),
    workdir: Optional[Path] = WorkdirOpt,
) -> None:
    """Cancel one live job at Gemini; the next collect returns its assets to pending (or parks them past the limit)."""
    wd, jobs, batches = _batches(resolve_workdir(workdir))
    record = jobs.find(name)
    if record is None:
        raise ConfigError(f"no batch job {name!r} in this workdir (microstock batches lists them)")
    if not record.live:
        raise ConfigError(f"batch job {name!r} has already ended ({record.ended}): nothing to cancel")
    if record.job_name is None:
        raise ConfigError(f"batch job {name!r} has no confirmed job name yet; the next run resolves it, cancel it "
                          "then")
    if batches is None:
        raise ConfigError("no Gemini key (GEMINI_API_KEY, GOOGLE_API_KEY or the gemini-api-key Secret block)")
    batches.cancel(record.job_name)  # Gemini refusing: exit 1 (flows.cli_common.EXIT_CODES)
    console.print(f"cancelled {record.job_name} ({record.display_name}, {len(record.assets)} asset(s)); "
                  "the next run or collect-batches returns its assets to pending", highlight=False)
