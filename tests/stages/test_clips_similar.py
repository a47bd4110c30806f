"""Clips compared with clips (issue 38 item 5): a signature of five frames, duplicates held, versions at risk,
the portfolio's uploaded clips found again."""

from __future__ import annotations

import shutil
from pathlib import Path

import av
from PIL import Image, ImageDraw

from tasks.core.settings import PackSettings, Settings
from tasks.images.clip_signature import FRAMES, clip_signature
from tasks.stores.ledger import Ledger
from tasks.stores.portfolio import read_portfolio
from tasks.stores.similar_risks import read_risks
from tests.fakes.clips import remuxed, through_pack

AGENCIES = ["adobe"]


def _clip(path: Path, shade: int = 0, seconds: int = 5, fps: int = 25) -> Path:
    """A 1920×1080 H.264 clip Adobe takes: a bar moving across a gradient, ``shade`` added to its blue."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("h264", rate=fps, options={"crf": "40", "preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        frames = []
        for s in range(seconds):
            im = Image.linear_gradient("L").resize((1920, 1080)).convert("RGB")
            ImageDraw.Draw(im).rectangle((300 * s, 200, 300 * s + 400, 700), fill=(200, 60, 40 + shade))
            frames.append(av.VideoFrame.from_image(im).reformat(format="yuv420p"))
        for i in range(seconds * fps):
            frame = frames[i // fps]
            frame.pts = None
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path



def _checked(wd):
    """The clips gathered, described offline and packed: the similarity check is the pack stage's."""
    return through_pack(wd, AGENCIES, Settings(pack=PackSettings(preview_px=400, thumbnail_px=200)))[2]


def test_the_signature_is_five_frames_in_time_order_and_a_copy_in_another_container_has_its_digest(tmp_path):
    clip = _clip(tmp_path / "bar.mp4")
    signature = clip_signature(clip)
    assert len(signature.frames) == FRAMES
    assert len({f.colour for f in signature.frames}) == FRAMES  # the bar moves: each second another frame
    assert clip_signature(remuxed(clip, tmp_path / "bar.mov")).digest == signature.digest
    assert clip_signature(_clip(tmp_path / "blue.mp4", shade=40)).digest != signature.digest


def test_a_duplicate_clip_is_held_back_and_a_near_identical_one_is_at_risk(workdir, tmp_path):
    clip = _clip(workdir.assets / "bar.mp4")
    remuxed(clip, workdir.assets / "bar_copy.mov")
    _clip(workdir.assets / "bar_bluer.mp4", shade=6)
    report = _checked(workdir)
    assert sorted(report.ready) == ["bar.mp4", "bar_bluer.mp4", "bar_copy.mov"]
    assert list(report.not_taken["adobe"]) == ["bar_copy.mov"], "only the copy is kept from adobe"
    assert "a duplicate of bar.mp4: the same frames" in report.not_taken["adobe"]["bar_copy.mov"]
    assert report.duplicate_held == {"adobe": {"bar_copy.mov"}}
    risks = read_risks(workdir)["adobe"]
    assert risks["bar_copy.mov"].outcome == "duplicate"
    near = risks["bar_bluer.mp4"]
    assert near.risky and near.nearest == "bar.mp4" and near.versions == 2
    assert {s.name for s in read_portfolio(workdir).values()} == {"bar.mp4", "bar_copy.mov", "bar_bluer.mp4"}


def test_a_clip_like_one_uploaded_before_is_flagged(workdir, tmp_path):
    first = _clip(workdir.assets / "bar.mp4")
    report = _checked(workdir)
    Ledger(workdir.ledger).record("adobe", "bar.mp4", report.asset_ids["bar.mp4"], "/bar.mp4")
    kept = read_portfolio(workdir)[report.asset_ids["bar.mp4"]]
    assert kept.is_clip and len(kept.frames) == FRAMES  # the released clip stays in the portfolio
    shutil.move(first, tmp_path / "gone.mp4")  # it left the batch; the portfolio and the ledger remember it
    _clip(workdir.assets / "bar_again.mp4", shade=6)
    _checked(workdir)
    risk = read_risks(workdir)["adobe"]["bar_again.mp4"]
    assert risk.risky and risk.nearest == "bar.mp4" and risk.nearest_uploaded
