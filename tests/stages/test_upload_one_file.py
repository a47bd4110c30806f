"""An unforeseen failure uploading one file leaves that file pending with one line; the others go on."""

from __future__ import annotations

import hashlib
import os

from tasks.core.records import UploadItem
from tasks.stages.upload import upload_agency
from tasks.transports.targets import open_transport


def test_an_unexpected_error_sending_one_file_leaves_it_pending_and_the_rest_go(workdir):
    """Regression: the exception left the worker, so every later file was left untried (or the task failed)."""
    ready = workdir.packs / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    items = []
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        (ready / name).write_bytes(os.urandom(3000))
        items.append(UploadItem(name, ready / name, hashlib.sha256(name.encode()).hexdigest()))

    def opener(agency, settings, wd):
        transport = open_transport(agency, settings, wd)
        put = transport.put

        def fragile_put(local, name):
            if name == "a.jpg":
                raise UnicodeEncodeError("latin-1", name, 0, 1, "the server's code page")
            return put(local, name)

        transport.put = fragile_put
        return transport

    result = upload_agency(workdir, "adobe", items, opener=opener)
    assert sorted(result.uploaded) == ["b.jpg", "c.jpg"] and result.stopped is None
    assert list(result.failed) == ["a.jpg"] and "UnicodeEncodeError" in result.failed["a.jpg"]


def test_an_unexpected_error_is_redacted_with_the_password_in_hand_and_no_secret_block_is_asked(workdir, monkeypatch):
    """The failure's words are redacted with the password the connection was opened with (a local outbox has
    none); no Prefect Secret block is looked up for it (that started a Prefect server of its own: issue 51)."""
    from tasks.core import secrets

    monkeypatch.setattr(secrets, "secret_block", lambda name: (_ for _ in ()).throw(AssertionError(f"asked {name}")))
    ready = workdir.packs / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    (ready / "a.jpg").write_bytes(os.urandom(3000))
    item = UploadItem("a.jpg", ready / "a.jpg", hashlib.sha256(b"a").hexdigest())

    def opener(agency, settings, wd):
        transport = open_transport(agency, settings, wd)
        transport._password = "hunter2-Secret"  # as an FTP/SFTP connection keeps the one it logged in with

        def quoting_put(local, name):
            raise RuntimeError("the server echoed PASS hunter2-Secret back")

        transport.put = quoting_put
        return transport

    result = upload_agency(workdir, "adobe", [item], opener=opener)
    assert "RuntimeError: the server echoed PASS *** back" in result.failed["a.jpg"]
    assert "hunter2" not in result.failed["a.jpg"]
