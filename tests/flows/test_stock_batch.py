"""The stock-batch flow end to end on the embedded default, in a real Prefect test harness."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pyexiv2
import pytest
from PIL import Image

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tasks.images.provenance import ALGORITHMIC_MEDIA
from tests.fakes.clips import remuxed
from tests.fakes.ledger import ledger_entries
from tests.images.test_provenance import xmp_source_type

HEADERS = {
    "adobe": "Filename,Title,Keywords,Category,Releases",
    "vecteezy": "Filename,Title,Description,Keywords",
    "dreamstime": "Filename,Image Name,Description,Category 1,Category 2,Category 3,keywords,Free,W-EL,P-EL,"
                  "SR-EL,SR-Price,Editorial,MR doc Ids,Pr Docs",
}


def run_batch(wd: Workdir, **params):
    from flows.stock_batch import stock_batch

    state = stock_batch(workdir=str(wd.root), return_state=True, **params)
    assert state.is_completed(), state.message
    return state.result()


def csv_rows(path: Path) -> tuple[str, list[dict]]:
    text = path.read_text(encoding="utf-8")
    return text.splitlines()[0], list(csv.DictReader(text.splitlines()))


@pytest.fixture(scope="module")
def generated_batch(prefect_harness, tmp_path_factory):
    wd = Workdir(tmp_path_factory.mktemp("batch")).prepare()
    first = run_batch(wd, count=3)
    second = run_batch(wd, count=3)
    return wd, first, second


def test_generated_batch_reaches_every_agency(generated_batch):
    wd, first, _ = generated_batch
    assets = sorted(p.name for p in wd.assets.glob("*.jpg"))
    assert len(assets) == 3 and first["described_now"] == 3
    for agency, header in HEADERS.items():
        got_header, rows = csv_rows(wd.csv / f"{agency}.csv")
        assert got_header == header
        assert sorted(r["Filename"] for r in rows) == assets
        assert sorted(p.name for p in wd.outbox(agency).iterdir()) == assets
    entries = ledger_entries(wd.ledger)
    assert sorted((e.agency, e.filename) for e in entries) == sorted((a, n) for a in HEADERS for n in assets)


def test_generated_images_are_photo_sized_demo_jpegs(generated_batch):
    wd, _, _ = generated_batch
    for path in wd.assets.glob("*.jpg"):
        with Image.open(path) as im:
            assert im.format == "JPEG" and im.width * im.height >= 4_000_000
            assert "demo" in im.getexif()[0x0131]


def test_second_run_repeats_nothing(generated_batch):
    wd, _, second = generated_batch
    assert second["described_now"] == 0
    assert second["described"] == 3
    assert sum(second["uploaded_now"].values()) == 0
    assert second["uploaded_total"] == {"adobe": 3, "vecteezy": 3, "dreamstime": 3}
    assert len(ledger_entries(wd.ledger)) == 9
    for agency in HEADERS:
        assert len(csv_rows(wd.csv / f"{agency}.csv")[1]) == 3


def _photo(path: Path, colour: str, keywords: list[str] | None = None, title: str = "") -> None:
    """A 4.3 MP photo; with ``keywords`` they are embedded as XMP, as a camera app or Lightroom would, and a
    ``title`` as IPTC's object name."""
    Image.new("RGB", (2400, 1800), colour).save(path, quality=80)
    if keywords or title:
        with pyexiv2.Image(str(path)) as img:
            if keywords:
                img.modify_xmp({"Xmp.dc.subject": keywords})
            if title:
                img.modify_iptc({"Iptc.Application2.ObjectName": title})


KEYWORDS = ["field", "colour", "texture", "background", "plain", "surface"]


def test_generated_images_say_where_they_came_from_in_the_sidecar_and_the_embedded_xmp(generated_batch):
    wd, _, _ = generated_batch
    for path in sorted(wd.assets.glob("*.jpg")):
        provenance = read_sidecar(wd.sidecar(path.name)).provenance
        assert (provenance.source, provenance.generator) == ("generated", "offline demo")
        assert provenance.prompt and (provenance.width, provenance.height) == Image.open(path).size
        assert xmp_source_type((wd.packs / "ready" / path.name).read_bytes()) == ALGORITHMIC_MEDIA
        assert not read_sidecar(wd.sidecar(path.name)).metadata.ai_generated  # drawn by an algorithm, no model


def test_ingest_processes_only_new_images_and_rejects_bad_ones(prefect_harness, tmp_path, clips):
    source = tmp_path / "photos"
    source.mkdir()
    _photo(source / "red_barn.jpg", "red", KEYWORDS)
    _photo(source / "blue_lake.jpg", "blue", KEYWORDS)
    (source / "empty.jpg").write_bytes(b"")
    (source / "notes.png").write_text("not an image")
    # issue 38: a clip Adobe takes, one it does not, a broken one; each with the title its contributor gave it
    remuxed(clips["hd"], source / "harbour.mp4", {"title": "Harbour"})
    remuxed(clips["vertical"], source / "tower.mp4", {"title": "Tower"})
    (source / "broken.mov").write_bytes(b"\0" * 4096)
    wd = Workdir(tmp_path / "work").prepare()

    first = run_batch(wd, source=str(source))
    assert first["described_now"] == 4  # two images and the two clips read (the describe stage describes both)
    assert set(first["rejected"]) == {"empty.jpg", "notes.png", "broken.mov"}
    assert "empty" in first["rejected"]["empty.jpg"]
    assert "broken.mov: cannot be read as a video clip" not in first["rejected"]["broken.mov"]
    assert "cannot be read as a video clip" in first["rejected"]["broken.mov"]
    listed = json.loads((wd.reports / "ingest.json").read_text(encoding="utf-8"))["rejected"]  # issue 37 item 6
    assert {row["file"] for row in listed} == {"empty.jpg", "notes.png", "broken.mov"}
    assert all(row["what_to_do"] for row in listed)
    assert (wd.outbox("adobe") / "harbour.mp4").read_bytes() == (source / "harbour.mp4").read_bytes()
    _, adobe_rows = csv_rows(wd.csv / "adobe.csv")
    assert {r["Filename"]: r["Title"] for r in adobe_rows}["harbour.mp4"] == "Harbour"  # the clip's row, its title
    assert "tower.mp4" not in {r["Filename"] for r in adobe_rows}
    assert "harbour.mp4" not in {r["Filename"] for r in csv_rows(wd.csv / "vecteezy.csv")[1]}
    assert not (wd.outbox("adobe") / "tower.mp4").exists()
    assert not any(p.suffix == ".mp4" for a in ("vecteezy", "dreamstime") for p in wd.outbox(a).iterdir())
    checked = {c["file"]: c for c in json.loads((wd.reports / "clips.json").read_text(encoding="utf-8"))["clips"]}
    # Vecteezy's video rules take it too (issue 38 item 6), but its row is held there: the offline describer
    # gives the clip one keyword (its one-word title), Vecteezy wants 5 — so no Vecteezy row, no upload there
    assert checked["harbour.mp4"]["taken_by"] == ["adobe", "vecteezy"]
    assert first["held_rules"]["vecteezy"]["harbour.mp4"] == "keywords.min"
    assert "1080×1920 is vertical" in checked["tower.mp4"]["held_back"]["adobe"]
    assert Image.open(wd.packs / "clips" / "harbour.poster.jpg").size == (1000, 562)
    with zipfile.ZipFile(wd.packs / "batch.zip") as batch_zip:  # clips are not put in the batch ZIP; their rows are
        names = batch_zip.namelist()
        assert "harbour.mp4" in batch_zip.read("csv/adobe.csv").decode("utf-8")
    assert names and not [n for n in names if n.endswith((".mp4", ".mov")) or "harbour" in n], names
    assert not list(wd.packs.glob("ready/*.mp4"))

    _photo(source / "green_field.jpg", "green", KEYWORDS)
    second = run_batch(wd, source=str(source))
    assert second["described_now"] == 1
    assert second["uploaded_now"] == {"adobe": 1, "vecteezy": 1, "dreamstime": 1}
    assert sorted(p.name for p in wd.outbox("vecteezy").iterdir()) == ["blue_lake.jpg", "green_field.jpg",
                                                                       "red_barn.jpg"]
    assert [(e.agency, e.filename) for e in ledger_entries(wd.ledger)].count(("adobe", "harbour.mp4")) == 1
    own = read_sidecar(wd.sidecar("red_barn.jpg")).provenance
    assert own.source == "own" and own.model == "" and own.prompt == ""
    assert xmp_source_type((wd.packs / "ready" / "red_barn.jpg").read_bytes()) is None  # not labelled AI


def test_renamed_source_file_is_not_a_new_asset(prefect_harness, tmp_path):
    source = tmp_path / "photos"
    source.mkdir()
    _photo(source / "a.jpg", "orange", KEYWORDS)
    wd = Workdir(tmp_path / "work").prepare()
    run_batch(wd, source=str(source), agencies=["adobe"])
    (source / "a.jpg").rename(source / "a_renamed.jpg")
    again = run_batch(wd, source=str(source), agencies=["adobe"])
    assert again["described_now"] == 0 and again["uploaded_now"] == {"adobe": 0}
    assert [p.name for p in wd.outbox("adobe").iterdir()] == ["a.jpg"]


def test_an_asset_an_agency_refuses_is_skipped_there_only(prefect_harness, tmp_path):
    source = tmp_path / "photos"
    source.mkdir()
    _photo(source / "two_words.jpg", "teal", title="Two words")  # 2 keywords from its title: Vecteezy wants 5
    wd = Workdir(tmp_path / "work").prepare()
    result = run_batch(wd, source=str(source))
    assert result["uploaded_now"] == {"adobe": 1, "vecteezy": 0, "dreamstime": 1}
    assert not wd.outbox("vecteezy").exists() or not any(wd.outbox("vecteezy").iterdir())
    assert csv_rows(wd.csv / "vecteezy.csv")[1] == []
    assert [r["Filename"] for r in csv_rows(wd.csv / "adobe.csv")[1]] == ["two_words.jpg"]


def test_an_image_below_an_agencys_minimum_gets_no_row_or_upload_there(prefect_harness, tmp_path):
    source = tmp_path / "photos"
    source.mkdir()
    Image.new("RGB", (2000, 1600), "navy").save(source / "small_sky.jpg", quality=80)  # 3.2 MP: Dreamstime only
    with pyexiv2.Image(str(source / "small_sky.jpg")) as img:
        img.modify_xmp({"Xmp.dc.subject": KEYWORDS})
    wd = Workdir(tmp_path / "work").prepare()
    result = run_batch(wd, source=str(source))
    assert result["uploaded_now"] == {"adobe": 0, "vecteezy": 0, "dreamstime": 1}
    assert set(result["held_back"]) == {"adobe", "vecteezy"}
    assert "4" in result["held_back"]["adobe"]["small_sky.jpg"]  # the rule names the 4 MP minimum
    assert csv_rows(wd.csv / "adobe.csv")[1] == [] and csv_rows(wd.csv / "vecteezy.csv")[1] == []
    assert [r["Filename"] for r in csv_rows(wd.csv / "dreamstime.csv")[1]] == ["small_sky.jpg"]
