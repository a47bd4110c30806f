"""A sidecar changed by several processes at once keeps every change (``update_sidecar``, under
``assets/.sidecars.lock``): a review decision in the form, the pack stage's enlargement, ``similar distinct``."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from tasks.core.records import (
    Asset,
    Metadata,
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
