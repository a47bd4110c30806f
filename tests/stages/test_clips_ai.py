"""AI disclosure for clips as for images (issue 38 item 2): a clip marked generated goes through the same row
rules — held back at an agency that refuses AI, the agency's forbidden wording removed where it takes it, and the
agency's portal tick asked for in the summary. A real clip, the real clips check and CSV stage; the refusing
agency is the contributor's own spec file (a copy of Adobe's that refuses AI: no shipped agency that takes clips
by file transfer refuses AI)."""

from __future__ import annotations

import csv
import re
from importlib import resources

from tasks.core.records import read_sidecar, save_sidecar
from tasks.core.reports import AgencyUpload
from tasks.core.settings import PackSettings, Settings
from tasks.observe.summary import needs_ai_tick
from tasks.stages.csv import csvs_for_packed, write_agency_csvs
from tasks.stores.pending import uploadable
from tests.fakes.clips import remuxed, through_pack

CLIP = "harbour_generative_AI.mp4"
AGENCIES = ["adobe", "refuser"]


def refusing_agency(wd) -> None:
    """``agencies/refuser.toml``: Adobe's spec, video rules included, but it does not accept AI-generated content."""
    adobe = (resources.files("tasks.agencies") / "adobe.toml").read_text(encoding="utf-8")
    ai = re.search(r"^\[ai\]\n(?:.*\n)*?accepted = true$", adobe, re.M)
    refusing = adobe[:ai.end()].removesuffix("true") + "false" + adobe[ai.end():]
    wd.agencies.mkdir(parents=True, exist_ok=True)
    (wd.agencies / "refuser.toml").write_text(refusing.replace('display_name = "Adobe Stock"',
                                                               'display_name = "Refuser Stock"'), encoding="utf-8")


def adobe_titles(wd) -> dict[str, str]:
    return {r["Filename"]: r["Title"] for r in csv.DictReader((wd.csv / "adobe.csv").read_text("utf-8").splitlines())}


def test_a_generated_clip_is_held_back_where_ai_is_refused_and_disclosed_where_it_is_taken(workdir, clips):
    refusing_agency(workdir)
    remuxed(clips["hd"], workdir.assets / CLIP, {"title": "Harbour generative ai"})  # the contributor's title
    settings = Settings(pack=PackSettings(label_own_files_ai=True))  # the contributor says their files are AI-made
    ctx, _, report = through_pack(workdir, AGENCIES, settings)
    assert report.not_taken == {} and list(report.ready) == [CLIP], "the video rules take it at both"
    assert read_sidecar(workdir.sidecar(CLIP)).metadata.ai_generated

    csvs = csvs_for_packed(ctx, report)
    assert not csvs.accepted("refuser", CLIP)
    (refused,) = [p for p in csvs.problems if p.agency == "refuser"]
    assert (refused.asset, refused.rule) == (CLIP, "ai.refused")
    assert "Refuser Stock does not accept AI-generated content" in refused.message
    sent = uploadable(report, csvs, AGENCIES)
    assert ([i.name for i in sent["adobe"]], sent["refuser"]) == ([CLIP], []), "not uploaded where AI is refused"
    assert "generative" not in adobe_titles(workdir)[CLIP].lower(), "Adobe's forbidden AI wording is removed"
    assert needs_ai_tick(workdir, {"adobe": AgencyUpload(uploaded=[CLIP])}) == {
        "adobe": ("Created using generative AI tools", [CLIP])}, "the summary asks for Adobe's AI tick for the clip"

    own = read_sidecar(workdir.sidecar(CLIP))  # the same clip as the contributor's own footage
    own.metadata = own.metadata.model_copy(update={"ai_generated": False})
    save_sidecar(workdir.sidecar(CLIP), own)
    assert write_agency_csvs(workdir, AGENCIES, settings).accepted("refuser", CLIP)
    assert adobe_titles(workdir)[CLIP] == "Harbour generative ai"
    assert needs_ai_tick(workdir, {"adobe": AgencyUpload(uploaded=[CLIP])}) == {}
