"""The stock-batch flow uploading to real SFTP, FTPS and FTP servers at once, in a Prefect test harness.

Agencies run in parallel, one task run each (``upload-<agency>``); a refused
login stops only its agency; the next run sends only what is missing.
"""

from __future__ import annotations

import asyncio

from tasks.ledger import Ledger
from tasks.workdir import Workdir
from tests.servers import PASSWORD, ftp_server, ftps_cert, ftps_server, sftp_server  # noqa: F401  (fixtures)


def run_batch(wd: Workdir, **params) -> tuple[dict, str]:
    from flows.stock_batch import stock_batch

    state = stock_batch(workdir=str(wd.root), return_state=True, **params)
    assert state.is_completed(), state.message
    return state.result(), str(state.state_details.flow_run_id)


def task_run_names(flow_run_id: str) -> set[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter

    async def names():
        async with get_client() as client:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                               task_run_filter=TaskRunFilter())
            return {run.name for run in runs}

    return asyncio.run(names())


def test_batch_uploads_over_sftp_ftps_and_ftp_and_a_refused_login_stops_only_its_agency(
        prefect_harness, workdir, sftp_server, ftps_server, ftps_cert, ftp_server, monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(sftp_server.known_hosts_line())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SSL_CERT_FILE", str(ftps_cert))
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", PASSWORD)
    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", "not-the-password")
    workdir.config_file.write_text(f"""
[agencies.adobe]
target = "{sftp_server.url()}"
timeout_s = 10

[agencies.vecteezy]
target = "{ftps_server.url()}"
timeout_s = 10

[agencies.dreamstime]
target = "{ftp_server.url()}"
timeout_s = 10
""")
    summary, flow_run_id = run_batch(workdir, count=3)
    assets = sorted(p.name for p in workdir.assets.glob("*.jpg"))
    assert len(assets) == 3
    ready = {p.name: p.read_bytes() for p in (workdir.packs / "ready").iterdir()}
    for server in (sftp_server, ftps_server):
        assert {p.name: p.read_bytes() for p in server.root.iterdir()} == ready
    assert list(ftp_server.root.iterdir()) == []  # the refused login sent nothing
    assert summary["uploaded_now"] == {"adobe": 3, "vecteezy": 3, "dreamstime": 0}
    assert summary["targets"]["adobe"] == sftp_server.url()
    assert list(summary["upload_stopped"]) == ["dreamstime"]  # the refused login reaches the summary, once
    assert "not-the-password" not in summary["upload_stopped"]["dreamstime"]
    assert summary["upload_not_tried"]["dreamstime"] >= 2
    entries = Ledger(workdir.ledger).read().entries
    assert sorted((e.agency, e.filename) for e in entries) == sorted(
        (a, n) for a in ("adobe", "vecteezy") for n in assets)
    assert {"upload-adobe", "upload-vecteezy", "upload-dreamstime"} <= task_run_names(flow_run_id)

    # the password is fixed: the next run sends dreamstime's files and nothing else
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    second, _ = run_batch(workdir, count=3)
    assert second["uploaded_now"] == {"adobe": 0, "vecteezy": 0, "dreamstime": 3}
    assert {p.name: p.read_bytes() for p in ftp_server.root.iterdir()} == ready
    for server in (sftp_server, ftps_server, ftp_server):
        assert all(len(server.log.received(name)) == 1 for name in ready)
    assert len(Ledger(workdir.ledger).read().entries) == 9
