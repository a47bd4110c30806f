"""write_zip: sorted entries, fixed timestamps, identical bytes, ZIP64 when large, atomic."""

from __future__ import annotations

import struct
import zipfile

import pytest

from tasks.images.batch_zip import FIXED_TIME, write_zip


def files(tmp_path):
    (tmp_path / "b.jpg").write_bytes(b"\xff\xd8" + bytes(range(256)) * 40)
    (tmp_path / "a.csv").write_text("Filename,Title\nb.jpg,Bee\n" * 50, encoding="utf-8")
    return {"ready/b.jpg": tmp_path / "b.jpg", "csv/a.csv": tmp_path / "a.csv"}


def test_entries_sorted_with_fixed_time_and_mode(tmp_path):
    target = tmp_path / "out" / "batch.zip"
    write_zip(target, files(tmp_path))
    with zipfile.ZipFile(target) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["csv/a.csv", "ready/b.jpg"]
        assert all(i.date_time == FIXED_TIME for i in infos)
        assert all(i.external_attr >> 16 == 0o100644 for i in infos)
        assert [i.compress_type for i in infos] == [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED]
        assert zf.read("ready/b.jpg") == (tmp_path / "b.jpg").read_bytes()
        assert zf.testzip() is None


def test_same_entries_same_bytes_whatever_the_file_times(tmp_path):
    entries = files(tmp_path)
    write_zip(tmp_path / "one.zip", entries)
    for p in entries.values():
        p.touch()  # newer mtime: must not reach the archive
    write_zip(tmp_path / "two.zip", dict(reversed(list(entries.items()))))
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()


def test_large_entries_are_written_as_zip64(tmp_path, monkeypatch):
    # Lower zipfile's 4 GiB limit instead of writing 4 GiB in a unit test.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 5000)
    target = tmp_path / "batch.zip"
    write_zip(target, files(tmp_path))
    data = target.read_bytes()
    # Local header of the first entry (csv/a.csv, 1 300 bytes: small) and of ready/b.jpg (10 242 bytes: large).
    with zipfile.ZipFile(target) as zf:
        big = zf.getinfo("ready/b.jpg")
        small = zf.getinfo("csv/a.csv")
    def extra_ids(offset):
        name_len, extra_len = struct.unpack("<HH", data[offset + 26: offset + 30])
        extra = data[offset + 30 + name_len: offset + 30 + name_len + extra_len]
        ids, i = [], 0
        while i + 4 <= len(extra):
            hid, size = struct.unpack("<HH", extra[i:i + 4])
            ids.append(hid)
            i += 4 + size
        return ids
    assert 0x0001 in extra_ids(big.header_offset)      # ZIP64 extended information
    assert 0x0001 not in extra_ids(small.header_offset)
    monkeypatch.undo()
    with zipfile.ZipFile(target) as zf:
        assert zf.read("ready/b.jpg") == (tmp_path / "b.jpg").read_bytes()


def test_failure_leaves_the_old_archive_and_no_temp_file(tmp_path):
    target = tmp_path / "batch.zip"
    write_zip(target, files(tmp_path))
    before = target.read_bytes()
    with pytest.raises(FileNotFoundError):
        write_zip(target, {"ready/gone.jpg": tmp_path / "gone.jpg"})
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.jpg", "batch.zip"]
