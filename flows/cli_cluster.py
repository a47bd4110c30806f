"""``microstock accounts`` and ``microstock cluster``: many contributor accounts on one Prefect server.

Added to the ``microstock`` app by :mod:`flows.cli`; like it, Prefect is
imported only inside the commands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import console, err
from tasks.core.errors import ConfigError

accounts_app = typer.Typer(help="Many contributor accounts on one Prefect server (accounts.toml).",
                           no_args_is_help=True)


@accounts_app.command("deploy")
def accounts_deploy(
    file: Path = typer.Argument(..., help="The accounts file (accounts.toml)."),
    pool: Optional[str] = typer.Option(None, "--pool",
                                       help="Work pool (default: the file's work_pool, else microstock)."),
) -> None:
    """Create each account's stock-batch, dead-letter-summary, replay-dead-letters and collect-batches deployments
    (named after the account, concurrency limit 1) on the server of PREFECT_API_URL."""
    if not os.environ.get("PREFECT_API_URL"):
        raise ConfigError("PREFECT_API_URL is not set: deployments go to a running Prefect server "
                          "(`microstock cluster up` starts one; join it with its cluster.env)")
    from tasks.orchestration.accounts import deploy_accounts

    names = deploy_accounts(file, pool, say=lambda line: console.print(line, highlight=False))
    console.print(f"{len(names)} deployment(s) applied", highlight=False)


cluster_app = typer.Typer(help="A trial cluster on this machine: PostgreSQL, a Prefect server, workers, two "
                               "demo accounts.", no_args_is_help=True)
ClusterHomeOpt = typer.Option(Path(".cluster"), "--home", help="The cluster's folder (state, logs, cluster.env).")


@cluster_app.command("up")
def cluster_up(
    home: Path = ClusterHomeOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address the Prefect server listens on (loopback unless "
                                                        "told otherwise; it always requires the auth string)."),
    workers: int = typer.Option(2, "--workers", min=1, help="Process workers to start."),
    redis: bool = typer.Option(False, "--redis", help="Also start Redis (Debian's redis-server) and run the "
                                                      "server's messaging on it (the `redis` extra: prefect-redis)."),
) -> None:
    """Start PostgreSQL, a Prefect server on it, the workers, and deploy two demo accounts."""
    from harness.cluster import Cluster

    Cluster(home).up(host=host, workers=workers, redis=redis, say=lambda line: console.print(line, highlight=False))


@cluster_app.command("down")
def cluster_down(home: Path = ClusterHomeOpt) -> None:
    """Stop the workers, the server and PostgreSQL of the cluster in HOME, and remove HOME."""
    from harness.cluster import Cluster

    if not Cluster(home).down(say=lambda line: console.print(line, highlight=False)):
        err.print(f"no cluster is up in {home}")


def shared_dead_letter_url(workdir: Path) -> str:
    """$MICROSTOCK_DEAD_LETTER_URL, else the workdir's ``dead_letter_url`` setting ("" for SQLite)."""
    from tasks.core.settings import load_settings
    from tasks.core.workdir import Workdir
    from tasks.stores.dead_letter_open import store_settings

    return store_settings(load_settings(Workdir(workdir).config_file), os.environ).dead_letter_url


def all_accounts_summary(workdir: Path) -> None:
    """``dead-letter summary --all-accounts``: every account of the shared store, a block each."""
    from tasks.stores.dead_letter import Summary
    from tasks.stores.dead_letter_sql import DeadLetterDatabase

    url = shared_dead_letter_url(workdir)
    if not url:
        raise ConfigError("--all-accounts needs the shared store: set dead_letter_url (or $MICROSTOCK_DEAD_LETTER_URL)")
    summaries = DeadLetterDatabase.postgres(url).summaries()
    for account, summary in sorted(summaries.items()):
        typer.echo(f"account {account}: {summary.text()}")
    if not summaries:
        typer.echo(f"{Summary().text()} in every account")
