"""The run context: settings, agencies, the dead-letter store and the Gemini key read once, from the chosen
config; the check before a run."""

from __future__ import annotations

import socket

import pytest

from harness.postgres import HOST, SUPERUSER
from tasks.core.errors import StoreUnavailable
from tasks.core.settings import Settings
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import ACCOUNT_ENV, DEAD_LETTER_URL_ENV, open_store, store_settings
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore, SQLiteDeadLetterStore
from tests.postgres import postgres  # noqa: F401 (the session's PostgreSQL)


def park(store, job_id, error_class="exhausted:503"):
    return store.park(job_id, payload={"asset_id": job_id}, model="m", error_class=error_class,
                      error_message="boom", attempts=1, asset_name=f"{job_id}.jpg")


def test_the_runs_store_is_the_one_its_config_names_with_the_password_from_pgpass(postgres, workdir, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.delenv(DEAD_LETTER_URL_ENV, raising=False)
    monkeypatch.delenv(ACCOUNT_ENV, raising=False)
    assert isinstance(RunContext.open(workdir.root).store, SQLiteDeadLetterStore), "SQLite stays the default"

    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{HOST}:{postgres.port}:*:{SUPERUSER}:{postgres.password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    url = f"postgresql+psycopg://{SUPERUSER}@{HOST}:{postgres.port}/postgres"
    workdir.config_file.write_text(f'dead_letter_url = "{url}"\naccount = "carol"\n')
    store = RunContext.open(workdir.root).store
    assert isinstance(store, PostgresDeadLetterStore) and store.account == "carol"
    park(store, "x")
    assert SQLiteDeadLetterStore(workdir.dead_letter_db).get("x") is None, "parked in PostgreSQL, not in SQLite"

    monkeypatch.setenv(ACCOUNT_ENV, "dave")
    assert RunContext.open(workdir.root).store.account == "dave", "the deployment's environment wins over the file"
    assert RunContext.open(workdir.root).store.get("x") is None

    monkeypatch.delenv(ACCOUNT_ENV)
    workdir.config_file.unlink()  # the workdir's own file names no store: --config other.toml does
    other = tmp_path / "other.toml"
    other.write_text(f'dead_letter_url = "{url}"\naccount = "erin"\n')
    chosen = RunContext.open(workdir.root, other).store
    assert isinstance(chosen, PostgresDeadLetterStore) and chosen.account == "erin", "the chosen config's store"


def test_an_unreachable_store_in_the_chosen_config_is_not_replaced_by_the_local_sqlite(workdir, tmp_path, monkeypatch):
    monkeypatch.delenv(DEAD_LETTER_URL_ENV, raising=False)
    monkeypatch.delenv(ACCOUNT_ENV, raising=False)
    other = tmp_path / "other.toml"
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    other.write_text(f'dead_letter_url = "postgresql+psycopg://nobody@{HOST}:{port}/db"\naccount = "frank"\n')
    ctx = RunContext.open(workdir.root, other)
    with pytest.raises(StoreUnavailable):
        ctx.store  # noqa: B018 (opening it is what raises)
    report = describe_stage(ctx, [])
    assert report.stopped and "frank" in report.stopped, "describe says the store it could not reach"
    assert not workdir.dead_letter_db.exists(), "nothing parked into the workdir's own SQLite file"


def test_the_store_opener_reads_no_environment_the_runs_opener_hands_it_the_deployments_store(workdir,
                                                                                               monkeypatch):
    """A deployment's $MICROSTOCK_DEAD_LETTER_URL / $MICROSTOCK_ACCOUNT are read once, where the run is opened
    (RunContext.open, a command's settings), and handed to ``open_store`` in the settings: never read by it."""
    url = f"postgresql+psycopg://nobody@{HOST}:1/db"
    monkeypatch.setenv(DEAD_LETTER_URL_ENV, url)
    monkeypatch.setenv(ACCOUNT_ENV, "grace")
    assert isinstance(open_store(workdir, Settings()), SQLiteDeadLetterStore), "the settings name no store"
    opened = RunContext.open(workdir.root).settings
    assert (opened.dead_letter_url, opened.account) == (url, "grace"), "the run's opener applies the environment"
    named = store_settings(Settings(account="carol"), {DEAD_LETTER_URL_ENV: url})
    assert (named.dead_letter_url, named.account) == (url, "carol"), "an account the environment does not name"


def test_a_context_made_directly_reads_the_key_from_the_environment_only_an_opened_one_the_secret_block_too(
        workdir, monkeypatch):
    """A plain stage call needs no Prefect: its context never asks for the ``gemini-api-key`` Secret block (no
    server to ask); a run opened by a flow or a command does when the environment has no key."""
    from tasks.core import secrets

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    asked: list[str] = []
    monkeypatch.setattr(secrets, "secret_block", lambda name: asked.append(name) or "from-block")
    assert RunContext(workdir).gemini_key is None and asked == []
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    assert RunContext(workdir).gemini_key == "from-env"
    monkeypatch.delenv("GEMINI_API_KEY")
    assert RunContext.open(workdir.root).gemini_key == "from-block" and asked == ["gemini-api-key"]


def test_a_plain_stage_calls_events_are_kept_in_its_context_with_the_payload_prefect_would_get(workdir):
    """The events port: a context made directly keeps what the stages emit (here a park), in order; one a flow or
    command opened sends them to Prefect (tests/observe/test_events.py checks that against a real server)."""
    from PIL import Image

    from tasks.core.errors import PermanentError
    from tasks.core.files import sha256_file
    from tasks.core.records import Asset
    from tasks.observe.events import JOB_PARKED, MemoryEvents, PrefectEvents
    from tasks.stages.describe_job import DescribeRun
    from tasks.stages.offline_describer import OfflineDescriber

    path = workdir.assets / "sunset.jpg"
    Image.new("RGB", (64, 48), (200, 90, 20)).save(path)
    asset = Asset(name=path.name, asset_id=sha256_file(path), path=path)
    ctx = RunContext(workdir)
    assert isinstance(ctx.events, MemoryEvents) and isinstance(RunContext.open(workdir.root).events, PrefectEvents)
    DescribeRun.start(ctx, OfflineDescriber()).park(asset, PermanentError("refused", kind="permanent", code="400"))
    (event,) = ctx.events.sent
    assert (event.event, event.resource["prefect.resource.id"]) == (JOB_PARKED, f"microstock.asset.{asset.asset_id}")
    assert event.payload == {"asset": "sunset.jpg", "asset_id": asset.asset_id, "error_class": "permanent:400",
                             "attempts": 1, "model": "offline"}
