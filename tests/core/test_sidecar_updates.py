"""A sidecar changed by several processes at once keeps every change (``update_sidecar``, under
``assets/.sidecars.lock``): a review decision in the form, the pack stage's enlargement, ``similar distinct``."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from tasks.core.records import (
    Asset,
    Metadata,
    ReviewDecision,
    Upscaled,
    read_sidecar,
    record_review,
    record_upscaled,
    update_sidecar,
    write_sidecar,
)


def _sidecar(tmp_path: Path) -> Path:
    path = tmp_path / "assets" / "a.json"
    path.parent.mkdir()
    write_sidecar(path, Asset(name="a.jpg", asset_id="0" * 64, path=tmp_path / "assets" / "a.jpg"),
                  Metadata(title="A title", description="d", keywords=["start"]))
    return path


def _add_keywords(path: str, who: int, start) -> None:
    start.wait(10)
    for i in range(25):
        update_sidecar(Path(path), lambda s, i=i: s.model_copy(update={"metadata": s.metadata.model_copy(
            update={"keywords": [*s.metadata.keywords, f"k{who}-{i}"]})}))


def test_processes_changing_one_sidecar_at_once_all_keep_their_change(tmp_path):
    path = _sidecar(tmp_path)
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_add_keywords, args=(str(path), who, start)) for who in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    assert [p.exitcode for p in procs] == [0] * 4
    keywords = read_sidecar(path).metadata.keywords
    assert sorted(keywords) == sorted(["start"] + [f"k{who}-{i}" for who in range(4) for i in range(25)])


def test_a_review_decision_and_an_enlargement_are_both_kept(tmp_path):
    path = _sidecar(tmp_path)
    upscaled = Upscaled(from_size=(800, 600), to_size=(1600, 1200), agencies=["adobe"])
    record_review(path, "rejected")
    record_upscaled(path, upscaled)
    now = read_sidecar(path)
    assert now.rejected and now.upscaled == upscaled and now.metadata.title == "A title"
    assert update_sidecar(tmp_path / "assets" / "none.json", lambda s: s) is None  # no sidecar: nothing made
    assert not (tmp_path / "assets" / "none.json").exists()


def test_a_review_decision_recorded_while_the_asset_is_described_again_survives_the_describe_save(tmp_path):
    """The form records a decision (``update_sidecar``: read, change, write under the lock) while describe saves a
    new answer for the same content: the save waits for the decision and keeps it, and the decision's write
    does not put the old words back. Without the lock one of the two is lost, whichever goes first."""
    import threading

    path = _sidecar(tmp_path)
    asset = Asset(name="a.jpg", asset_id="0" * 64, path=tmp_path / "assets" / "a.jpg")
    describe = threading.Thread(target=write_sidecar, args=(path, asset, Metadata(
        title="A new title", description="d", keywords=["new"])))

    def decide(sidecar):
        describe.start()  # describe saves while the decision is being made
        describe.join(0.3)  # it waits for the lock (without it, it has written by now)
        return sidecar.model_copy(update={"review": ReviewDecision(decision="rejected", at="now")})

    update_sidecar(path, decide)
    describe.join(10)
    now = read_sidecar(path)
    assert now.rejected and now.metadata.title == "A new title"


def test_an_answer_for_other_content_replaces_the_sidecar_and_its_decision(tmp_path):
    path = _sidecar(tmp_path)
    record_review(path, "rejected")
    changed = Asset(name="a.jpg", asset_id="1" * 64, path=tmp_path / "assets" / "a.jpg")  # new pixels, same name
    write_sidecar(path, changed, Metadata(title="Other pixels", description="d", keywords=["k"]))
    now = read_sidecar(path)
    assert now.review is None and now.asset_id == "1" * 64 and now.metadata.title == "Other pixels"
