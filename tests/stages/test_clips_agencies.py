"""Issue 38 item 6: a clip goes to every agency whose video rules and way of taking clips are confirmed, and is held
back at every other with what is missing named. Real clips (PyAV), the real clips check, offline describe, CSV stage,
the shipped agency specs; the upload through the real loopback FTP server."""

from __future__ import annotations

import csv

import pytest

from tasks.core.files import sha256_file
from tasks.core.settings import AgencySettings
from tasks.stages.csv import csvs_for_packed
from tasks.stages.upload import upload_agency
from tasks.stores.pending import uploadable
from tests.fakes.clips import make_clip, remuxed, through_pack
from tests.fakes.servers import PASSWORD, ftp_server  # noqa: F401  (fixture)
from tests.stages.test_upload import ledger_names

ALL = ["adobe", "vecteezy", "dreamstime", "pond5", "depositphotos", "shutterstock", "alamy", "123rf", "freepik"]
NO_RULES = "no published video rules confirmed"
TAGS = {"title": "Fishing boats in a calm harbour at dawn", "comment": "Fishing boats moored in a calm harbour at dawn",
        "keywords": "harbour, boats, dawn, sea, calm, water"}


@pytest.fixture
def harbour(workdir, tmp_path):
    """A 5 s 1920×1080 25 fps H.264 MP4 with its title, description and keywords in its tags, in ``assets/``."""
    return make_clip(workdir.assets / "harbour.mp4", fps=25, tags=TAGS)


def test_each_agency_takes_the_clip_or_names_the_rule_or_what_is_unconfirmed(workdir, harbour):
    mjpeg = make_clip(workdir.assets / "dawn.mov", fps=24, codec="mjpeg")  # what Dreamstime's rules ask for
    _, _, report = through_pack(workdir, ALL)
    held = report.not_taken
    assert [a for a in ALL if not held.get(a)] == ["adobe", "vecteezy"]
    assert held["dreamstime"]["harbour.mp4"] == "container MP4 not taken (takes MOV)"
    assert held["dreamstime"][mjpeg.name] == (
        "its video rules are met, but Dreamstime's FTP folder for clips and a CSV for clips are not confirmed "
        "(docs/AGENCIES.md, \"Video clips\"); not sent")
    assert held["pond5"] == dict.fromkeys(["dawn.mov", "harbour.mp4"], (
        "its video rules are met, but the columns of Pond5's footage CSV (applied per media type) are not "
        "published (docs/AGENCIES.md, \"Video clips\"); not sent"))
    assert held["depositphotos"]["harbour.mp4"] == ("container MP4 not taken "
                                                    "(takes ASF, AVI, DV, FLV, MOV, MPEG, MPG, WMV)")
    assert "Depositphotos' way of taking clips" in held["depositphotos"]["dawn.mov"]
    assert held["alamy"] == dict.fromkeys(["dawn.mov", "harbour.mp4"], "does not take video")
    for agency in ("shutterstock", "123rf", "freepik"):
        assert all(NO_RULES in why for why in held[agency].values()) and len(held[agency]) == 2, agency


def described(workdir, agencies):
    """Gathered, described offline (from the clip's own tags) and packed; (the pack report, the CSV report)."""
    ctx, _, packed = through_pack(workdir, agencies)
    return packed, csvs_for_packed(ctx, packed)


def test_a_clip_vecteezy_takes_gets_its_row_there_by_vecteezys_rules_and_none_where_it_is_held(workdir, harbour):
    packed, csvs = described(workdir, ["vecteezy", "dreamstime", "pond5"])
    rows = list(csv.DictReader((workdir.csv / "vecteezy.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["Filename"] for r in rows] == ["harbour.mp4"]
    assert rows[0]["Title"] == TAGS["title"] and rows[0]["Keywords"].split(",")[:3] == ["harbour", "boats", "dawn"]
    assert csvs.agencies["vecteezy"].accepted == ["harbour.mp4"]
    for agency in ("dreamstime", "pond5"):  # held back there: no row, nothing to upload
        assert csvs.agencies[agency].accepted == [] and "harbour.mp4" not in (workdir.csv / f"{agency}.csv").read_text()
    taken = uploadable(packed, csvs, ["vecteezy", "dreamstime", "pond5"])
    assert [(i.name, i.path) for i in taken["vecteezy"]] == [("harbour.mp4", harbour)]
    assert taken["dreamstime"] == taken["pond5"] == []


def test_the_clip_reaches_vecteezys_outbox_by_default_unchanged(workdir, harbour):
    packed, csvs = described(workdir, ["vecteezy"])
    report = upload_agency(workdir, "vecteezy", uploadable(packed, csvs, ["vecteezy"])["vecteezy"])
    assert report.uploaded == ["harbour.mp4"]
    assert sha256_file(workdir.outbox("vecteezy") / "harbour.mp4") == sha256_file(harbour)


def test_the_clip_reaches_vecteezys_ftp_target_once_and_a_rerun_sends_nothing(
        workdir, harbour, ftp_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", PASSWORD)
    packed, csvs = described(workdir, ["vecteezy"])
    settings = AgencySettings(target=ftp_server.url(), timeout_s=5)
    first = upload_agency(workdir, "vecteezy", uploadable(packed, csvs, ["vecteezy"])["vecteezy"], settings)
    assert first.uploaded == ["harbour.mp4"] and not first.failed
    digest = sha256_file(harbour)
    assert [(e.size, e.sha256) for e in ftp_server.log.received("harbour.mp4")] == [(harbour.stat().st_size, digest)]
    assert ledger_names(workdir, "vecteezy") == ["harbour.mp4"]

    packed, csvs = described(workdir, ["vecteezy"])  # the next run
    rerun = upload_agency(workdir, "vecteezy", uploadable(packed, csvs, ["vecteezy"])["vecteezy"], settings)
    assert (rerun.uploaded, rerun.already) == ([], ["harbour.mp4"])
    assert len(ftp_server.log.received()) == 1 and ftp_server.log.stor_commands == 1
    assert ledger_names(workdir, "vecteezy") == ["harbour.mp4"]


def test_a_clip_with_too_few_keywords_is_held_back_at_vecteezy_by_its_keyword_rule(workdir, clips):
    remuxed(clips["hd"], workdir.assets / "harbour.mp4", {"title": "Harbour"})  # its title its one keyword
    _, csvs = described(workdir, ["vecteezy"])
    problems = {p.rule for p in csvs.problems if p.asset == "harbour.mp4"}
    assert problems == {"keywords.min"}, "a clip's row meets the agency's metadata rules as a photo's does"
