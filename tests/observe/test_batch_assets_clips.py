"""The clips' rows of ``batch-assets`` (issue 38 item 5): the facts, the poster, and each agency's cell — sent, held
back by a video rule with its value, held back as a duplicate — from the real clips check of small real clips."""

from __future__ import annotations

import shutil

from tasks.core.reports import AgencyUpload
from tasks.core.settings import Settings
from tasks.images.clip_probe import ClipFacts
from tasks.observe.batch_assets import clip_rows
from tasks.stages.clips import check_clips, clip_assets, similar_clips
from tasks.stages.csv import write_agency_csvs
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.similar_risks import read_risks
from tests.fakes.clips import remuxed


def test_each_clip_shows_its_facts_poster_and_why_an_agency_holds_it_back(workdir, clips):
    shutil.copy(clips["hd"], workdir.assets / "harbour.mp4")
    shutil.copy(clips["long"], workdir.assets / "tide.mov")
    remuxed(clips["hd"], workdir.assets / "harbour_copy.mov")
    report = check_clips(workdir, ["adobe"], 1000, 400)
    describe_stage(RunContext(workdir, Settings()), clip_assets(workdir))
    similar_clips(workdir, report, ["adobe"], 8)
    csvs = write_agency_csvs(workdir, ["adobe"])
    uploads = {"adobe": AgencyUpload(uploaded=list(csvs.agencies["adobe"].accepted))}
    rows = {r["asset"]: r for r in clip_rows(workdir, csvs, uploads, {}, read_risks(workdir))}

    assert list(rows) == ["harbour.mp4", "harbour_copy.mov", "tide.mov"]
    harbour = rows["harbour.mp4"]
    assert (harbour["describe"], harbour["adobe"]) == ("described", "uploaded")
    assert harbour["clip"].startswith("MP4 · 5.0 s · 1920×1080 · 25 fps · h264 · no sound · ")
    assert harbour["clip"].endswith(" · poster packs/clips/harbour.poster.jpg")
    assert (workdir.packs / "clips" / "harbour.poster.jpg").is_file()
    assert rows["tide.mov"]["adobe"] == "held back (video): 61 s is longer than the 60 s maximum"
    assert rows["tide.mov"]["clip"].startswith("MOV · 61.0 s · 640×360 · 1 fps · h264 · no sound")
    assert rows["harbour_copy.mov"]["adobe"].startswith("held back (duplicate): a duplicate of harbour.mp4")

    waiting = clip_rows(workdir, csvs, {}, {"tide.mov": "waiting for review"}, read_risks(workdir))
    assert {r["asset"]: r["describe"] for r in waiting}["tide.mov"] == "waiting for review"


def test_a_clips_words_say_its_sound_and_its_rotation():
    facts = ClipFacts(container="mov", bytes=12_300_000, duration_s=12.04, width=1080, height=1920,
                      frame_rate=29.97, codec="hevc", audio="aac", rotation=90)
    assert facts.words() == "MOV · 12.0 s · 1080×1920 · 29.97 fps · hevc · sound aac · rotated 90° · 12.3 MB"
