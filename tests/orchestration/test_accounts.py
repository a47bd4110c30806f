"""accounts.toml: what is accepted, what is refused with the key named, and the deployments it makes."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.orchestration.accounts import account_deployments, account_env, load_accounts
from tasks.orchestration.environment import RUN_LOG_ENV

URL = "postgresql+psycopg://microstock@127.0.0.1:5432/microstock"


def write(tmp_path, text: str):
    path = tmp_path / "accounts.toml"
    path.write_text(text)
    return path


def test_two_accounts_with_relative_paths_a_schedule_and_a_queue(tmp_path):
    accounts = load_accounts(write(tmp_path, f'''
work_pool = "studio"
dead_letter_url = "{URL}"

[[account]]
name = "alice"
workdir = "data/alice"
schedule = "30 1 * * *"
timezone = "Europe/Berlin"
work_queue = "machine-a"

[[account]]
name = "bob"
workdir = "/srv/bob"
config = "bob.toml"
'''))
    alice, bob = accounts.account
    assert accounts.work_pool == "studio"
    assert alice.workdir == tmp_path / "data" / "alice" and alice.config is None
    assert bob.workdir.as_posix() == "/srv/bob" and bob.config == tmp_path / "bob.toml"
    assert account_env(accounts, alice) == {**RUN_LOG_ENV, "MICROSTOCK_ACCOUNT": "alice",
                                            "MICROSTOCK_DEAD_LETTER_URL": URL}

    built = {(d.flow_name, d.name): d for d in account_deployments(accounts)}
    assert set(built) == {(f, a) for f in ("stock-batch", "dead-letter-summary", "replay-dead-letters",
                                           "collect-batches") for a in ("alice", "bob")}
    assert all(d.concurrency_limit == 1 for d in built.values())
    batch = built["stock-batch", "alice"]
    ((sched,),) = [batch.schedules]
    assert (sched.schedule.cron, sched.schedule.timezone) == ("30 1 * * *", "Europe/Berlin")
    assert batch.work_queue_name == "machine-a" and "account:alice" in batch.tags
    assert batch.parameters["workdir"] == str(tmp_path / "data" / "alice") and "config" not in batch.parameters
    assert batch.job_variables == {"env": account_env(accounts, alice)}
    assert built["stock-batch", "bob"].parameters["config"] == str(tmp_path / "bob.toml")
    assert built["stock-batch", "bob"].schedules[0].schedule.cron == "0 2 * * *", "prefect.yaml's when not set"
    assert "config" not in built["dead-letter-summary", "bob"].parameters, "that flow takes no config"
    assert built["replay-dead-letters", "alice"].schedules == []
    assert built["dead-letter-summary", "alice"].schedules[0].schedule.timezone == "Europe/Berlin"


@pytest.mark.parametrize(("body", "named"), [
    ('[[account]]\nname = "Alice!"\nworkdir = "a"\n', "account.0.name"),
    ('[[account]]\nname = "a"\nworkdir = "x"\n[[account]]\nname = "b"\nworkdir = "x"\n', "same workdir"),
    ('[[account]]\nname = "a"\nworkdir = "x"\n[[account]]\nname = "a"\nworkdir = "y"\n', "same name"),
    ('[[account]]\nname = "a"\nworkdir = "x"\ntimezone = "Mars/Olympus"\n', "Mars/Olympus"),
    ('[[account]]\nname = "a"\nworkdir = "x"\nschedule = "daily"\n', "five fields"),
    ('[[account]]\nname = "a"\nworkdir = "x"\ncolour = "red"\n', "unknown key"),
    ('work_pool = "p"\n', "account"),
    ('dead_letter_url = "postgresql+psycopg://u:s3cret-pw@h/db"\n[[account]]\nname = "a"\nworkdir = "x"\n', "pgpass"),
])
def test_a_bad_file_is_refused_naming_the_key(tmp_path, body, named):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_accounts(path)
    assert str(path) in err.value.message and named in err.value.message
    assert "s3cret-pw" not in err.value.message


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_accounts(write(tmp_path, "[[account]\n"))
