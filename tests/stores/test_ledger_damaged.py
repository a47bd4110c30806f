"""Damaged ledger lines (a NUL byte, a garbled agency, a torn line cut inside its digest) make the files they
name "maybe done": the upload stage checks the server before anything is sent, and never simply sends them."""

from __future__ import annotations

import hashlib
import os

from tasks.core.records import UploadItem
from tasks.stages.upload import upload_agency
from tasks.stores.ledger import Ledger
from tasks.stores.ledger_lines import HEADER

AGENCIES = ("adobe", "vecteezy", "dreamstime")


def sha(n: int | str) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def write(path, *lines: str, torn: str = "") -> None:
    path.write_bytes((HEADER + "".join(line + "\n" for line in lines) + torn).encode("utf-8", "surrogateescape"))


def test_a_nul_byte_in_the_agency_makes_the_file_maybe_done_not_dropped(tmp_path):
    """Regression: the line was dropped as an unknown agency, so the upload read as not done."""
    path = tmp_path / "uploads.ledger"
    write(path, f"2026-12-01T10:00:00Z\tado\x00be\tsea.jpg\t{sha(1)}\t/sea.jpg")
    state = Ledger(path, AGENCIES).read()
    assert not state.is_done("adobe", sha(1))
    doubt = state.doubt_about("adobe", sha(1), "sea.jpg")
    assert doubt is not None and doubt.line == 4 and doubt.agencies == {"adobe"}
    assert state.doubt_about("vecteezy", sha(1), "sea.jpg") is None
    assert "may record an upload of sea.jpg" in state.problems[0][1]


def test_a_garbled_agency_field_doubts_every_agency_and_another_workdirs_agency_none(tmp_path):
    path = tmp_path / "uploads.ledger"
    write(path,
          f"2026-12-01T10:00:00Z\t\x00\x00\x00\tsea.jpg\t{sha(1)}\t/sea.jpg",  # agency gone: any of them
          f"2026-12-01T10:00:00Z\tadobee\tsky.jpg\t{sha(2)}x\t/sky.jpg",  # near adobe, digest spoiled: by name
          f"2026-12-01T10:00:00Z\tmystock\tfield.jpg\t{sha(3)}\t/field.jpg")  # a clean name of another agency
    state = Ledger(path, AGENCIES).read()
    assert all(state.doubt_about(a, "0" * 64, "sea.jpg") for a in AGENCIES)
    assert state.doubt_about("adobe", sha(9), "sky.jpg") and not state.doubt_about("vecteezy", sha(9), "sky.jpg")
    assert not any(state.doubt_about(a, sha(3), "field.jpg") for a in AGENCIES)
    assert len(state.problems) == 3


def test_a_torn_last_line_cut_inside_its_digest_names_its_file(tmp_path):
    """Regression: a line is written only after the upload was confirmed, yet a tail cut inside the digest
    was ignored and the file read as not uploaded."""
    path = tmp_path / "uploads.ledger"
    write(path, torn=f"2026-12-01T10:00:00Z\tadobe\tsea.jpg\t{sha(1)[:30]}")
    state = Ledger(path, AGENCIES).read()
    assert state.doubt_about("adobe", sha(1), "sea.jpg")
    write(path, torn="2026-12-01T10:00:00Z\tadobe\tsea.j")  # the name itself cut: names nothing
    assert Ledger(path, AGENCIES).read().doubts == []


def test_a_maybe_done_file_is_checked_on_the_server_first(workdir):
    """On the server whole: recorded without sending. Not there: not sent, pending with the line's number.
    Files no damaged line names go as usual."""
    ready = workdir.packs / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    items = []
    for name in ("there.jpg", "gone.jpg", "fine.jpg"):
        (ready / name).write_bytes(os.urandom(5000))
        items.append(UploadItem(name, ready / name, sha(name)))
    outbox = workdir.outbox("adobe")
    outbox.mkdir(parents=True, exist_ok=True)
    (outbox / "there.jpg").write_bytes((ready / "there.jpg").read_bytes())
    write(workdir.ledger, f"2026-12-01T10:00:00Z\tad\x00obe\tthere.jpg\t{sha('there.jpg')}\t/there.jpg",
          f"2026-12-01T10:00:00Z\tadobe\x00\tgone.jpg\t{sha('gone.jpg')}\t/gone.jpg")
    result = upload_agency(workdir, "adobe", items)
    assert result.reconciled == ["there.jpg"] and result.uploaded == ["fine.jpg"]
    assert list(result.failed) == ["gone.jpg"] and "damaged line 5" in result.failed["gone.jpg"]
    assert not (outbox / "gone.jpg").exists()
    again = upload_agency(workdir, "adobe", items)  # still not sent on the next run
    assert list(again.failed) == ["gone.jpg"] and not (outbox / "gone.jpg").exists()
