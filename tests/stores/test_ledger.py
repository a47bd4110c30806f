"""The plain-text ledger: appends from threads and processes, torn and garbage lines, hand edits."""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tasks.agencies.catalog import agency_names
from tasks.core.errors import StoreUnavailable
from tasks.stores.ledger import Ledger
from tasks.stores.ledger_lines import HEADER, parse_line
from tests.fakes.ledger import done_keys, ledger_entries


def sha(n: int | str) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_missing_file_is_an_empty_ledger(tmp_path):
    state = Ledger(tmp_path / "uploads.ledger").read()
    assert done_keys(state) == set() and state.problems == [] and ledger_entries(tmp_path / "uploads.ledger") == []


def test_record_writes_header_then_five_tab_separated_fields(tmp_path):
    ledger = Ledger(tmp_path / "uploads.ledger")
    ledger.record("adobe", "sunset 1.jpg", sha(1), "sftp://u@h:22/sunset 1.jpg")
    text = ledger.path.read_text()
    assert text.startswith(HEADER)
    [line] = data_lines(ledger.path)
    ts, agency, name, digest, remote = line.split("\t")
    assert ts.endswith("Z") and "T" in ts
    assert (agency, name, digest, remote) == ("adobe", "sunset 1.jpg", sha(1), "sftp://u@h:22/sunset 1.jpg")
    assert ledger.read().is_done("adobe", sha(1)) and not ledger.read().is_done("vecteezy", sha(1))


def test_fields_cannot_break_the_format(tmp_path):
    ledger = Ledger(tmp_path / "uploads.ledger")
    ledger.record("adobe", "evil\tname\n.jpg", sha(1), "/x\r\ny")
    [entry] = ledger_entries(ledger.path)
    assert entry.filename == "evil name .jpg" and entry.remote_path == "/x y"
    with pytest.raises(ValueError):
        ledger.record("adobe", "a.jpg", "not-a-digest", "/a")
    with pytest.raises(ValueError):
        ledger.record("adobe", " \t ", sha(2), "/a")


def test_concurrent_threads_lose_no_line_and_interleave_none(tmp_path):
    ledger = Ledger(tmp_path / "uploads.ledger")
    long_name = "x" * 3000  # lines longer than a pipe buffer's atomic size

    def writer(t: int) -> None:
        for i in range(50):
            ledger.record(("adobe", "vecteezy", "dreamstime")[i % 3], f"{long_name}_{t}_{i}.jpg", sha(f"{t}-{i}"), "/r")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = data_lines(ledger.path)
    assert len(lines) == 400
    for line in lines:
        parse_line(line, agency_names())  # every line whole
    state = ledger.read()
    assert state.problems == [] and len(done_keys(state)) == 400
    assert ledger.path.read_text().count(HEADER) == 1


def _process_writer(path: str, proc: int) -> None:
    ledger = Ledger(Path(path))
    for i in range(100):
        ledger.record("adobe", f"p{proc}_{i:03d}_" + "y" * 500 + ".jpg", sha(f"p{proc}-{i}"), "/r")


def test_concurrent_processes_lose_no_line_and_interleave_none(tmp_path):
    path = tmp_path / "uploads.ledger"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_writer, args=(str(path), p)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = data_lines(path)
    assert len(lines) == 400
    assert {parse_line(line, agency_names()).sha256 for line in lines} == {sha(f"p{p}-{i}") for p in range(4)
                                                                           for i in range(100)}
    assert path.read_text().count(HEADER) == 1


def test_torn_last_line_is_ignored_and_cut_by_the_next_append(tmp_path):
    ledger = Ledger(tmp_path / "uploads.ledger")
    ledger.record("adobe", "a.jpg", sha("a"), "/a")
    with open(ledger.path, "a") as fh:
        fh.write("2026-01-01T00:00:00Z\tadobe\tb.jpg\t" + sha("b")[:20])  # cut inside the digest
    state = ledger.read()
    assert state.done_for("adobe") == {sha("a")}
    [(number, reason)] = state.problems
    assert number == 5 and "torn last line" in reason
    ledger.record("adobe", "c.jpg", sha("c"), "/c")
    assert [parse_line(line, agency_names()).filename for line in data_lines(ledger.path)] == ["a.jpg", "c.jpg"]
    assert ledger.read().problems == []


def test_cut_off_line_that_names_its_key_counts_and_is_completed(tmp_path):
    """A line is written only after its upload was confirmed: if its digest survived, it was uploaded."""
    ledger = Ledger(tmp_path / "uploads.ledger")
    ledger.record("adobe", "a.jpg", sha("a"), "/a")
    with open(ledger.path, "a") as fh:
        fh.write("2026-01-01T00:00:00Z\tvecteezy\tb.jpg\t" + sha("b") + "\tftp://h/b.j")  # remote path cut
    state = ledger.read()
    assert state.is_done("vecteezy", sha("b"))
    assert "counts" in state.problems[0][1]
    ledger.record("adobe", "c.jpg", sha("c"), "/c")
    assert [parse_line(line, agency_names()).filename for line in data_lines(ledger.path)] == ["a.jpg", "b.jpg",
                                                                                               "c.jpg"]


def test_a_ledger_of_only_a_torn_line_gets_its_header_back(tmp_path):
    path = tmp_path / "uploads.ledger"
    path.write_text("2026-01-01T00:00:00Z\tado")
    Ledger(path).record("adobe", "a.jpg", sha("a"), "/a")
    assert path.read_text().startswith(HEADER) and len(data_lines(path)) == 1


def test_garbage_lines_are_reported_with_their_numbers_and_skipped(tmp_path):
    path = tmp_path / "uploads.ledger"
    good = f"2026-01-01T00:00:00Z\tadobe\ta.jpg\t{sha('a')}\t/a"
    path.write_text("\n".join([
        "# comment",
        good,
        "complete garbage",
        "2026-01-01T00:00:00Z\tadobe\tb.jpg\tNOT-HEX\t/b",
        f"2026-01-01T00:00:00Z\tadbe\tc.jpg\t{sha('c')}\t/c",  # typo in the agency
        "",
        "   ",
        "\x00\x00\x00",
    ]) + "\n")
    state = Ledger(path).read()
    assert done_keys(state) == {("adobe", sha("a"))}
    assert [n for n, _ in state.problems] == [3, 4, 5, 8]
    assert "expected 5" in state.problems[0][1] and "SHA-256" in state.problems[1][1]
    assert "unknown agency 'adbe'" in state.problems[2][1]


def test_hand_edits_that_still_name_agency_and_digest_count_as_done(tmp_path):
    """An editor that turned tabs into spaces, or upper case: better reported than uploaded twice."""
    path = tmp_path / "uploads.ledger"
    path.write_text("\n".join([
        f"2026-01-01T00:00:00Z    adobe    my photo.jpg    {sha('a')}    /x",
        f"2026-01-01T00:00:00Z\t Vecteezy \tb.jpg\t{sha('b').upper()}\t/b\r",
    ]) + "\n")
    state = Ledger(path).read()
    assert state.is_done("adobe", sha("a")) and state.is_done("vecteezy", sha("b"))
    [(number, reason)] = state.problems
    assert number == 1 and "tabs turned into spaces" in reason and "counts as done" in reason


def test_invalid_utf8_in_a_filename_does_not_lose_the_line(tmp_path):
    path = tmp_path / "uploads.ledger"
    path.write_bytes(b"2026-01-01T00:00:00Z\tadobe\tcaf\xe9.jpg\t" + sha("a").encode() + b"\t/a\n")
    state = Ledger(path).read()
    assert state.is_done("adobe", sha("a")) and state.problems == []


def test_a_full_disk_leaves_no_half_line(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "uploads.ledger")
    ledger.record("adobe", "a.jpg", sha("a"), "/a")
    before = ledger.path.read_bytes()
    import tasks.stores.ledger as module

    real_write = module.os.write

    def short_write(fd, data):
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(module.os, "write", short_write)
    with pytest.raises(StoreUnavailable, match="cannot append"):
        ledger.record("adobe", "b.jpg", sha("b"), "/b")
    monkeypatch.undo()
    assert ledger.path.read_bytes() == before


def test_unreadable_ledger_is_a_store_error(tmp_path):
    (tmp_path / "uploads.ledger").mkdir()  # a folder where the file should be
    with pytest.raises(StoreUnavailable):
        Ledger(tmp_path / "uploads.ledger").read()


def test_agency_lock_lets_one_run_upload_to_an_agency_at_a_time(tmp_path):
    """The second run waits its turn (told once, to say so), and has the agency once the first lets go."""
    ledger = Ledger(tmp_path / "uploads.ledger")
    other = Ledger(tmp_path / "uploads.ledger")
    waiting, holding = threading.Event(), threading.Event()

    def second_run() -> None:
        try:
            with other.agency_lock("adobe", waiting.set):
                holding.set()
        finally:
            waiting.set()  # never left waiting when the lock is not taken

    with ledger.agency_lock("adobe"):
        with other.agency_lock("vecteezy"):  # other agencies are free
            pass
        second = threading.Thread(target=second_run)
        second.start()
        waiting.wait()
        assert not holding.is_set(), "two runs held the agency at once"
    second.join()
    assert holding.is_set(), "the second run never had the agency"


_field = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=60, deadline=None)
@example(entries=[("adobe", " \t ", 1, "\x85"), ("vecteezy", "#x", 2, "")])
@given(entries=st.lists(st.tuples(st.sampled_from(["adobe", "vecteezy", "dreamstime"]), _field,
                                  st.integers(0, 50), _field), max_size=15))
def test_what_is_recorded_is_read_back(tmp_path_factory, entries):
    ledger = Ledger(tmp_path_factory.mktemp("prop") / "uploads.ledger")
    for agency, name, n, remote in entries:
        ledger.record(agency, name if name.strip() else "x", sha(n), remote)
    state = ledger.read()
    assert state.problems == []
    assert done_keys(state) == {(agency, sha(n)) for agency, _, n, _ in entries}


_KINDS = {
    "clean": lambda i: f"2026-11-30T00:00:00Z\tadobe\tf{i}.jpg\t{i:064x}\t/r/f{i}.jpg",
    "clean-other": lambda i: f"2026-11-30T00:00:00Z\tdreamstime\tf{i}.jpg\t{i:064x}\t/r/f{i}.jpg",
    "comment": lambda i: f"# note {i}",
    "blank": lambda i: "",
    "garbage": lambda i: f"garbage line {i}",
    "upper-hex": lambda i: f"2026-11-30T00:00:00Z\tvecteezy\tf{i}.jpg\t{i:064X}\t/r/f{i}.jpg",
    "spaces": lambda i: f"2026-11-30T00:00:00Z adobe f{i}.jpg {i:064x} /r/f{i}.jpg",
    "unknown-agency": lambda i: f"2026-11-30T00:00:00Z\tistock\tf{i}.jpg\t{i:064x}\t/r",
}


@settings(max_examples=150, deadline=None)
@given(kinds=st.lists(st.sampled_from(sorted(_KINDS)), max_size=30), torn=st.booleans())
def test_the_one_pass_read_agrees_with_the_hex_checking_read(tmp_path_factory, kinds, torn):
    path = tmp_path_factory.mktemp("ledger") / "uploads.ledger"
    text = "\n".join(_KINDS[k](i) for i, k in enumerate(kinds)) + ("" if torn or not kinds else "\n")
    path.write_text(text, encoding="utf-8")
    fast = Ledger(path).read()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("tasks.stores.ledger._all_hex", lambda text: False)  # as if a digest were not hex: the careful pass
        careful = Ledger(path).read()
    assert fast.done == careful.done
    assert fast.problems == careful.problems
