"""harness.postgres: what it refuses before PostgreSQL would fail obscurely."""

from __future__ import annotations

import os

import pytest

from harness.postgres import Postgres, find_bin_dir, generate_password
from tasks.core.errors import ConfigError
from tests.postgres import require_postgres


def test_generated_passwords_are_long_and_differ():
    a, b = generate_password(), generate_password()
    assert a != b and len(a) >= 32 and a.replace("-", "").replace("_", "").isalnum()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the data folder to the postgres user")
def test_as_root_a_folder_the_postgres_user_cannot_enter_is_named(tmp_path):
    require_postgres()
    assert any(not os.stat(p).st_mode & 0o001 for p in tmp_path.parents), "pytest's folders are closed to others"
    with pytest.raises(ConfigError, match="postgres user cannot enter .* under /tmp"):
        Postgres(tmp_path / "pg", 5999, generate_password()).start()
    assert not (tmp_path / "pg" / "data").exists()


def test_the_server_programs_are_found_where_debian_puts_them():
    require_postgres()
    assert (find_bin_dir() / "pg_ctl").is_file()
