"""The similarity check through pack and upload: re-renders of one prompt held back beyond Adobe's cap, warned
elsewhere, earlier uploads counted after they left the batch, and a release kept."""

from __future__ import annotations

import random
import shutil

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset, Metadata, described_sidecars, write_sidecar
from tasks.core.reports import CsvReport, DescribeReport, Gathered
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.observe.batch_assets import asset_rows
from tasks.observe.markdown import md_cell
from tasks.observe.similar_view import add_risk_column, summary_notes
from tasks.stages.review import review_description
from tasks.stages.similarity import release_held_back
from tasks.stores.similar_risks import read_risks
from tests.stages.test_pack_motifs import CITY, SIZE, pack_and_upload


def add_renders(wd: Workdir, seeds: range, scene: int = 0) -> list[str]:
    """The prompt drawn again with other seeds (the shapes move), described as the offline describer does."""
    prompt, names = DEMO_PROMPTS[scene], []
    for seed in seeds:
        name = f"{prompt.slug}_s{seed}.jpg"
        render_demo_image(prompt, random.Random(seed), size=SIZE).save(wd.assets / name, quality=90)
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(wd.assets / name), path=wd.assets / name),
                      Metadata(title=prompt.prompt, description=prompt.prompt, keywords=list(prompt.keywords)))
        names.append(name)
    return names


def test_re_renders_of_one_prompt_are_held_back_beyond_adobes_cap_and_only_warned_at_dreamstime(tmp_path):
    # Regression: the dHash-only guard called these five distinct (their hashes are 9 to 17 bits apart) and sent all.
    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 6))
    others = add_renders(wd, range(1, 2), scene=2) + add_renders(wd, range(2, 3), scene=3)
    copy = "zz_same_pixels.png"  # the first render's pixels in another encoding: a duplicate, not a sixth version
    with Image.open(wd.assets / renders[0]) as im:
        im.save(wd.assets / copy)
    write_sidecar(wd.sidecar(copy), Asset(name=copy, asset_id=sha256_file(wd.assets / copy), path=wd.assets / copy),
                  Metadata(title="Another title", description="d", keywords=["other", "words"]))
    report, sent = pack_and_upload(wd)
    assert all(report.held_back[a][copy].startswith(f"a duplicate of {renders[0]}: the same picture")
               for a in ("adobe", "dreamstime"))
    report.held_back = {a: {n: r for n, r in held.items() if n != copy} for a, held in report.held_back.items()}
    assert sorted(report.held_back["adobe"]) == renders[3:]
    reason = report.held_back["adobe"][renders[4]]
    assert reason.startswith(f"one of 5 versions of one motif (with {renders[0]}); adobe takes at most 3")
    assert f"microstock similar release {renders[4]} --agency adobe" in reason
    assert sorted(sent["adobe"].uploaded) == sorted(renders[:3] + others)
    assert sorted(sent["dreamstime"].uploaded) == sorted(renders + others)
    risks = read_risks(wd)
    assert {risks["dreamstime"][n].outcome for n in renders} == {"warned"}
    assert all(not risks[a][n].risky for a in risks for n in others)
    # the renders also share their title and keywords: a series named alike, warned whatever the score
    assert {risks["adobe"][n].same_words_as for n in renders[1:]} == {renders[0]}
    assert {risks["adobe"][n].same_words_as for n in [renders[0], *others]} == {""}
    assert "2 held back" in summary_notes(risks)["adobe"]
    rows = asset_rows(Gathered(assets=[Asset(name=n, asset_id="", path=wd.assets / n) for n in renders + others]),
                      DescribeReport(described=renders + others), CsvReport(), report, {}, [])
    add_risk_column(rows, risks)
    cell = next(r["similar"] for r in rows if r["asset"] == renders[4])
    assert "adobe: " in cell and " like " in cell and "held back" in cell


def test_an_upload_that_left_the_batch_still_counts_and_a_released_asset_is_sent_and_stays_released(tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    first = add_renders(wd, range(1, 4))
    pack_and_upload(wd)  # three versions uploaded to Adobe
    for name in first:  # the next batch holds only a new version
        (wd.assets / name).unlink()
        wd.sidecar(name).unlink()
    shutil.rmtree(wd.packs / "thumbs")  # the review form would show the portfolio's copy
    (new,) = add_renders(wd, range(7, 8))
    report, sent = pack_and_upload(wd)
    risk = read_risks(wd)["adobe"][new]
    assert new in report.held_back["adobe"] and sent["adobe"].uploaded == []
    assert risk.nearest in first and risk.nearest_uploaded and risk.versions == 4
    form = review_description(wd, described_sidecars(wd), report, CsvReport(), Settings())
    row = next(line for line in form.splitlines() if f"`{new}`" in line)
    assert "![nearest](data:image/jpeg;base64," in row and f" like {md_cell(risk.nearest)} (uploaded; " in row

    assert release_held_back(wd, new) == ["adobe"]
    report, sent = pack_and_upload(wd)
    assert sent["adobe"].uploaded == [new] and "adobe" not in report.held_back
    assert read_risks(wd)["adobe"][new].outcome == "released"
    assert release_held_back(wd, new, ["adobe"]) == []  # kept: releasing again adds nothing


def test_a_series_named_alike_on_different_images_is_found_and_offered_to_similar_distinct():
    from tasks.images.likeness import Signature, likeness
    from tasks.images.similar import Looks
    from tasks.stages.distinct import alike_assets
    from tasks.stages.similarity import same_words
    from tasks.stores.similar_risks import Risk

    words = ("flower", "bouquet", "roses", "red", "gift", "love", "romance", "petals", "fresh", "spring")
    a = Signature("a.jpg", "1", Looks(0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, bytes(48)), "Bouquet of flowers", words)
    b = Signature("b.jpg", "2", Looks(0xF0F0F0F0F0F0F0F0, 0xFF00FF00FF00FF00, bytes([200]) * 48),
                  "Bouquet of Flowers", words[:9] + ("vase",))  # 9 of the first ten shared
    c = Signature("c.jpg", "3", b.looks, "Bouquet of flowers", ("tulip", "yellow", *words[:5]))
    assert likeness(a, b).score < 0.4  # below every threshold: the score alone warns of nothing
    assert same_words([c, b, a]) == {"b.jpg": "a.jpg"}  # c shares the title but not its first keywords
    risks = {"adobe": {"a.jpg": Risk(0.3), "b.jpg": Risk(0.3, same_words_as="a.jpg"), "c.jpg": Risk(0.2)}}
    assert alike_assets(risks) == ["b.jpg"]


def test_many_copies_of_one_picture_are_one_asset_and_only_it_is_sent(tmp_path):
    """Regression (the cluster benchmark, 2026-12-03): a thousand copies of one picture, each with its own EXIF,
    sent 998 to Adobe. The portfolio index keeps one copy for all that look the same, so pair by pair only two
    were found duplicates, and the rest, kept out of the version groups as copies, were neither held nor capped.
    Copies are grouped by their pixels: one asset, the others held back as its duplicates everywhere."""
    wd = Workdir(tmp_path / "w").prepare()
    (original,) = add_renders(wd, range(1, 2))
    copies = [f"copy_{i}.jpg" for i in range(6)]
    with Image.open(wd.assets / original) as im:
        im.save(wd.assets / copies[0], quality=95, exif=Image.Exif())
    # One encoding, each copy with an EXIF description of its own (other bytes, other content id, the same
    # pixels), as the benchmark's assets are
    body = (wd.assets / copies[0]).read_bytes()
    for i, name in enumerate(copies):
        exif = Image.Exif()
        exif[0x010E] = f"copy number {i}"
        segment = exif.tobytes()
        start = body.index(b"\xff\xe1")
        end = start + 2 + int.from_bytes(body[start + 2:start + 4], "big")
        (wd.assets / name).write_bytes(body[:start] + b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment
                                       + body[end:])
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(wd.assets / name),
                                              path=wd.assets / name),
                      Metadata(title=f"Copy {i}", description="d", keywords=["other", "words", str(i)]))
    report, sent = pack_and_upload(wd)
    for agency in ("adobe", "dreamstime"):
        assert sorted(n for n in sent[agency].uploaded if n.startswith("copy_")) == [copies[0]], agency
        assert all(report.held_back[agency][n].startswith(f"a duplicate of {copies[0]}: the same picture")
                   for n in copies[1:]), agency
        assert {report.left_out_rule(agency, n) for n in copies[1:]} == {"duplicate"}


def _described(wd: Workdir, name: str, title: str, keywords: list[str]) -> None:
    write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(wd.assets / name), path=wd.assets / name),
                  Metadata(title=title, description=title, keywords=keywords))


def test_one_picture_saved_four_ways_reaches_each_agency_once_and_its_85_percent_crop_as_a_version(tmp_path):
    """Issue 55: a picture saved at q90, re-encoded at q75, scaled down and as PNG scored 1.00 on every signal,
    was counted as versions of one motif and sent twice to Adobe (identical pixels were the only duplicates)."""
    wd = Workdir(tmp_path / "w").prepare()
    picture = render_demo_image(DEMO_PROMPTS[0], random.Random(11), size=SIZE)
    picture.save(wd.assets / "a_q90.jpg", quality=90)
    with Image.open(wd.assets / "a_q90.jpg") as saved:
        saved.save(wd.assets / "b_q75.jpg", quality=75)
        saved.resize((SIZE[0] * 2 // 3, SIZE[1] * 2 // 3), Image.Resampling.LANCZOS).save(wd.assets / "c_small.jpg")
        saved.save(wd.assets / "d_export.png")
        w, h = saved.size
        saved.crop((w * 15 // 200, h * 15 // 200, w - w * 15 // 200, h - h * 15 // 200)).save(
            wd.assets / "e_crop.jpg", quality=90)  # 85 % of each side: a version
    ways = ["a_q90.jpg", "b_q75.jpg", "c_small.jpg", "d_export.png"]
    for n, name in enumerate([*ways, "e_crop.jpg"]):  # each copy described again: its own words
        _described(wd, name, f"Sunset number {n}", ["sunset", "sea", str(n)])
    report, sent = pack_and_upload(wd)
    for agency in ("adobe", "dreamstime"):
        assert sorted(sent[agency].uploaded) == ["a_q90.jpg", "e_crop.jpg"], agency
        assert {n: report.left_out_rule(agency, n) for n in ways[1:]} == dict.fromkeys(ways[1:], "duplicate")
        assert all(report.held_back[agency][n].startswith("a duplicate of a_q90.jpg: the same picture")
                   for n in ways[1:])
    risks = read_risks(wd)["adobe"]
    assert risks["e_crop.jpg"].versions == 2 and risks["e_crop.jpg"].motif == "a_q90.jpg", "a version, not a copy"


@pytest.mark.parametrize("later", ["city_web.jpg", "city.jpg"])  # under another name, or the upload's own
def test_a_later_re_encoding_of_an_uploaded_picture_is_held_back_as_its_duplicate(tmp_path, later):
    """Issue 55: duplicates were looked for in the batch only, so a re-export of a picture uploaded in an earlier
    batch (its file gone from the workdir since) was sent again as a version."""
    wd = Workdir(tmp_path / "w").prepare()
    picture = render_demo_image(DEMO_PROMPTS[2], random.Random(5), size=SIZE)
    picture.save(wd.assets / "city.jpg", quality=92)
    _described(wd, "city.jpg", "City at night", CITY)
    pack_and_upload(wd)
    with Image.open(wd.assets / "city.jpg") as saved:
        saved.load()
    (wd.assets / "city.jpg").unlink()
    wd.sidecar("city.jpg").unlink()
    saved.save(wd.assets / later, quality=70)
    _described(wd, later, "Town lights", ["town", "lights", "evening"])
    report, sent = pack_and_upload(wd)
    assert sent["adobe"].uploaded == [] and sent["dreamstime"].uploaded == []
    assert report.held_back["dreamstime"][later].startswith("a duplicate of city.jpg: the same picture")
    risk = read_risks(wd)["dreamstime"][later]
    assert (risk.outcome, risk.nearest, risk.nearest_uploaded) == ("duplicate", "city.jpg", True)
