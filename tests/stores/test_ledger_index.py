"""The digest index beside the ledger: a read with it says exactly what a full read says.

The index is built only for long ledgers (``INDEX_MIN_LINES``); these tests
lower that threshold so small ledgers exercise it.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tasks.stores.ledger as ledger_module
from tasks.agencies.catalog import agency_names
from tasks.stores.ledger import Ledger
from tasks.stores.ledger_index import MAGIC, DoneDigests, SortedDigests, index_path
from tests.fakes.ledger import done_keys

#: The index counts every agency, in list order: adobe, vecteezy, dreamstime, then the ones no test here records.
OTHER_AGENCIES = len(agency_names()) - 3


def sha(n: int | str) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


@pytest.fixture
def small_threshold(monkeypatch):
    """Index every ledger of 3 lines or more, and rewrite it after 3 more."""
    monkeypatch.setattr(ledger_module, "INDEX_MIN_LINES", 3)


def full_read(path: Path, tmp: Path):
    """What reading the same bytes gives with no index anywhere near (and none written)."""
    copy = tmp / "reference" / path.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(path.read_bytes() if path.exists() else b"")
    saved, ledger_module.INDEX_MIN_LINES = ledger_module.INDEX_MIN_LINES, 10**12
    try:
        return Ledger(copy).read()
    finally:
        ledger_module.INDEX_MIN_LINES = saved


def assert_same(indexed, full) -> None:
    assert indexed.problems == full.problems
    assert set(indexed.done) == set(full.done)
    for agency, digests in full.done.items():
        got = indexed.done[agency]
        assert set(got) == set(digests) and len(got) == len(digests)  # no digest counted twice
        assert got == digests
        for digest in digests:
            assert digest in got
        for other in (sha("never"), sha("never").upper(), "", "x" * 64, None):
            assert (other in got) == (other in digests)


def header_of(path: Path) -> dict:
    raw = index_path(path).read_bytes()
    size, _ = struct.unpack("<II", raw[len(MAGIC):len(MAGIC) + 8])
    return json.loads(raw[len(MAGIC) + 8:len(MAGIC) + 8 + size])


def rewrite_header(path: Path, **changes) -> None:
    """Change header fields of the index and keep its CRC right, as an index of another version would be."""
    raw = index_path(path).read_bytes()
    size, _ = struct.unpack("<II", raw[len(MAGIC):len(MAGIC) + 8])
    header = json.loads(raw[len(MAGIC) + 8:len(MAGIC) + 8 + size]) | changes
    new = json.dumps(header).encode()
    body = raw[len(MAGIC) + 8 + size:]
    index_path(path).write_bytes(MAGIC + struct.pack("<II", len(new), zlib.crc32(body, zlib.crc32(new))) + new + body)


def line(agency: str, n: int | str, name: str = "f.jpg") -> str:
    return f"2026-11-30T00:00:00Z\t{agency}\t{name}\t{sha(n)}\t/r/{name}\n"


# --- the differential property --------------------------------------------------------------------

_LINES = {
    "clean": lambda i: line("adobe", i % 7),
    "clean-other": lambda i: line(("vecteezy", "dreamstime")[i % 2], i % 5),
    "crlf": lambda i: line("dreamstime", i % 6).replace("\n", "\r\n"),
    "upper-hex": lambda i: f"2026-11-30T00:00:00Z\tvecteezy\tu{i}.jpg\t{sha(i % 4).upper()}\t/r\n",
    "spaces": lambda i: f"2026-11-30T00:00:00Z adobe s{i}.jpg {sha(i % 3)} /r\n",
    "unknown-agency": lambda i: f"2026-11-30T00:00:00Z\tistock\tf{i}.jpg\t{sha(i)}\t/r\n",
    "garbage": lambda i: f"garbage {i}\n",
    "bad-utf8": lambda i: "2026-11-30T00:00:00Z\tadobe\tcaf".encode() + b"\xe9\xff" + f"\t{sha(i % 9)}\t/r\n".encode(),
    "comment": lambda i: f"# note {i}\n",
    "blank": lambda i: "\n",
}
_TORN = [b"", b"2026-11-30T00:00:00Z\tado",
         ("2026-11-30T00:00:00Z\tvecteezy\tt.jpg\t" + sha("torn") + "\t/r/t").encode(),
         b"# a comment cut sh", b"\xe2\x82"]


def _lines(kinds: list[str], first: int) -> bytes:
    out = b""
    for i, kind in enumerate(kinds, start=first):
        made = _LINES[kind](i)
        out += made if isinstance(made, bytes) else made.encode("utf-8")
    return out


_edit = st.one_of(
    st.tuples(st.just("append"), st.lists(st.sampled_from(sorted(_LINES)), max_size=8), st.sampled_from(_TORN)),
    st.tuples(st.just("record"), st.sampled_from(["adobe", "vecteezy", "dreamstime"]), st.integers(0, 12)),
    st.tuples(st.just("same-length"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete-line"), st.integers(0, 10**6)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("index-flip"), st.integers(0, 10**6)),
    st.tuples(st.just("index-truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("index-version")),
    st.tuples(st.just("index-garbage")),
)


def _apply(edit: tuple, path: Path) -> None:
    data = path.read_bytes()
    kind = edit[0]
    if kind == "append":
        path.write_bytes(data + _lines(edit[1], 1000) + edit[2])
    elif kind == "record":
        Ledger(path).record(edit[1], f"r{edit[2]}.jpg", sha(edit[2]), "/r")
    elif kind == "same-length" and data:
        at = edit[1] % len(data)
        path.write_bytes(data[:at] + bytes([edit[2]]) + data[at + 1:])
    elif kind == "delete-line" and data.count(b"\n"):
        lines = data.split(b"\n")
        del lines[edit[1] % (len(lines) - 1)]
        path.write_bytes(b"\n".join(lines))
    elif kind == "truncate":
        path.write_bytes(data[:edit[1] % (len(data) + 1)])
    elif kind.startswith("index-") and index_path(path).exists():
        raw = bytearray(index_path(path).read_bytes())
        if kind == "index-flip":
            raw[edit[1] % len(raw)] ^= 0x5A
        elif kind == "index-truncate":
            del raw[edit[1] % len(raw):]
        elif kind == "index-version":
            rewrite_header(path, version=2)
            return
        else:
            raw = bytearray(b"not an index at all")
        index_path(path).write_bytes(bytes(raw))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(first=["clean"] * 4, torn=_TORN[2], edits=[("truncate", 10**6 - 1)])
@example(first=["clean", "crlf", "clean"], torn=b"", edits=[("delete-line", 1), ("record", "adobe", 1)])
@given(first=st.lists(st.sampled_from(sorted(_LINES)), max_size=12), torn=st.sampled_from(_TORN),
       edits=st.lists(_edit, max_size=4))
def test_a_read_with_the_index_says_what_a_full_read_says(small_threshold, tmp_path_factory, first, torn, edits):
    tmp = tmp_path_factory.mktemp("index")
    path = tmp / "uploads.ledger"
    path.write_bytes(_lines(first, 0) + torn)
    assert_same(Ledger(path).read(), full_read(path, tmp))  # builds the index (3 lines or more)
    for edit in edits:
        _apply(edit, path)
        assert_same(Ledger(path).read(), full_read(path, tmp))
    assert_same(Ledger(path).read(), full_read(path, tmp))  # and again, with whatever index the last read left


# --- the promises, one by one ---------------------------------------------------------------------


def test_the_index_is_written_only_for_long_ledgers_and_covers_whole_lines(tmp_path, small_threshold):
    path = tmp_path / "uploads.ledger"
    path.write_text(line("adobe", 1) + line("adobe", 2))
    Ledger(path).read()
    assert not index_path(path).exists()  # 2 lines: not worth a file
    torn = "2026-11-30T00:00:00Z\tadobe\tt.jpg\t" + sha("t") + "\t/r"
    path.write_text(line("adobe", 1) + line("adobe", 2) + line("vecteezy", 3) + torn)
    state = Ledger(path).read()
    assert state.is_done("adobe", sha("t")) and state.problems[-1][0] == 4  # the torn tail counts, as without index
    header = header_of(path)
    assert header["covers"] == len((line("adobe", 1) + line("adobe", 2) + line("vecteezy", 3)).encode())
    assert header["lines"] == 3 and header["counts"] == [2, 1, 0] + [0] * OTHER_AGENCIES  # never past the torn tail
    assert isinstance(Ledger(path).read().done["adobe"], DoneDigests)


def test_the_index_can_be_read_by_whoever_can_read_the_ledger(tmp_path, small_threshold):
    path = tmp_path / "uploads.ledger"
    path.write_text("".join(line("adobe", n) for n in range(4)))
    path.chmod(0o640)
    Ledger(path).read()
    assert index_path(path).stat().st_mode & 0o777 == 0o640


def test_appends_after_indexing_are_seen_and_counted_once(tmp_path, small_threshold):
    ledger = Ledger(tmp_path / "uploads.ledger")
    for n in range(4):
        ledger.record("adobe", f"{n}.jpg", sha(n), "/r")
    ledger.read()
    before = index_path(ledger.path).stat().st_mtime_ns
    ledger.record("adobe", "again.jpg", sha(0), "/r")  # already in the index
    ledger.record("dreamstime", "new.jpg", sha("new"), "/r")
    state = ledger.read()
    assert state.is_done("dreamstime", sha("new")) and len(state.done_for("adobe")) == 4
    assert index_path(ledger.path).stat().st_mtime_ns == before  # 2 new lines: the index is left as it is
    ledger.record("vecteezy", "v.jpg", sha("v"), "/r")
    state = ledger.read()  # 3 new lines: rewritten to cover them
    assert header_of(ledger.path)["lines"] == 3 + 7 and header_of(ledger.path)["counts"] == [4, 1,
                                                                                             1] + [0] * OTHER_AGENCIES
    assert done_keys(state) == done_keys(full_read(ledger.path, tmp_path))


def test_deleting_a_line_by_hand_makes_that_upload_pending_again(tmp_path, small_threshold):
    path = tmp_path / "uploads.ledger"
    path.write_text("".join(line("adobe", n, f"{n}.jpg") for n in range(6)))
    assert Ledger(path).read().is_done("adobe", sha(2)) and index_path(path).exists()
    path.write_text("".join(line("adobe", n, f"{n}.jpg") for n in range(6) if n != 2))
    state = Ledger(path).read()
    assert not state.is_done("adobe", sha(2)) and len(state.done_for("adobe")) == 5
    assert header_of(path)["counts"][0] == 5  # rebuilt from the edited file


def test_an_edit_that_keeps_the_length_is_noticed(tmp_path, small_threshold):
    path = tmp_path / "uploads.ledger"
    text = "".join(line("adobe", n) for n in range(5))
    path.write_text(text)
    Ledger(path).read()
    path.write_text(text.replace("\tadobe\t", "\tadobx\t", 1))  # same size, first line now unknown agency
    state = Ledger(path).read()
    assert not state.is_done("adobe", sha(0)) and state.problems[0][0] == 1
    assert "unknown agency" in state.problems[0][1]


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "agencies", "empty", "folder"])
def test_a_damaged_index_is_never_trusted(tmp_path, small_threshold, damage):
    path = tmp_path / "uploads.ledger"
    path.write_text("".join(line("vecteezy", n) for n in range(50)) + "garbage\n")
    expected = full_read(path, tmp_path)
    Ledger(path).read()
    index = index_path(path)
    raw = bytearray(index.read_bytes())
    if damage == "flip":  # inside the digests: only the CRC can tell
        raw[-7] ^= 1
        index.write_bytes(bytes(raw))
    elif damage == "truncate":
        index.write_bytes(bytes(raw[: len(raw) - 32]))
    elif damage == "version":
        rewrite_header(path, version=9)
    elif damage == "agencies":  # made when the agencies were others: "unknown agency" lines may count now
        rewrite_header(path, agencies=["adobe", "vecteezy", "shutterstock"])
    elif damage == "empty":
        index.write_bytes(b"")
    else:  # not even a file: the index cannot be read nor replaced, and the read goes on
        index.unlink()
        index.mkdir()
    state = Ledger(path).read()
    assert_same(state, expected)
    assert not isinstance(state.done["vecteezy"], DoneDigests)  # read in full
    if damage != "folder":
        assert header_of(path)["counts"][1] == 50  # rebuilt
        assert isinstance(Ledger(path).read().done["vecteezy"], DoneDigests)


def test_a_short_ledger_drops_a_stale_index(tmp_path, small_threshold):
    path = tmp_path / "uploads.ledger"
    path.write_text("".join(line("adobe", n) for n in range(5)))
    Ledger(path).read()
    path.write_text(line("adobe", 9))
    assert done_keys(Ledger(path).read()) == {("adobe", sha(9))}
    assert not index_path(path).exists()


def test_done_digests_behave_like_a_read_only_set():
    indexed = SortedDigests.from_hex([sha(n) for n in range(300)])
    done = DoneDigests(indexed, [sha(1), sha("later")])
    assert len(done) == 301 and done == {sha(n) for n in range(300)} | {sha("later")}
    assert sha(299) in done and sha("later") in done and sha("no") not in done
    assert sha(5).upper() not in done and sha(5)[:-1] not in done and 5 not in done
    assert sorted(done) == sorted({sha(n) for n in range(300)} | {sha("later")})
    assert done & {sha(1), sha("no")} == {sha(1)}
    assert not hasattr(done, "add")
    merged = indexed.merged([sha("later"), sha(3)])
    assert len(merged) == 301 and merged.has(bytes.fromhex(sha("later"))) and merged.records == SortedDigests.from_hex(
        [sha(n) for n in range(300)] + [sha("later")]).records
