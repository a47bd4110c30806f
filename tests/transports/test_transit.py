"""The markers of sends in flight (``.uploads-in-flight/<agency>/<name>``): written whole, read without a traceback."""

from __future__ import annotations

import multiprocessing
import resource
import signal
import time
from pathlib import Path

import pytest

from tasks.core.errors import StageStopped
from tasks.transports.transit import SendsInFlight


def _begin_with_room_for(folder: str, name: str, room: int) -> None:
    """In a child process: begin a send when files may grow to only ``room`` bytes (the disk fills mid-write)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (room, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        SendsInFlight(Path(folder)).begin(name)
    except StageStopped:  # the marker cannot be written: no send begins
        raise SystemExit(3) from None


def test_a_marker_cut_short_mid_write_leaves_the_earlier_one_whole(tmp_path):
    sends = SendsInFlight(tmp_path / "in-flight")
    sends.begin("a.jpg")
    earlier = (tmp_path / "in-flight" / "a.jpg").read_bytes()
    child = multiprocessing.get_context("fork").Process(target=_begin_with_room_for,
                                                         args=(str(sends.folder), "a.jpg", 5))
    child.start()
    child.join(10)
    assert child.exitcode == 3  # the write failed part-way
    assert (tmp_path / "in-flight" / "a.jpg").read_bytes() == earlier  # not 5 bytes of a time long ago
    assert [p.name for p in sends.folder.iterdir()] == ["a.jpg"]  # no temp file left either



def test_a_fresh_marker_reads_as_just_begun(tmp_path):
    sends = SendsInFlight(tmp_path)
    sends.begin("a.jpg")
    began = sends.began("a.jpg")
    assert began is not None and 0 <= time.monotonic() - began < 5
    sends.end("a.jpg")
    assert sends.began("a.jpg") is None


@pytest.mark.parametrize("damage", [b"", b"\xff\xfe1", b"1.5e9 garbage", b"inf", b"-inf", b"nan", b"1764851", "folder"])
def test_a_damaged_marker_reads_as_no_marker(tmp_path, damage):
    sends = SendsInFlight(tmp_path)
    marker = tmp_path / "a.jpg"
    if damage == "folder":
        marker.mkdir()
    else:
        marker.write_bytes(damage)
    assert sends.began("a.jpg") is None


def test_a_folder_in_a_markers_place_is_set_aside_and_the_send_marked(tmp_path, caplog):
    sends = SendsInFlight(tmp_path)
    (tmp_path / "a.jpg").mkdir()
    sends.begin("a.jpg")
    assert sends.began("a.jpg") is not None
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("a.jpg.damaged-")]
    assert aside.is_dir() and f"{tmp_path / 'a.jpg'} is a folder where a file belongs: set aside as {aside.name}" \
        in caplog.text  # the one whole-file writer's warning (tasks/core/files.py)


def test_a_folder_in_a_markers_place_when_its_send_is_recorded_is_set_aside(tmp_path):
    """A file found whole on the server is recorded without a send of this run: its marker is dropped then."""
    (tmp_path / "a.jpg").mkdir()
    SendsInFlight(tmp_path).end("a.jpg")
    [aside] = tmp_path.iterdir()
    assert aside.name.startswith("a.jpg.damaged-") and aside.is_dir()


def test_the_temp_files_a_killed_run_left_are_cleared_and_every_marker_kept(tmp_path):
    """A run killed while writing a marker leaves ``.<name>.<8 random>.tmp`` (or ``.<hash>.<8 random>.tmp`` for a
    long name); the next upload start removes those, never a marker, a folder or anything else."""
    sends = SendsInFlight(tmp_path / "in-flight")
    sends.begin("a.jpg")
    sends.begin("b.jpg.12345678.tmp")  # a marker whose name looks like one: upload names never start with a dot
    stale = [".a.jpg.k2x_9abc.tmp", ".b.jpg.0123abcd.tmp", ".0123456789abcdef.zzzzzzzz.tmp"]
    for name in stale:
        (sends.folder / name).write_bytes(b"17")
    (sends.folder / ".c.jpg.12345678.tmp").mkdir()  # not a file: left
    (sends.folder / "notes.tmp").write_bytes(b"x")  # no dot first: not ours to remove
    assert sends.clear_temp_files() == 3
    assert sorted(p.name for p in sends.folder.iterdir()) == [
        ".c.jpg.12345678.tmp", "a.jpg", "b.jpg.12345678.tmp", "notes.tmp"]
    assert sends.began("a.jpg") is not None
    assert SendsInFlight(tmp_path / "none").clear_temp_files() == 0  # no folder yet: nothing to do
