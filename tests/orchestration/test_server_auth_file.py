"""``server.auth`` damaged under a running server (cut short, a bad byte, a folder, another string) costs one
line saying how on, at once: never the 181-s wait ("a busy machine?") nor a traceback of 401s (issue 50). The
way on, `server stop` then any command, starts the server with a new auth string; the damaged file is set
aside, never deleted, and never quoted (it is the secret, or most of it).

One real server for all the cases (~10-20 s to start)."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.orchestration import server_record, workdir_server
from tasks.orchestration.local_server import AUTH_SHAPE
from tests.fakes.prefect_home import migrated_home

pytestmark = pytest.mark.server

DAMAGE = {
    "cut short": lambda p: p.write_text(p.read_text()[:20]),
    "a bad byte": lambda p: p.write_bytes(p.read_bytes()[:15] + b"\xff" + p.read_bytes()[16:]),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
    "missing": lambda p: p.unlink(),
}
ANOTHER = "microstock:" + "b" * 32  # the right shape, not the running server's


def test_a_damaged_auth_file_under_a_running_server_is_one_line_and_a_way_on(tmp_path, monkeypatch,
                                                                             run_microstock):
    home = migrated_home(tmp_path / "work" / ".prefect")
    monkeypatch.setenv(workdir_server.IDLE_ENV, "600")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    record, started = workdir_server.ensure(home)
    auth_file = server_record.auth_path(home)
    auth = auth_file.read_text()
    env = {"PREFECT_HOME": str(home), "MICROSTOCK_PREFECT_SERVER": None, "PREFECT_API_URL": None}
    try:
        for how, damage in {**DAMAGE, "another string": lambda p: p.write_text(ANOTHER + "\n")}.items():
            damage(auth_file)
            # Not after a wait: the short limit would give "has not answered for 5 s" there.
            with pytest.raises(ConfigError, match=f"{auth_file} .*`microstock server stop`") as raised:
                workdir_server.ensure(home, startup_timeout_s=5)
            assert auth.strip() not in raised.value.message and ANOTHER not in raised.value.message, how
            status = run_microstock("server", "status", env=env)
            assert status.exit_code == 2, (how, status.output)
            lines = status.output.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: the workdir's Prefect server"), (how, lines)
            listed = run_microstock("server", "list", env=env)  # listed running: it is
            assert listed.exit_code == 0 and f"running  {record.url}" in listed.output, (how, listed.output)
            if auth_file.is_dir():
                auth_file.rmdir()
            auth_file.write_text(auth)  # mended by hand: the running server is usable again
            assert workdir_server.ensure(home) == (record, False), how
        aside = sorted(p.name for p in home.glob("server.auth.damaged-*"))
        assert len(aside) == 3, aside  # cut short, a bad byte, a folder: set aside, never deleted

        # The way on the line gives: `server stop`, then the next command starts it with a new auth string.
        DAMAGE["cut short"](auth_file)
        stopped = run_microstock("server", "stop", env=env)
        assert stopped.exit_code == 0 and f"stopped the server on {record.url}" in stopped.output, stopped.output
        back, started = workdir_server.ensure(home)
        new = server_record.auth_string(home)
        assert started and AUTH_SHAPE.fullmatch(new) and new != auth.strip()
        assert workdir_server.running(home) == back
    finally:
        workdir_server.stop(home, force=True)


@pytest.mark.parametrize("raw, why", [(b"microstock:\xff" + b"x" * 31, "not UTF-8 (byte 11)"),
                                      (b"microstock:cut-sho", "ValueError: not `microstock:` and 32 URL-safe "
                                                             "characters (18 characters)")],
                         ids=["a bad byte", "cut short"])
def test_a_damaged_auth_file_with_no_server_is_set_aside_and_made_anew(tmp_path, caplog, raw, why):
    home = tmp_path / ".prefect"
    home.mkdir()
    server_record.auth_path(home).write_bytes(raw)
    assert server_record.auth_string(home) is None
    assert f"server.auth is damaged ({why}): set aside as server.auth.damaged-" in caplog.text
    assert "cut-sho" not in caplog.text and "xxxx" not in caplog.text, "the secret is never quoted"
    server_record.ensure_auth(home)
    assert AUTH_SHAPE.fullmatch(server_record.auth_string(home))
    (aside,) = home.glob("server.auth.damaged-*")
    assert aside.read_bytes() == raw
