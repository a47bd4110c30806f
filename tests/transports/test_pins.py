"""``ftps_known_certs`` is a trust file: any damage stops the connection before the password, never re-pins.

The real FTPS server on 127.0.0.1 (``tests/fakes/servers.py``) presents a
self-signed certificate; a pin file that holds another certificate's pin for
it, damaged, must not read as "never seen" (that would pin whatever the server
presents: a man in the middle trusted silently).
"""

from __future__ import annotations

import multiprocessing
import os

import pytest

from tasks.core.errors import StageStopped
from tasks.transports.ftp import FtpTarget
from tasks.transports.pins import CertificatePins, fingerprint
from tests.fakes.servers import PASSWORD, USER, ftps_cert, ftps_server  # noqa: F401  (fixtures)

WHERE = "ftps://me@h:21"
OTHER = fingerprint(b"the certificate pinned first")


def ftps(server, pins: CertificatePins) -> FtpTarget:
    return FtpTarget("127.0.0.1", server.port, USER, PASSWORD, "", tls=True, timeout=5, pins=pins)


def stopped(pins: CertificatePins, host: str = "h", port: int = 21, der: bytes = b"now") -> StageStopped:
    with pytest.raises(StageStopped) as info:
        pins.check(WHERE, host, port, der)
    assert info.value.error_class == "tls:pins"
    return info.value


def test_a_hand_edited_pin_for_the_server_stops_it_before_the_password_and_pins_nothing(ftps_server, tmp_path):
    path = tmp_path / "ftps_known_certs"
    path.write_text(f"127.0.0.1:{ftps_server.port}  {OTHER}\n", encoding="ascii")  # two spaces: hand-edited
    before = path.read_bytes()
    with pytest.raises(StageStopped) as info:
        ftps(ftps_server, CertificatePins(path)).connect()
    assert info.value.error_class == "tls:pins"
    assert f"{path} is damaged at line 1" in info.value.message
    assert f"correct or delete line 1 of {path}" in info.value.message
    assert ftps_server.log.passwords == 0
    assert path.read_bytes() == before  # not re-pinned with the certificate the server presents now


def test_a_folder_in_the_pin_files_place_stops_the_connection_not_a_network_retry(ftps_server, tmp_path):
    path = tmp_path / "w" / "ftps_known_certs"
    path.mkdir(parents=True)
    with pytest.raises(StageStopped) as info:
        ftps(ftps_server, CertificatePins(path)).connect()
    assert info.value.error_class == "tls:pins" and "a folder, not a file" in info.value.message
    assert str(path) in info.value.message and ftps_server.log.passwords == 0
    assert path.is_dir() and list(path.parent.iterdir()) == [path]  # never set aside


def test_a_pin_file_damaged_by_an_editor_stops_the_agency_when_the_certificate_is_swapped(
        workdir, ftps_server, monkeypatch, tmp_path):
    """A run pins the server; the contributor notes which server it is after the pin; an impostor's certificate
    comes. Before: the noted line was dropped, the impostor pinned and sent the files and the password."""
    from tasks.core.settings import AgencySettings
    from tasks.stages.upload import upload_agency
    from tests.fakes.servers import make_self_signed_cert
    from tests.stages.test_upload import make_items

    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    settings = AgencySettings(target=ftps_server.url(), timeout_s=5, trust_unknown_host=True)
    assert upload_agency(workdir, "vecteezy", make_items(workdir, 1), settings).uploaded == ["img_000.jpg"]
    path = workdir.root / "ftps_known_certs"
    path.write_bytes(path.read_bytes().replace(b"\n", b" # vecteezy\n"))
    damaged, passwords = path.read_bytes(), ftps_server.log.passwords
    (tmp_path / "impostor").mkdir()
    ftps_server.use_certificate(make_self_signed_cert(tmp_path / "impostor"))
    report = upload_agency(workdir, "vecteezy", make_items(workdir, 2, prefix="more"), settings)
    assert report.uploaded == [] and sorted(report.not_tried) == ["more_000.jpg", "more_001.jpg"]
    assert f"correct or delete line 1 of {path}" in report.stopped and "one space between" in report.stopped
    assert "\n" not in report.stopped and PASSWORD not in report.stopped
    assert ftps_server.log.passwords == passwords and path.read_bytes() == damaged


GOOD = f"h:21 {OTHER}\n"


@pytest.mark.parametrize(("content", "line", "why"), [
    (f"h:21  {OTHER}\n", 1, "one space between"),
    (f"{GOOD}h:22 {OTHER[:40]}\n", 2, "32 hex pairs"),  # cut short
    (f"h:21 {OTHER}\r\r\n", 1, "one space between"),
    (f"h:21\t{OTHER}\n", 1, "one space between"),
    (f"# pins\n{GOOD}", 1, "one space between"),
    (f" {GOOD}", 1, "one space between"),
    (f"h:21 {OTHER} old\n", 1, "one space between"),
    (f"{GOOD}h:21 {fingerprint(b'another')}\n", 2, "a second, different pin for h:21 (the first is line 1)"),
    (GOOD.encode("ascii") + b"caf\xc3\xa9:21 " + OTHER.encode("ascii") + b"\n", 2, "byte 4 is not ASCII"),
])
def test_any_damaged_line_stops_with_its_number_and_the_file_is_left_as_it_was(tmp_path, content, line, why):
    path = tmp_path / "ftps_known_certs"
    raw = content if isinstance(content, bytes) else content.encode("ascii")
    path.write_bytes(raw)
    err = stopped(CertificatePins(path), "h", 21, b"the certificate pinned first")  # even the pinned one
    assert f"{path} is damaged at line {line} (" in err.message and why in err.message, err.message
    assert f"correct or delete line {line} of {path}" in err.message
    assert "\n" not in err.message and "Traceback" not in err.message
    assert path.read_bytes() == raw


def test_a_pin_file_that_cannot_be_opened_stops_with_one_line(tmp_path):
    path = tmp_path / "ftps_known_certs"
    path.symlink_to(path)  # a link to itself: open fails (ELOOP), as an unreadable file does
    err = stopped(CertificatePins(path))
    assert str(path) in err.message and "cannot be used" in err.message and "readable, writable file" in err.message


def test_empty_lines_windows_line_ends_upper_case_hex_and_a_last_line_without_newline_are_no_damage(tmp_path):
    path = tmp_path / "ftps_known_certs"
    upper = "SHA256:" + OTHER[len("SHA256:"):].upper()
    path.write_text(f"\r\nh:21 {upper}", encoding="ascii")  # hand-written: Windows line ends, none at the end
    pins = CertificatePins(path)
    pins.check(WHERE, "h", 21, b"the certificate pinned first")  # the same certificate: passes
    pins.check(WHERE, "::1", 990, b"new")  # first use: pinned on a line of its own
    lines = path.read_bytes().decode("ascii").split("\n")
    assert lines == ["\r", f"h:21 {upper}", f"::1:990 {fingerprint(b'new')}", ""]
    with pytest.raises(StageStopped, match="CHANGED"):
        pins.check(WHERE, "::1", 990, b"another")
    with pytest.raises(StageStopped, match="CHANGED"):
        pins.check(WHERE, "h", 21, b"another")


def _pin(path: str) -> None:
    CertificatePins(__import__("pathlib").Path(path)).check(WHERE, "h", 21, b"cert")


def test_processes_pinning_at_once_write_one_line(tmp_path):
    path = tmp_path / "ftps_known_certs"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_pin, args=(str(path),)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(10)
    assert [p.exitcode for p in procs] == [0] * 4
    assert path.read_text(encoding="ascii") == f"h:21 {fingerprint(b'cert')}\n"
    assert os.stat(path).st_size == len(f"h:21 {fingerprint(b'cert')}\n")
