"""Clips wait for review as images do (issue 38 item 5): asked about in the same form, decided the same way, and a
clip rejected (or still waiting) gets no CSV row and is not uploaded. Real clips (PyAV, a few kB), the real clips
check, describe and CSV stages; only the pause is an answer given at once (the pause in a real run:
tests/flows/test_review_flow.py)."""

from __future__ import annotations

import base64
import csv
import shutil
from io import BytesIO

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import (
    CLIP_EXTENSIONS,
    Asset,
    Metadata,
    described_sidecars,
    iter_asset_files,
    read_sidecar,
    write_sidecar,
)
from tasks.core.reports import PackReport
from tasks.core.settings import PackSettings, ReviewSettings, Settings
from tasks.observe.events import MemoryEvents
from tasks.stages.clips import pack_clips
from tasks.stages.csv import write_agency_csvs
from tasks.stages.describe import describe_stage
from tasks.stages.pack import finish_batch
from tasks.stages.review import Correction, edit_asset, not_described, review_decisions, review_overview
from tasks.stages.run_context import RunContext
from tasks.stores.pending import uploadable

CLIP = "harbour.mp4"
IMAGE = "alps.jpg"


class Answered:
    """An ``ask`` that answers at once (None: no answer in time), keeping each question."""

    def __init__(self, reject=(), timed_out: bool = False) -> None:
        self.reject, self.corrections, self.timed_out = list(reject), [], timed_out
        self.questions = []

    def __call__(self, question):
        self.questions.append(question)
        return None if self.timed_out else self


@pytest.fixture
def batch(workdir, clips) -> PackReport:
    """A described, packed image and a clip Adobe takes, checked and described as the assets stage leaves them;
    the pack report of the image."""
    (workdir.assets / IMAGE).write_bytes(b"image")
    metadata = Metadata(title="Quiet alps at dawn", description="A quiet alps at dawn.",
                        keywords=["alps", "dawn", "quiet", "landscape", "nature"], adobe_category=11)
    write_sidecar(workdir.sidecar(IMAGE), Asset(name=IMAGE, asset_id="1" * 64, path=workdir.assets / IMAGE), metadata)
    (workdir.packs / "ready").mkdir(parents=True)
    (workdir.packs / "ready" / IMAGE).write_bytes(b"jpeg")
    shutil.copy(clips["hd"], workdir.assets / CLIP)
    return packed_batch(workdir)


def packed_batch(wd) -> PackReport:
    """The clips of ``wd`` described (offline) and packed, as the flow's stages take them, with the image."""
    ctx = RunContext(wd, Settings(), ["adobe"])
    describe_stage(ctx, [Asset(name=p.name, asset_id=sha256_file(p), path=p)
                         for p in iter_asset_files(wd.assets, CLIP_EXTENSIONS)])
    image = PackReport(ready={IMAGE: wd.packs / "ready" / IMAGE}, asset_ids={IMAGE: "1" * 64},
                       thumbnails={IMAGE: wd.packs / "thumbs" / IMAGE})
    return image.joined(pack_clips(wd, described_sidecars(wd, CLIP_EXTENSIONS), ["adobe"], ctx.catalog,
                                   PackSettings()))


def review_on(**review) -> Settings:
    return Settings(review=ReviewSettings(enabled=True, **review))


def adobe_files(wd) -> list[str]:
    return [row["Filename"] for row in csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines())]


def sent_to_adobe(packed, csvs) -> list[str]:
    return [item.name for item in uploadable(packed, csvs, ["adobe"])["adobe"]]


def test_a_clip_is_asked_about_with_the_images_and_a_rejected_one_gets_no_row_and_no_upload(workdir, batch):
    csvs = write_agency_csvs(workdir, ["adobe"], packed=batch)
    assert adobe_files(workdir) == [IMAGE, CLIP], "before the review both have their row"
    ask = Answered(reject=[CLIP])
    report = review_decisions(workdir, review_on(), batch, csvs, ask, MemoryEvents())
    (question,) = ask.questions
    assert question.waiting == [IMAGE, CLIP], "the clip is offered in the form as the image is"
    assert "2 asset(s) waiting for review" in question.description and f"`{CLIP}`" in question.description
    assert (report.approved, report.rejected) == ([IMAGE], [CLIP])
    clip = read_sidecar(workdir.sidecar(CLIP)).review
    assert (clip.decision, clip.by) == ("rejected", "review")

    after = write_agency_csvs(workdir, ["adobe"], waiting=report.held, packed=batch)  # as after the answer
    assert adobe_files(workdir) == [IMAGE]
    assert [(p.asset, p.rule) for p in after.problems] == [(CLIP, "review")]
    assert sent_to_adobe(batch, after) == [IMAGE], "the rejected clip is not uploaded"
    again = review_decisions(workdir, review_on(), batch, after, Answered(), MemoryEvents())
    assert again.asked == [], "decided: not asked again"
    assert again.rejected_before.keys() == {CLIP}


def test_without_an_answer_a_waiting_clip_is_held_and_the_next_run_asks_again(workdir, batch):
    csvs = write_agency_csvs(workdir, ["adobe"], packed=batch)
    held = review_decisions(workdir, review_on(), batch, csvs, Answered(timed_out=True), MemoryEvents())
    assert held.held == [IMAGE, CLIP]
    waiting = write_agency_csvs(workdir, ["adobe"], waiting=held.held, packed=batch)
    assert adobe_files(workdir) == [] and sent_to_adobe(batch, waiting) == [], "nothing of what waits leaves"
    approved = review_decisions(workdir, review_on(on_timeout="approve"), batch,
                                write_agency_csvs(workdir, ["adobe"], packed=batch), Answered(timed_out=True),
                                MemoryEvents())
    assert approved.approved == [IMAGE, CLIP]
    after = write_agency_csvs(workdir, ["adobe"], waiting=approved.held, packed=batch)
    assert sent_to_adobe(batch, after) == [IMAGE, CLIP]


def test_the_terminal_lists_a_waiting_clip_and_knows_it_as_a_described_asset(workdir, batch):
    assert review_overview(workdir) == ([IMAGE, CLIP], {})
    assert not_described(workdir, [CLIP, "harbor.mp4"]) == {"harbor.mp4": [CLIP]}
    shutil.rmtree(workdir.reports)  # written for people: the terminal's answer is the same without it
    assert review_overview(workdir) == ([IMAGE, CLIP], {})
    (workdir.packs / "ready" / IMAGE).unlink()  # not packed (any more): nothing to decide about yet
    assert review_overview(workdir)[0] == [CLIP]


def test_the_form_shows_a_clips_poster_facts_and_why_an_agency_holds_it_back(workdir, batch, clips):
    shutil.copy(clips["long"], workdir.assets / "tide.mov")  # 61 s: over Adobe's 60 s
    packed = packed_batch(workdir)
    ask = Answered(timed_out=True)
    review_decisions(workdir, review_on(), packed, write_agency_csvs(workdir, ["adobe"], packed=packed), ask,
                     MemoryEvents())
    text = ask.questions[0].description
    harbour = next(line for line in text.splitlines() if f"`{CLIP}`" in line)
    uri = harbour.split("(data:image/jpeg;base64,")[1].split(")")[0]
    with Image.open(BytesIO(base64.b64decode(uri))) as thumb:
        assert thumb.size == (80, 45), "the poster's thumbnail, inline"
    assert "<br>clip: MP4 · 5.0 s · 1920×1080 · 25 fps · h264 · no sound · " in harbour
    assert "<br>goes: adobe: sent" in harbour  # (then how alike it is the other clip: pack checked that too)
    tide = next(line for line in text.splitlines() if "`tide.mov`" in line)
    assert "<br>clip: MOV · 61.0 s · 640×360 · 1 fps · h264 · no sound" in tide
    assert "<br>goes: adobe: held back: 61 s is longer than the 60 s maximum" in tide
    image = next(line for line in text.splitlines() if f"`{IMAGE}`" in line)
    assert "<br>clip:" not in image


def test_an_edit_of_a_clip_says_the_video_rule_that_holds_it_back_first(workdir, batch, clips):
    shutil.copy(clips["long"], workdir.assets / "tide.mov")
    packed = packed_batch(workdir)
    finish_batch(workdir, packed, write_agency_csvs(workdir, ["adobe"], packed=packed))  # the run records it
    sidecar, (row,) = edit_asset(workdir, Settings(), ["adobe"], Correction(file="tide.mov", title="Tide at dusk"))
    assert sidecar.metadata.title == "Tide at dusk" == read_sidecar(workdir.sidecar("tide.mov")).metadata.title
    assert not row.ok and [(p.rule, p.message) for p in row.problems] == [
        ("video", "61 s is longer than the 60 s maximum")], "not 'gets a row': the clip's length keeps it from Adobe"
    _, (taken,) = edit_asset(workdir, Settings(), ["adobe"], Correction(file=CLIP, title="Harbour at dawn"))
    assert taken.ok
