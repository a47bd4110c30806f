"""The upload stage over real servers: ledger gate, reconciliation, retries, stops, parallel files."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from tasks.core.records import UploadItem
from tasks.core.settings import AgencySettings
from tasks.observe import progress
from tasks.stages.upload import upload_agency
from tasks.transports.ftp import FtpTarget
from tasks.transports.local import LocalFolder
from tests.fakes.ledger import ledger_entries
from tests.fakes.servers import (  # noqa: F401  (fixtures)
    PASSWORD,
    USER,
    ftp_server,
    ftps_cert,
    ftps_server,
    known_hosts,
    sftp_server,
)


def make_items(wd, n: int, size: int = 40_000, prefix: str = "img") -> list[UploadItem]:
    """Upload-ready files in packs/ready, each with the digest of a (pretend) source image."""
    ready = wd.packs / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(n):
        path = ready / f"{prefix}_{i:03d}.jpg"
        path.write_bytes(os.urandom(size + i))
        items.append(UploadItem(path.name, path, hashlib.sha256(f"source-{prefix}-{i}".encode()).hexdigest()))
    return items


def ledger_names(wd, agency: str) -> list[str]:
    return sorted(e.filename for e in ledger_entries(wd.ledger) if e.agency == agency)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def ftp_settings(ftp_server, monkeypatch):
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    return AgencySettings(target=ftp_server.url(), timeout_s=5, retry_delay_s=0.01)


def test_default_outbox_then_a_rerun_sends_nothing(workdir):
    items = make_items(workdir, 3)
    first = upload_agency(workdir, "adobe", items)
    assert sorted(first.uploaded) == [i.name for i in items] and first.failed == {} and first.stopped is None
    for item in items:
        assert (workdir.outbox("adobe") / item.name).read_bytes() == item.path.read_bytes()
    second = upload_agency(workdir, "adobe", items)
    assert second.uploaded == [] and sorted(second.already) == [i.name for i in items]
    assert ledger_names(workdir, "adobe") == [i.name for i in items]


def test_each_tried_files_outcome_is_told_once_and_logged_once(workdir, caplog):
    items = make_items(workdir, 5)
    blocker = workdir.outbox("adobe") / items[0].name  # a different, larger file already there: left pending
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"x" * (items[0].path.stat().st_size + 1))
    upload_agency(workdir, "adobe", items[3:])  # two already in the ledger: not tried, not told
    told = []
    with caplog.at_level("INFO", logger="tasks.stages.upload"):
        report = upload_agency(workdir, "adobe", items, AgencySettings(parallel_files=2),
                               on_file=lambda item, outcome: told.append((item.name, outcome.kind)))
    assert sorted(told) == [(items[0].name, "failed"), (items[1].name, "uploaded"), (items[2].name, "uploaded")]
    assert sorted(report.uploaded) == [items[1].name, items[2].name] and list(report.failed) == [items[0].name]
    for item in items[:3]:
        said = [r for r in caplog.records if item.name in r.getMessage()]
        assert len(said) == 1 and said[0].name == "tasks.stages.upload", [r.getMessage() for r in said]
    assert f"adobe: {items[0].name} left pending: " in caplog.text and "larger file" in caplog.text
    assert f"adobe: uploaded {items[1].name} → " in caplog.text


def test_over_ftp_each_file_is_sent_once_and_recorded_once(workdir, ftp_server, ftp_settings):
    items = make_items(workdir, 4)
    report = upload_agency(workdir, "dreamstime", items, ftp_settings)
    assert sorted(report.uploaded) == [i.name for i in items]
    assert report.target == ftp_server.url()
    for item in items:
        assert [e.size for e in ftp_server.log.received(item.name)] == [item.path.stat().st_size]
    assert upload_agency(workdir, "dreamstime", items, ftp_settings).uploaded == []
    assert ftp_server.log.stor_commands == 4
    assert ledger_names(workdir, "dreamstime") == [i.name for i in items]


def test_the_key_is_the_source_image_not_the_file_name(workdir, ftp_settings, ftp_server):
    [item] = make_items(workdir, 1)
    upload_agency(workdir, "dreamstime", [item], ftp_settings)
    renamed = item.path.with_name("renamed.jpg")
    renamed.write_bytes(item.path.read_bytes() + b"re-packed metadata")
    again = upload_agency(workdir, "dreamstime", [UploadItem("renamed.jpg", renamed, item.sha256)], ftp_settings)
    assert again.uploaded == [] and again.already == ["renamed.jpg"]
    twins = make_items(workdir, 2, prefix="twin")
    same_source = [twins[0], UploadItem(twins[1].name, twins[1].path, twins[0].sha256)]
    report = upload_agency(workdir, "dreamstime", same_source, ftp_settings)
    assert report.uploaded == [twins[0].name] and report.already == [twins[1].name]
    assert ftp_server.log.stor_commands == 2


def test_reconcile_records_a_file_already_on_the_server_without_sending_it(workdir, ftp_server, ftp_settings):
    """The crash window: the server has the whole file, the ledger line was never written."""
    items = make_items(workdir, 3)
    ftp_server.file(items[0].name).write_bytes(items[0].path.read_bytes())  # whole
    ftp_server.file(items[1].name).write_bytes(items[1].path.read_bytes()[:5000])  # partial
    report = upload_agency(workdir, "dreamstime", items, ftp_settings, settle_s=0.05)
    assert report.reconciled == [items[0].name]
    assert sorted(report.uploaded) == [items[1].name, items[2].name]
    assert ftp_server.log.received(items[0].name) == []  # never sent again
    assert ftp_server.file(items[1].name).read_bytes() == items[1].path.read_bytes()
    assert ledger_names(workdir, "dreamstime") == [i.name for i in items]


def test_a_larger_different_file_on_the_server_is_not_overwritten(workdir, ftp_server, ftp_settings):
    [item] = make_items(workdir, 1)
    ftp_server.file(item.name).write_bytes(b"z" * 100_000)
    report = upload_agency(workdir, "dreamstime", [item], ftp_settings)
    assert "larger file" in report.failed[item.name]
    assert ftp_server.file(item.name).read_bytes() == b"z" * 100_000
    assert ledger_names(workdir, "dreamstime") == []


def test_transient_faults_are_retried_on_a_fresh_connection(workdir, ftp_server, ftp_settings):
    items = make_items(workdir, 2)
    ftp_server.faults.refuse_next = ["421 Too many users, closing control connection.", "452 Disk full."]
    ftp_server.faults.drop_after = [0, 10_000]  # applied to the STORs that get through
    sleeps = Sleeps()
    settings = ftp_settings.model_copy(update={"attempts": 5, "retry_delay_s": 0.1})
    report = upload_agency(workdir, "dreamstime", items, settings, sleep=sleeps, settle_s=0)
    assert sorted(report.uploaded) == [i.name for i in items] and report.failed == {}
    backoff = [s for s in sleeps if s]
    assert len(backoff) == 4 and all(0.05 <= s <= 0.8 for s in backoff)  # doubling with jitter
    assert backoff[3] >= 0.1 * 2 ** 3 * 0.5
    assert sleeps.count(0) == 2  # the partial files left by the two drops were watched before replacing
    for item in items:
        assert len(ftp_server.log.received(item.name)) == 1
        assert ftp_server.file(item.name).read_bytes() == item.path.read_bytes()


def test_a_file_that_keeps_failing_is_left_pending_and_the_rest_go_on(workdir, ftp_server, ftp_settings):
    items = make_items(workdir, 3)
    ftp_server.faults.refuse_next = ["452 Insufficient storage space."] * 3  # all attempts of the first file
    report = upload_agency(workdir, "dreamstime", items, ftp_settings, sleep=Sleeps())
    assert list(report.failed) == [items[0].name]
    assert "gave up after 3 attempts" in report.failed[items[0].name] and "452" in report.failed[items[0].name]
    assert sorted(report.uploaded) == [items[1].name, items[2].name]
    assert ledger_names(workdir, "dreamstime") == [items[1].name, items[2].name]
    retry = upload_agency(workdir, "dreamstime", items, ftp_settings)  # the next run sends only it
    assert retry.uploaded == [items[0].name]


def test_a_refused_login_stops_the_agency_at_once_with_one_clear_message(workdir, ftp_server, monkeypatch):
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", "wrong-password-123")
    items = make_items(workdir, 5)
    sleeps = Sleeps()
    report = upload_agency(workdir, "dreamstime", items, AgencySettings(target=ftp_server.url(), timeout_s=5),
                           sleep=sleeps)
    assert report.uploaded == [] and report.failed == {}
    assert sorted(report.not_tried) == [i.name for i in items]
    assert "login refused" in report.stopped and "MICROSTOCK_DREAMSTIME_PASSWORD" in report.stopped
    assert "microstock-dreamstime-password" in report.stopped
    assert "wrong-password-123" not in report.stopped
    assert sleeps == []  # no retries of a refused login
    assert not workdir.ledger.exists() or ledger_names(workdir, "dreamstime") == []


def test_parallel_files_use_several_connections_and_send_each_once(workdir, ftp_server, ftp_settings):
    items = make_items(workdir, 9)
    opened = []

    def opener(agency, settings, wd):
        transport = FtpTarget("127.0.0.1", ftp_server.port, USER, PASSWORD, timeout=5)
        opened.append(transport)
        return transport

    ftp_server.faults.rate = 2_000_000
    report = upload_agency(workdir, "dreamstime", items, ftp_settings.model_copy(update={"parallel_files": 3}),
                           opener=opener)
    assert sorted(report.uploaded) == [i.name for i in items]
    assert len(opened) == 3
    for item in items:
        assert len(ftp_server.log.received(item.name)) == 1
    assert len(ledger_entries(workdir.ledger)) == 9


def test_sftp_through_the_factory_with_known_hosts(workdir, sftp_server, known_hosts, monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(known_hosts.read_text())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", PASSWORD)
    items = make_items(workdir, 3)
    report = upload_agency(workdir, "adobe", items, AgencySettings(target=sftp_server.url(), timeout_s=5))
    assert sorted(report.uploaded) == [i.name for i in items]
    for item in items:
        assert sftp_server.file(item.name).read_bytes() == item.path.read_bytes()
    assert all(e.remote_path.startswith(sftp_server.url()) for e in ledger_entries(workdir.ledger))


def test_sftp_unknown_host_stops_the_agency(workdir, sftp_server, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", PASSWORD)
    items = make_items(workdir, 2)
    report = upload_agency(workdir, "adobe", items, AgencySettings(target=sftp_server.url(), timeout_s=5))
    assert "not in" in report.stopped and "known_hosts" in report.stopped
    assert sorted(report.not_tried) == [i.name for i in items]


def test_ftps_through_the_factory_verifies_the_certificate(workdir, ftps_server, ftps_cert, monkeypatch):
    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    monkeypatch.setenv("SSL_CERT_FILE", str(ftps_cert))  # the test CA, as a system CA would be
    items = make_items(workdir, 2)
    report = upload_agency(workdir, "vecteezy", items, AgencySettings(target=ftps_server.url(), timeout_s=5))
    assert sorted(report.uploaded) == [i.name for i in items]
    for item in items:
        assert ftps_server.file(item.name).read_bytes() == item.path.read_bytes()


def test_a_confirmed_file_that_vanished_stops_the_agency_and_is_not_resent(workdir, ftp_server, ftp_settings):
    handler = ftp_server._server.handler
    received = handler.on_file_received

    def moved_away(self, file):
        received(self, file)
        os.remove(file)

    handler.on_file_received = moved_away
    items = make_items(workdir, 3)
    report = upload_agency(workdir, "dreamstime", items, ftp_settings)
    assert "not there" in report.stopped and "remote_keeps_files" in report.stopped
    assert report.uploaded == [] and ftp_server.log.stor_commands == 1
    assert ledger_names(workdir, "dreamstime") == []
    trusting = upload_agency(workdir, "dreamstime", items,
                             ftp_settings.model_copy(update={"remote_keeps_files": False}))
    assert sorted(trusting.uploaded) == [i.name for i in items]


def test_bad_target_stops_only_with_a_message(workdir):
    report = upload_agency(workdir, "adobe", make_items(workdir, 1), AgencySettings(target="gopher://x/"))
    assert "agencies.adobe.target" in report.stopped and report.not_tried == ["img_000.jpg"]


def test_two_runs_uploading_at_once_the_second_waits_and_the_firsts_uploads_are_its_own(workdir):
    """Two runs started at once: the second waits while the first holds the agency (and says so), then finds what
    the first uploaded in the ledger — done, by the other run, nothing stopped — and sends only what it left.
    (It used to stop the agency: "Fix first … left pending" and exit 3, for files the first one uploaded.)"""
    items = make_items(workdir, 3)
    first_sending, go_on, second_waits = threading.Event(), threading.Event(), threading.Event()

    class Held(LocalFolder):
        def send(self, local, name):
            first_sending.set()
            go_on.wait()
            super().send(local, name)

    reports = {}

    def first() -> None:  # the first run has two of the files
        reports["first"] = upload_agency(workdir, "adobe", items[:2], opener=lambda a, s, wd: Held(wd.outbox(a)))

    def second() -> None:
        try:
            reports["second"] = upload_agency(workdir, "adobe", items)
        finally:
            second_waits.set()  # the old code did not wait: it returned at once

    def notice(text: str) -> None:
        if text == "adobe: another run is uploading there right now; waiting for it to finish":
            second_waits.set()

    runs = [threading.Thread(target=first), threading.Thread(target=second)]
    runs[0].start()
    first_sending.wait()  # the first run holds the agency
    progress.add_notice(notice)
    try:
        runs[1].start()
        second_waits.wait()
    finally:
        progress.remove_notice(notice)
    go_on.set()
    for run in runs:
        run.join()
    assert sorted(reports["first"].uploaded) == [items[0].name, items[1].name]
    after = reports["second"]
    assert after.stopped is None and after.failed == {} and after.not_tried == [], after
    assert sorted(after.by_other_run) == sorted(after.already) == [items[0].name, items[1].name]
    assert after.uploaded == [items[2].name], "what the first run left is this run's"
    assert ledger_names(workdir, "adobe") == [i.name for i in items], "each file recorded once"


def test_an_unwritable_ledger_stops_the_agency_after_the_upload(workdir, ftp_server, ftp_settings, monkeypatch):
    items = make_items(workdir, 2)
    workdir.ledger.write_text("")
    from tasks.core.errors import StoreUnavailable
    from tasks.stores import ledger as ledger_module

    def full(*args, **kwargs):
        raise StoreUnavailable(f"{workdir.ledger}: cannot append to the ledger (No space left on device)")

    record = ledger_module.Ledger.record
    monkeypatch.setattr(ledger_module.Ledger, "record", full)
    report = upload_agency(workdir, "dreamstime", items, ftp_settings)
    assert "No space left" in report.stopped and "next run finds it there" in report.stopped
    assert ftp_server.log.stor_commands == 1  # stopped after the first file
    monkeypatch.setattr(ledger_module.Ledger, "record", record)  # room again
    second = upload_agency(workdir, "dreamstime", items, ftp_settings)
    assert second.reconciled == [items[0].name] and second.uploaded == [items[1].name]


def test_nothing_pending_means_no_connection(workdir):
    def opener(*args):
        raise AssertionError("connected although nothing was pending")

    assert upload_agency(workdir, "adobe", [], opener=opener).uploaded == []


def test_an_unreachable_server_stops_the_agency_after_one_files_attempts(workdir, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    monkeypatch.setenv("MICROSTOCK_DREAMSTIME_PASSWORD", PASSWORD)
    items = make_items(workdir, 4)
    sleeps = Sleeps()
    report = upload_agency(workdir, "dreamstime", items,
                           AgencySettings(target=f"ftp://{USER}@127.0.0.1:{port}/", timeout_s=2, attempts=3),
                           sleep=sleeps)
    assert "cannot connect after 3 attempts" in report.stopped and "refused" in report.stopped
    assert sorted(report.not_tried) == [i.name for i in items] and report.failed == {}
    assert report.stopped_on in report.not_tried, "the file tried three times is told apart from the three never tried"
    assert len(sleeps) == 2  # one file's backoff, not four


@pytest.mark.parametrize("server_fixture, agency", [("ftp_server", "dreamstime"), ("sftp_server", "adobe")])
def test_a_missing_password_stops_before_connecting_and_names_where_to_set_it(
        workdir, prefect_harness, server_fixture, agency, request, monkeypatch):
    """No env var and no Secret block (the real lookup, against the test Prefect server): a
    configuration error naming both, found before any connection, so no empty password is sent."""
    server = request.getfixturevalue(server_fixture)
    monkeypatch.delenv(f"MICROSTOCK_{agency.upper()}_PASSWORD", raising=False)
    items = make_items(workdir, 3)
    report = upload_agency(workdir, agency, items,
                           AgencySettings(target=server.url(), timeout_s=5, parallel_files=2), sleep=Sleeps())
    assert f"MICROSTOCK_{agency.upper()}_PASSWORD" in report.stopped
    assert f"microstock-{agency}-password" in report.stopped
    assert sorted(report.not_tried) == [i.name for i in items] and report.failed == {}
    assert server.log.connections == 0 and server.log.passwords == 0


def test_an_unreachable_passive_port_stops_the_agency_after_the_set_number_of_files(workdir, ftp_server,
                                                                                    ftp_settings):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once closed
    ftp_server.faults.passive_port = closed
    items = make_items(workdir, 6)
    report = upload_agency(workdir, "dreamstime", items, ftp_settings, sleep=Sleeps())
    assert len(report.failed) == 3 and len(report.not_tried) == 3  # the default: 3 files alike
    assert all("passive data connection" in why for why in report.failed.values())
    assert "3 files in a row failed the same way" in report.stopped
    assert "passive data connection" in report.stopped and "firewall" in report.stopped and "NAT" in report.stopped
    assert ftp_server.log.stor_commands == 0 and ftp_server.log.received() == []
    ftp_server.faults.passive_port = None  # the firewall fixed: the next run sends all six
    assert sorted(upload_agency(workdir, "dreamstime", items, ftp_settings).uploaded) == [i.name for i in items]


def test_failures_of_a_files_own_do_not_stop_the_agency(workdir, ftp_server, ftp_settings):
    ftp_server.faults.refuse_next = ["553 File name not allowed."] * 3
    items = make_items(workdir, 5)
    report = upload_agency(workdir, "dreamstime", items,
                           ftp_settings.model_copy(update={"stop_after_same_failures": 2}))
    assert len(report.failed) == 3 and report.stopped is None and len(report.uploaded) == 2


@pytest.mark.parametrize("reply, cause", [("550 Permission denied.", "not permit writing"),
                                          ("452 Insufficient storage space.", "disk is full or over quota")])
def test_every_file_refused_alike_stops_the_agency(workdir, ftp_server, ftp_settings, reply, cause):
    ftp_server.faults.refuse_next = [reply] * 20
    items = make_items(workdir, 5)
    report = upload_agency(workdir, "dreamstime", items, ftp_settings, sleep=Sleeps())
    assert len(report.failed) == 3 and len(report.not_tried) == 2 and report.uploaded == []
    assert cause in report.stopped and reply[:3] in report.stopped


def test_the_target_is_reported_even_when_nothing_was_pending(workdir, sftp_server):
    """The summary named the local outbox for an sftp target when there was nothing to send."""
    report = upload_agency(workdir, "adobe", [], AgencySettings(target=sftp_server.url()))
    assert report.target == sftp_server.url() and report.stopped is None
    assert sftp_server.log.connections == 0


def test_ftps_trusted_on_first_use_is_pinned_once_and_a_swapped_certificate_is_refused_before_the_password(
        workdir, ftps_server, monkeypatch, tmp_path):
    from tests.fakes.servers import make_self_signed_cert

    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    settings = AgencySettings(target=ftps_server.url(), timeout_s=5, trust_unknown_host=True, parallel_files=4)
    first = make_items(workdir, 4)
    report = upload_agency(workdir, "vecteezy", first, settings)
    assert sorted(report.uploaded) == [i.name for i in first]
    pins = (workdir.root / "ftps_known_certs").read_text().splitlines()
    assert len(pins) == 1 and pins[0].startswith(f"127.0.0.1:{ftps_server.port} SHA256:")  # once, not four times
    passwords = ftps_server.log.passwords
    (tmp_path / "impostor").mkdir()
    ftps_server.use_certificate(make_self_signed_cert(tmp_path / "impostor"))
    more = make_items(workdir, 2, prefix="more")
    swapped = upload_agency(workdir, "vecteezy", more, settings)
    assert "CHANGED" in swapped.stopped and "ftps_known_certs" in swapped.stopped and PASSWORD not in swapped.stopped
    assert swapped.uploaded == [] and sorted(swapped.not_tried) == [i.name for i in more]
    assert ftps_server.log.passwords == passwords  # refused before any password was sent
    assert ftps_server.log.stor_commands == 4


def test_ftps_ca_file_trusts_exactly_that_certificate(workdir, ftps_server, ftps_cert, monkeypatch, tmp_path):
    from tests.fakes.servers import make_self_signed_cert

    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    settings = AgencySettings(target=ftps_server.url(), timeout_s=5, ca_file=str(ftps_cert))
    [item] = make_items(workdir, 1)
    assert upload_agency(workdir, "vecteezy", [item], settings).uploaded == [item.name]
    (tmp_path / "other").mkdir()
    ftps_server.use_certificate(make_self_signed_cert(tmp_path / "other"))
    [other] = make_items(workdir, 1, prefix="other")
    refused = upload_agency(workdir, "vecteezy", [other], settings)
    assert "cannot be verified" in refused.stopped and refused.uploaded == []


@pytest.mark.parametrize("server_fixture, agency", [("ftp_server", "dreamstime"), ("sftp_server", "adobe")])
def test_a_full_disk_leaves_no_zero_byte_or_partial_file_and_stops_the_agency(
        workdir, server_fixture, agency, request, monkeypatch, known_hosts, tmp_path):
    server = request.getfixturevalue(server_fixture)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(known_hosts.read_text())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(f"MICROSTOCK_{agency.upper()}_PASSWORD", PASSWORD)
    items = make_items(workdir, 5)
    server.faults.disk_free = 60_000  # the first file fits, the second is cut short, then nothing
    server.faults.disk_full_reply = "451 Failure writing to local file."  # as vsftpd says it (FTP only)
    report = upload_agency(workdir, agency, items, AgencySettings(target=server.url(), timeout_s=5), sleep=Sleeps())
    assert report.uploaded == [items[0].name]
    assert sorted(p.name for p in server.root.iterdir()) == [items[0].name]  # nothing zero-byte, nothing partial
    assert all("deleted" in why for why in report.failed.values()), report.failed
    assert report.stopped and "disk is full or over quota" in report.stopped and len(report.failed) == 3


def test_sftp_trust_on_first_use_with_parallel_files_writes_known_hosts_once_and_logs_the_key_once(
        workdir, sftp_server, monkeypatch, tmp_path, caplog):
    home = tmp_path / "tofu-home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MICROSTOCK_ADOBE_PASSWORD", PASSWORD)
    items = make_items(workdir, 8)
    with caplog.at_level("WARNING", logger="microstock.transports"):
        report = upload_agency(workdir, "adobe", items, AgencySettings(target=sftp_server.url(), timeout_s=5,
                                                                      trust_unknown_host=True, parallel_files=4))
    assert sorted(report.uploaded) == [i.name for i in items]
    assert (home / ".ssh" / "known_hosts").read_text() == sftp_server.known_hosts_line()  # one line, not four
    accepted = [r for r in caplog.records if "accepted the host key" in r.getMessage()]
    assert len(accepted) == 1 and sftp_server.host_key.fingerprint in accepted[0].getMessage()


def test_a_missing_remote_folder_stops_the_agency_naming_the_target_once(workdir, ftp_server, ftp_settings):
    settings = ftp_settings.model_copy(update={"target": ftp_server.url("no-such-folder")})
    report = upload_agency(workdir, "dreamstime", make_items(workdir, 2), settings)
    assert report.stopped.count(ftp_server.url("no-such-folder")) == 1 and "no-such-folder" in report.stopped


def test_an_unforeseen_error_with_one_file_leaves_it_pending_and_never_shows_the_password(
        workdir, ftp_server, ftp_settings, caplog):
    """A bug or library error no transport maps (here a RuntimeError echoing the password in another case) with
    one file: that file is left pending with one redacted line, the others go on, and no log holds the password."""
    items = make_items(workdir, 3)

    class Buggy(FtpTarget):
        def put(self, local, name):
            if name == items[1].name:
                raise RuntimeError(f"library bug while sending as {USER}:{PASSWORD.upper()}")
            return super().put(local, name)

    def opener(agency, settings, wd):
        return Buggy("127.0.0.1", ftp_server.port, USER, PASSWORD, timeout=5)

    with caplog.at_level("INFO"):
        report = upload_agency(workdir, "dreamstime", items, ftp_settings, opener=opener)
    assert sorted(report.uploaded) == [items[0].name, items[2].name] and report.stopped is None
    assert list(report.failed) == [items[1].name]
    assert "RuntimeError" in report.failed[items[1].name] and "***" in report.failed[items[1].name]
    assert ledger_names(workdir, "dreamstime") == [items[0].name, items[2].name], "the failed file is not recorded"
    shown = caplog.text + str(report.failed)
    assert PASSWORD.lower() not in shown.lower(), "the password reached a log line or the report"


def test_an_upload_start_clears_the_temp_files_a_killed_run_left_among_the_markers(workdir):
    folder = workdir.root / ".uploads-in-flight" / "adobe"
    folder.mkdir(parents=True)
    (folder / ".img_000.jpg.ab12cd34.tmp").write_bytes(b"1764")  # killed while writing its marker
    (folder / "earlier.jpg").write_bytes(b"1764000000.0\n")  # an earlier run's send not yet recorded: kept
    items = make_items(workdir, 1)
    assert upload_agency(workdir, "adobe", items).uploaded == ["img_000.jpg"]
    assert [p.name for p in folder.iterdir()] == ["earlier.jpg"]
