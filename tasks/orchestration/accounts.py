"""Many contributor accounts on one Prefect server: ``accounts.toml`` and its deployments.

The account is the unit of scale. Each account has its own workdir (its
assets, ledger, outboxes) and config file, and gets its own copy of the
deployments of ``prefect.yaml``, named after it
(``stock-batch/<account>``, ``dead-letter-summary/<account>``,
``replay-dead-letters/<account>``, ``collect-batches/<account>``), each with ``concurrency_limit: 1`` — two
runs of one account never overlap, different accounts run side by side on
as many workers as the pool has. ``work_queue`` pins an account to the
machine that holds its workdir (start that machine's worker with
``--work-queue``). Each deployment's runs get ``MICROSTOCK_ACCOUNT`` (and
``MICROSTOCK_DEAD_LETTER_URL`` when the file sets one) in their environment,
so every account parks into its own rows of one shared dead-letter store.

The file::

    work_pool = "microstock"                 # optional (default microstock)
    dead_letter_url = "postgresql+psycopg://microstock@db.example:5432/microstock"   # optional, no password

    [[account]]
    name = "alice"                           # lowercase letters, digits and dashes
    workdir = "/srv/microstock/alice"
    config = "/srv/microstock/alice/microstock.toml"   # optional (default <workdir>/microstock.toml)
    schedule = "30 1 * * *"                  # optional cron of the nightly batch (default prefect.yaml's)
    timezone = "Europe/Berlin"               # optional IANA name (default prefect.yaml's)
    work_queue = "studio-a"                  # optional: only workers of this queue run the account
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tasks.core.errors import ConfigError
from tasks.core.settings import UrlWithoutPassword, invalid
from tasks.orchestration.deployments import CronSpec, DeploymentSpec, load_flow, load_specs
from tasks.orchestration.environment import RUN_LOG_ENV

#: The flow whose schedule an account's ``schedule`` replaces.
BATCH = "stock-batch"
DEFAULT_POOL = "microstock"


class Account(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
    workdir: Path
    config: Path | None = None
    schedule: str | None = None
    timezone: str | None = None
    work_queue: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, tz: str | None) -> str | None:
        if tz is not None:
            try:
                ZoneInfo(tz)
            except (ValueError, ZoneInfoNotFoundError):
                raise ValueError(f"unknown timezone {tz!r} (use an IANA name such as Europe/Berlin)") from None
        return tz

    @field_validator("schedule")
    @classmethod
    def _five_field_cron(cls, cron: str | None) -> str | None:
        if cron is not None and len(cron.split()) != 5:
            raise ValueError(f"{cron!r} is not a cron of five fields (minute hour day month weekday)")
        return cron


class AccountsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    work_pool: str = DEFAULT_POOL
    dead_letter_url: UrlWithoutPassword = ""
    account: list[Account] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_of_each(self) -> "AccountsFile":
        for what, values in (("name", [a.name for a in self.account]),
                             ("workdir", [a.workdir.resolve() for a in self.account])):
            twice = sorted({str(v) for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"two accounts with the same {what}: {', '.join(twice)}")
        return self


def load_accounts(path: Path) -> AccountsFile:
    """Read and validate an accounts file; ConfigError with a one-line message naming the file and the key.

    Relative workdirs and config files are taken relative to the file's folder.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    base = path.resolve().parent
    for entry in data.get("account", []) if isinstance(data.get("account"), list) else []:
        for key in ("workdir", "config"):
            if isinstance(entry, dict) and isinstance(entry.get(key), str):
                entry[key] = str(base / entry[key])
    try:
        return AccountsFile.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, exc) from exc


def account_env(accounts: AccountsFile, account: Account) -> dict[str, str]:
    """The environment of the account's flow runs (job variable ``env`` of a process worker)."""
    env = {**RUN_LOG_ENV, "MICROSTOCK_ACCOUNT": account.name}
    if accounts.dead_letter_url:
        env["MICROSTOCK_DEAD_LETTER_URL"] = accounts.dead_letter_url
    return env


def account_deployments(accounts: AccountsFile, specs: list[DeploymentSpec] | None = None) -> list:
    """One deployment of each ``prefect.yaml`` flow per account, named after the account (not yet applied)."""
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    out = []
    for spec in specs if specs is not None else load_specs():
        flow = load_flow(spec)
        for account in accounts.account:
            crons = spec.schedules
            if spec.name == BATCH and account.schedule:
                crons = [CronSpec(account.schedule, crons[0].timezone if crons else None)]
            schedules = [Cron(c.cron, timezone=account.timezone or c.timezone or "UTC") for c in crons]
            parameters = {**spec.parameters, "workdir": str(account.workdir)}
            if account.config is not None and "config" in flow.parameters.properties:
                parameters["config"] = str(account.config)
            out.append(flow.to_deployment(
                name=account.name,
                description=spec.description or None,
                tags=[*spec.tags, f"account:{account.name}"],
                schedules=schedules,
                parameters=parameters,
                concurrency_limit=1,
                work_queue_name=account.work_queue,
                job_variables={"env": account_env(accounts, account)},
                # Workers import the flow by module (the package is installed), whatever their folder.
                entrypoint_type=EntrypointType.MODULE_PATH,
            ))
    return out


def ensure_process_pool(name: str) -> bool:
    """Create the process work pool ``name`` unless it exists; True when it was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
            return False
        except ObjectNotFound:
            client.create_work_pool(WorkPoolCreate(
                name=name, type="process", base_job_template=ProcessWorker.get_default_base_job_template()))
            return True


def deploy_accounts(path: Path, pool: str | None = None, say=print) -> list[str]:
    """Apply every account's deployments of ``path`` to the server of ``PREFECT_API_URL`` on ``pool``
    (default: the file's ``work_pool``), creating the process pool if needed; the deployments' full names."""
    accounts = load_accounts(path)
    pool = pool or accounts.work_pool
    if ensure_process_pool(pool):
        say(f"created process work pool {pool!r}")
    names = []
    for deployment in account_deployments(accounts):
        deployment.apply(work_pool_name=pool)
        full = f"{deployment.flow_name}/{deployment.name}"
        when = ", ".join(f"{s.schedule.cron} {s.schedule.timezone}" for s in deployment.schedules) or "manual"
        queue = f", queue {deployment.work_queue_name}" if deployment.work_queue_name else ""
        say(f"  {full}: {when} (pool {pool}{queue})")
        names.append(full)
    return names
