"""The clips' rows of ``batch-assets`` (issue 38 item 5): the facts, the poster, and each agency's cell — sent, held
back by a video rule with its value, held back as a duplicate — from the real clips check of small real clips."""

from __future__ import annotations

from tasks.core.reports import AgencyUpload, DescribeReport
from tasks.images.clip_probe import ClipFacts
from tasks.observe.batch_assets import add_about_column, asset_rows
from tasks.stages.csv import csvs_for_packed
from tests.fakes.clips import remuxed, through_pack


def test_each_clip_shows_its_facts_poster_and_why_an_agency_holds_it_back(workdir, clips):
    # each with the title its contributor wrote into it (nothing but a file name goes nowhere: issue 52)
    remuxed(clips["hd"], workdir.assets / "harbour.mp4", {"title": "Harbour at dawn"})
    remuxed(clips["long"], workdir.assets / "tide.mov", {"title": "Tide coming in"})
    remuxed(clips["hd"], workdir.assets / "harbour_copy.mov", {"title": "Harbour at dawn"})
    ctx, gathered, packed = through_pack(workdir, ["adobe"])
    csvs = csvs_for_packed(ctx, packed)
    uploads = {"adobe": AgencyUpload(uploaded=list(csvs.agencies["adobe"].accepted))}
    rows = shown_rows(workdir, gathered, csvs, packed, uploads, {})

    assert list(rows) == ["harbour.mp4", "harbour_copy.mov", "tide.mov"]
    harbour = rows["harbour.mp4"]
    assert (harbour["describe"], harbour["adobe"]) == ("described", "uploaded")
    assert harbour["clip"].startswith("MP4 · 5.0 s · 1920×1080 · 25 fps · h264 · no sound · ")
    assert harbour["clip"].endswith(" · poster packs/clips/harbour.poster.jpg")
    assert (workdir.packs / "clips" / "harbour.poster.jpg").is_file()
    assert rows["tide.mov"]["adobe"] == "held back (video): 61 s is longer than the 60 s maximum"
    assert rows["tide.mov"]["clip"].startswith("MOV · 61.0 s · 640×360 · 1 fps · h264 · no sound")
    assert rows["harbour_copy.mov"]["adobe"].startswith("held back (duplicate): a duplicate of harbour.mp4")

    waiting = shown_rows(workdir, gathered, csvs, packed, {}, {"tide.mov": "waiting for review"})
    assert waiting["tide.mov"]["describe"] == "waiting for review"


def shown_rows(wd, gathered, csvs, packed, uploads, in_review) -> dict[str, dict[str, str]]:
    """The ``batch-assets`` rows as the run publishes them (no Prefect: the table itself is not made), by asset."""
    rows = asset_rows(gathered, DescribeReport(described=[a.name for a in gathered.assets]), csvs, packed, uploads,
                      [], in_review)
    add_about_column(rows, wd, packed)
    return {r["asset"]: r for r in rows}


def test_a_clips_words_say_its_sound_and_its_rotation():
    facts = ClipFacts(container="mov", bytes=12_300_000, duration_s=12.04, width=1080, height=1920,
                      frame_rate=29.97, codec="hevc", audio="aac", rotation=90)
    assert facts.words() == "MOV · 12.0 s · 1080×1920 · 29.97 fps · hevc · sound aac · rotated 90° · 12.3 MB"
