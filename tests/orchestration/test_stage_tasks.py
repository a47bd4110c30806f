"""The stages' task runs as Prefect shows them: the stock-batch flow uploading to real SFTP, FTPS and FTP
servers at once, in a Prefect test harness.

Agencies run in parallel, one task run each (``upload-<agency>``): its state
message says the counts, its ``upload-<agency>`` table what became of each
file, and its logs say each file's outcome once, from whichever worker thread
sent it; a refused login stops only its agency; the next run sends only what
is missing.
"""

from __future__ import annotations

import json
import logging
import time

from tasks.core.workdir import Workdir
from tasks.observe.events import MemoryEvents
from tests.fakes import prefect_api
from tests.fakes.ledger import ledger_entries
from tests.fakes.servers import PASSWORD, ftp_server, ftps_cert, ftps_server, sftp_server  # noqa: F401  (fixtures)


def run_batch(wd: Workdir, **params) -> tuple[dict, str]:
    from flows.stock_batch import stock_batch

    state = stock_batch(workdir=str(wd.root), return_state=True, **params)
    assert state.is_completed() or state.name == "Incomplete", state.message  # Incomplete: uploads left pending
    return state.result(raise_on_failure=False), str(state.state_details.flow_run_id)


def task_runs(flow_run_id: str, expected: int) -> dict[str, tuple[str, str, str]]:
    """name -> (state type, state message, id) of the flow run's task runs, once the server has ``expected`` finished.

    The server records task runs from events, a little after the flow returns.
    """
    finished = frozenset({"COMPLETED", "FAILED", "CRASHED"})
    runs = prefect_api.task_runs_once_finished(flow_run_id, expected, states=finished)
    return {run.name: (run.state.type.value, run.state.message or "", str(run.id)) for run in runs if run.state}


def upload_table(flow_run_id: str, agency: str) -> dict[str, dict]:
    """file -> row of the flow run's ``upload-<agency>`` table."""
    [artifact] = prefect_api.artifacts(flow_run_id, key=f"upload-{agency}")
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    return {row["file"]: row for row in rows}


def file_lines(flow_run_id: str) -> list[tuple[str, str | None]]:
    """(message, task run id) of the flow run's log lines from the upload stage's logger (the server keeps to that
    logger: a flow run's whole log could pass the server's page limit)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId, LogFilterName
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]),
                                          name=LogFilterName(any_=["tasks.stages.upload"])))
    return [(log.message, str(log.task_run_id) if log.task_run_id else None) for log in logs]


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
    entries = ledger_entries(workdir.ledger)
    assert sorted((e.agency, e.filename) for e in entries) == sorted(
        (a, n) for a in ("adobe", "vecteezy") for n in assets)
    # stages (assets, pack, csv, zip) + 3 describe + 3 agencies, and nothing else: no run per file
    runs = task_runs(flow_run_id, expected=4 + 3 + 3)
    assert {n for n in runs if n.startswith("upload")} == {"upload-adobe", "upload-vecteezy", "upload-dreamstime"}
    for agency, server in (("adobe", sftp_server), ("vecteezy", ftps_server)):
        assert runs[f"upload-{agency}"][:2] == ("COMPLETED", "3 uploaded")
        rows = upload_table(flow_run_id, agency)
        assert set(rows) == set(ready)
        for row in rows.values():  # a row per file, saying where it went
            assert row["what happened"] == "uploaded" and row["detail"].startswith(f"→ {server.url()}"), row
    state, message, _ = runs["upload-dreamstime"]
    assert state == "FAILED" and message.startswith("3 not tried — stopped: "), message  # red: it stopped
    rows = upload_table(flow_run_id, "dreamstime")
    assert sorted(r["what happened"] for r in rows.values()) == ["left pending", "not tried", "not tried"], rows
    assert "not-the-password" not in json.dumps(rows) + message  # the refused login tried one file; no password shown

    # the password is fixed: the next run sends dreamstime's files and nothing else
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    second, _ = run_batch(workdir, count=3)
    assert second["uploaded_now"] == {"adobe": 0, "vecteezy": 0, "dreamstime": 3}
    assert {p.name: p.read_bytes() for p in ftp_server.root.iterdir()} == ready
    for server in (sftp_server, ftps_server, ftp_server):
        assert all(len(server.log.received(name)) == 1 for name in ready)
    assert len(ledger_entries(workdir.ledger)) == 9


def test_parallel_file_workers_log_each_file_once_in_the_agencys_run_and_its_table_says_what_was_left_pending(
        prefect_harness, workdir, monkeypatch):
    from tasks.transports import targets

    opened = []

    class CountedFolder(targets.LocalFolder):  # the real local target, its connections counted: one per worker
        def connect(self):
            # A worker connects when it takes its first file. A local folder answers at once, so under load one
            # worker sent two files before the third thread started, which then had none and opened nothing
            # (CI, 2026-12-03): a connection takes as long as a server's login, so each worker has a file.
            time.sleep(0.3)
            super().connect()
            opened.append(self.folder)

    monkeypatch.setattr(targets, "LocalFolder", CountedFolder)
    workdir.config_file.write_text("[agencies.adobe]\nparallel_files = 3\n")
    first, _ = run_batch(workdir, count=4, agencies=["vecteezy"])
    ready = sorted(p.name for p in (workdir.packs / "ready").iterdir())
    assert len(ready) == 4 and first["uploaded_now"] == {"vecteezy": 4}
    blocker = workdir.outbox("adobe") / ready[0]  # a different, larger file already on the "server"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"x" * ((workdir.packs / "ready" / ready[0]).stat().st_size + 1))

    opened.clear()
    summary, flow_run_id = run_batch(workdir, count=4, agencies=["adobe"])
    assert summary["uploaded_now"] == {"adobe": 3}
    assert opened == [workdir.outbox("adobe")] * 3  # three workers, a connection each
    runs = task_runs(flow_run_id, expected=4 + 1)  # the stages + the agency's run (nothing new to describe)
    state, message, agency_run = runs["upload-adobe"]
    assert (state, message) == ("COMPLETED", "3 uploaded · 1 left pending")
    rows = upload_table(flow_run_id, "adobe")
    assert set(rows) == set(ready)
    assert rows[ready[0]]["what happened"] == "left pending" and "larger file" in rows[ready[0]]["detail"]
    assert all(rows[name]["what happened"] == "uploaded" for name in ready[1:])
    lines = [(m, run) for m, run in file_lines(flow_run_id) if any(name in m for name in ready)]
    for name in ready:  # each file's outcome said once, in the agency's run, whichever worker thread sent it
        said = [(m, run) for m, run in lines if name in m]
        assert len(said) == 1 and said[0][1] == agency_run, said
    assert f"adobe: {ready[0]} left pending: " in " ".join(m for m, _ in lines)


def test_an_upload_table_the_server_refuses_does_not_fail_the_agency(workdir, monkeypatch, caplog):
    """The upload-<agency> table is a view written after the uploads: when the server refuses it, the agency's
    run still ends Completed with its counts and the files stay recorded (the ledger is the truth)."""
    from tasks.core.settings import AgencySettings
    from tasks.orchestration import stage_tasks
    from tests.stages.test_upload import ledger_names, make_items

    def refused(*args, **kwargs):
        raise RuntimeError("503 Service Unavailable")

    monkeypatch.setattr(stage_tasks, "publish_upload", refused)
    caplog.set_level(logging.WARNING, logger=stage_tasks.__name__)
    items = make_items(workdir, 2)
    target = AgencySettings(target=workdir.outbox("adobe").as_uri())
    state = stage_tasks.upload_stage.fn(workdir, "adobe", items, target, MemoryEvents())
    assert state.is_completed() and state.message.startswith("2 uploaded"), state.message
    assert ledger_names(workdir, "adobe") == [i.name for i in items]
    assert "upload-adobe: the table of its files was not published (RuntimeError)" in caplog.text
