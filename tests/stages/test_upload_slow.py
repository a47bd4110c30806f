"""A slow FTP server that writes in bursts (vsftpd with ``local_max_rate``): every file received once.

The server reads its data connection at a fixed rate and writes to disk in
64 KiB bursts, as vsftpd does; on loopback the client hands a whole file to
the kernel long before the server has read it. Proof is the server's own
"file received" events: exactly one complete receipt per file.
"""

from __future__ import annotations

import pytest

from tasks.core.settings import AgencySettings
from tasks.stages.upload import upload_agency
from tests.fakes.servers import PASSWORD, ftp_server  # noqa: F401  (fixture)
from tests.stages.test_upload import ledger_names, make_items

#: ~2 minutes asleep between them, at the servers' pace: handed out first (tests/worker_groups.py), beside the work
#: of the other workers, not last, where they were the suite's tail (docs/BENCHMARKS.md, stop 51).
pytestmark = pytest.mark.waits


@pytest.fixture
def slow_server(ftp_server, monkeypatch):
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    ftp_server.faults.write_block = 64 * 1024
    return ftp_server


def assert_each_received_once(server, items) -> None:
    for item in items:
        received = server.log.received(item.name)
        assert [e.size for e in received] == [item.path.stat().st_size], (item.name, server.log.events)
    assert server.log.aborted() == []


def test_a_slow_bursty_server_gets_each_file_once(workdir, slow_server):
    """The issue's case scaled down: what is in flight takes the server far longer than the timeout."""
    slow_server.faults.rate = 60_000
    items = make_items(workdir, 2, size=500_000)
    report = upload_agency(workdir, "dreamstime", items,
                           AgencySettings(target=slow_server.url(), timeout_s=5, retry_delay_s=0.05))
    assert_each_received_once(slow_server, items)
    assert sorted(report.uploaded) == [i.name for i in items] and report.failed == {}
    assert slow_server.log.stor_commands == 2
    assert ledger_names(workdir, "dreamstime") == [i.name for i in items]


def test_a_file_still_arriving_after_a_late_reply_is_not_sent_again(workdir, slow_server):
    """The server's buffer takes the whole file at once, so even the drained wait ends before its
    reply: the file is watched on a new connection and confirmed whole, never sent twice."""
    slow_server.faults.rate = 15_000  # 64 KiB on disk every 4.4 s, as vsftpd wrote them
    slow_server.faults.receive_buffer = 4 * 1024 * 1024
    items = make_items(workdir, 2, size=200_000)
    report = upload_agency(workdir, "dreamstime", items,
                           AgencySettings(target=slow_server.url(), timeout_s=2, retry_delay_s=0.05))
    assert_each_received_once(slow_server, items)
    assert slow_server.log.stor_commands == 2
    assert sorted(report.uploaded) == [i.name for i in items] and report.failed == {}
    assert ledger_names(workdir, "dreamstime") == [i.name for i in items]


def test_default_settings_at_vsftpd_pace_give_one_receipt(workdir, slow_server):
    """The issue's own case: 15 KB/s, 64 KiB bursts, default settings (a 30 s timeout), and more in
    flight than the server reads in that time."""
    slow_server.faults.rate = 15_000
    slow_server.faults.receive_buffer = 4 * 1024 * 1024
    [item] = make_items(workdir, 1, size=520_000)
    report = upload_agency(workdir, "dreamstime", [item], AgencySettings(target=slow_server.url()))
    assert_each_received_once(slow_server, [item])
    assert slow_server.log.stor_commands == 1
    assert report.uploaded == [item.name] and report.failed == {}
    assert ledger_names(workdir, "dreamstime") == [item.name]


def test_a_file_left_still_arriving_by_one_run_is_not_sent_again_by_the_next(workdir, slow_server):
    """A run gives up on a file whose reply is late (one attempt) and ends; the next run, without that
    run's memory, finds the copy partial and must still wait for it: the send's age is in the workdir."""
    slow_server.faults.rate = 14_000  # 64 KiB bursts 4.7 s apart: a bare 3 s look calls it dead
    slow_server.faults.receive_buffer = 4 * 1024 * 1024
    items = make_items(workdir, 2, size=200_000)
    settings = AgencySettings(target=slow_server.url(), timeout_s=5, retry_delay_s=0.05)
    first = upload_agency(workdir, "dreamstime", items[:1], settings.model_copy(update={"attempts": 1}))
    assert list(first.failed) == [items[0].name] and "may still be arriving" in first.failed[items[0].name]
    second = upload_agency(workdir, "dreamstime", items, settings)
    assert_each_received_once(slow_server, items)
    assert slow_server.log.stor_commands == 2
    assert second.reconciled == [items[0].name] and second.uploaded == [items[1].name]
    assert ledger_names(workdir, "dreamstime") == [i.name for i in items]
    assert list((workdir.root / ".uploads-in-flight" / "dreamstime").iterdir()) == []  # recorded: no markers left


def test_a_transfer_that_died_in_flight_is_sent_again_once_known_dead(workdir, ftp_server, monkeypatch):
    """The reply is late and the server's copy stops growing short of the whole: the first transfer is
    dead, so the file is sent again — once — and the second transfer gives the one complete receipt."""
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    ftp_server.faults.receive_buffer = 4 * 1024 * 1024
    ftp_server.faults.hang_after = [100_000]
    [item] = make_items(workdir, 1, size=300_000)
    report = upload_agency(workdir, "dreamstime", [item],
                           AgencySettings(target=ftp_server.url(), timeout_s=2, retry_delay_s=0.05))
    assert report.uploaded == [item.name] and report.failed == {}
    assert ftp_server.log.stor_commands == 2
    assert [e.size for e in ftp_server.log.received(item.name)] == [item.path.stat().st_size]
    assert ftp_server.file(item.name).read_bytes() == item.path.read_bytes()
    assert ledger_names(workdir, "dreamstime") == [item.name]
