"""`microstock accounts deploy` and `dead-letter summary --all-accounts`: what they refuse, and the
studio-wide summary read from a real PostgreSQL (the deploy itself runs in tests/harness/test_cluster.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from harness.postgres import HOST, SUPERUSER
from tasks.stores.dead_letter_open import ACCOUNT_ENV, DEAD_LETTER_URL_ENV
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore
from tests.postgres import postgres  # noqa: F401 (the session's PostgreSQL)

runner = CliRunner()


def microstock(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_accounts_deploy_needs_a_server(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    result = microstock("accounts", "deploy", str(tmp_path / "accounts.toml"))
    assert result.exit_code == 2 and "PREFECT_API_URL is not set" in result.output


def test_all_accounts_needs_the_shared_store(workdir, monkeypatch):
    monkeypatch.delenv(DEAD_LETTER_URL_ENV, raising=False)
    result = microstock("dead-letter", "summary", "--all-accounts", "--workdir", str(workdir.root))
    assert result.exit_code == 2 and "needs the shared store" in result.output


def test_all_accounts_lists_every_account_and_the_plain_summary_only_its_own(postgres, workdir, tmp_path,
                                                                              monkeypatch):
    db = f"cli_{tmp_path.name[-12:].replace('-', '_').lower()}"
    postgres.create_database(db)
    for account, jobs in (("alice", 2), ("bob", 1)):
        store = PostgresDeadLetterStore(postgres.url(db), account)
        for j in range(jobs):
            store.park(f"{account}{j}", payload={}, model="m", error_class="exhausted:503", error_message="x",
                       attempts=1)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{HOST}:{postgres.port}:*:{SUPERUSER}:{postgres.password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    monkeypatch.setenv(DEAD_LETTER_URL_ENV, f"postgresql+psycopg://{SUPERUSER}@{HOST}:{postgres.port}/{db}")
    monkeypatch.setenv(ACCOUNT_ENV, "bob")

    everyone = microstock("dead-letter", "summary", "--all-accounts", "--workdir", str(workdir.root))
    assert everyone.exit_code == 0, everyone.output
    assert [line for line in everyone.output.splitlines() if line.startswith("account ")] == [
        "account alice: dead-letter: 2 parked", "account bob: dead-letter: 1 parked"]
    own = microstock("dead-letter", "summary", "--workdir", str(workdir.root))
    assert own.output.splitlines()[0] == "dead-letter: 1 parked"
    listed = microstock("dead-letter", "list", "--workdir", str(workdir.root))
    assert [line.split()[0] for line in listed.output.splitlines()] == ["bob0"]
    assert postgres.password not in everyone.output + own.output + listed.output
    assert not workdir.dead_letter_db.exists(), "nothing went to SQLite"
