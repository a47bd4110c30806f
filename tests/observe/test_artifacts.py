"""The ``upload-<agency>`` table and the agency's state message, from one agency's report."""

from __future__ import annotations

from tasks.core.records import FileOutcome
from tasks.core.reports import AgencyUpload
from tasks.observe.artifacts import upload_message, upload_rows


def test_a_row_per_file_in_name_order_saying_what_happened_and_why():
    result = AgencyUpload(uploaded=["b.jpg"], reconciled=["c.jpg"], already=["a.jpg"], failed={"d.jpg": "too big"})
    tried = [("b.jpg", FileOutcome("uploaded", "→ sftp://host/b.jpg (10 bytes, 0.1 s)")),
             ("d.jpg", FileOutcome("failed", "too big")),
             ("c.jpg", FileOutcome("reconciled", "already on the server whole (9 bytes)"))]
    assert upload_rows(result, tried) == [
        {"file": "a.jpg", "what happened": "already in the ledger", "detail": ""},
        {"file": "b.jpg", "what happened": "uploaded", "detail": "→ sftp://host/b.jpg (10 bytes, 0.1 s)"},
        {"file": "c.jpg", "what happened": "reconciled", "detail": "already on the server whole (9 bytes)"},
        {"file": "d.jpg", "what happened": "left pending", "detail": "too big"}]
    assert upload_message(result) == "1 uploaded · 1 reconciled · 1 already in the ledger · 1 left pending"


def test_a_stopped_agency_says_why_and_which_files_it_never_tried():
    result = AgencyUpload(not_tried=["a.jpg", "b.jpg"], stopped="login refused")
    tried = [("a.jpg", FileOutcome("failed", "not sent: adobe stopped — login refused"))]
    assert [(r["file"], r["what happened"], r["detail"]) for r in upload_rows(result, tried)] == [
        ("a.jpg", "left pending", "not sent: adobe stopped — login refused"),
        ("b.jpg", "not tried", "the agency stopped: login refused")]
    assert upload_message(result) == "2 not tried — stopped: login refused"
    assert upload_message(AgencyUpload()) == "nothing to upload"
