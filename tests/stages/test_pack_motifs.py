"""Near-duplicates and upscaling through pack and upload: what an agency is sent, and what is held back."""

from __future__ import annotations

import random

from PIL import Image, ImageDraw

from tasks.core.files import sha256_file
from tasks.core.records import Asset, Metadata, described_sidecars, read_sidecar, write_sidecar
from tasks.core.settings import PackSettings, Settings
from tasks.core.workdir import Workdir
from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tasks.images.inspect import ImageRules
from tasks.stages.csv import csvs_for_packed, write_agency_csvs
from tasks.stages.pack import finish_batch, pack_assets
from tasks.stages.run_context import RunContext
from tasks.stages.upload import upload_agency
from tasks.stores.pending import uploadable
from tests.images.test_similar import cropped

SIZE = (600, 450)
#: Adobe's cap of three versions per motif (adobe.toml), Dreamstime with none; sizes small for speed.
#: Keywords enough for a valid row at every agency these tests send to (the CSV decides what goes where).
CITY = ["city", "night", "lights", "street", "urban", "skyline", "buildings", "evening"]

RULES = {"adobe": ImageRules("adobe", 10_000, max_versions=3), "dreamstime": ImageRules("dreamstime", 10_000)}


def retouched(im: Image.Image, n: int) -> Image.Image:
    """A small retouch: a dark spot (3 % of the width across) at a place of its own, ``n``. (Sparse noise was
    this test's version once; it is the same picture however it was saved since issue 55, a duplicate.)"""
    out, r = im.copy(), im.width * 3 // 200
    x, y = im.width * (10 + 7 * n) // 100, im.height * (20 + 5 * n) // 100
    ImageDraw.Draw(out).ellipse((x - r, y - r, x + r, y + r), fill=(10, 10, 10))
    return out


def add_assets(wd: Workdir, versions: range, distinct: bool = True) -> list[str]:
    """Versions of one sunset (a small retouch or a slight crop each), and four other scenes; all described."""
    base = render_demo_image(DEMO_PROMPTS[0], random.Random(7), size=SIZE)
    images = {f"sunset_v{i}.jpg": retouched(base, i) if i % 2 else cropped(base, 0.004 * (i + 1)) for i in versions}
    if distinct:
        images |= {f"other_{i}.jpg": render_demo_image(DEMO_PROMPTS[i], random.Random(i), size=SIZE)
                   for i in (2, 3, 6, 7)}
    for name, im in images.items():
        im.save(wd.assets / name, quality=90)
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(wd.assets / name), path=wd.assets / name),
                      Metadata(title=name, description=name, keywords=["sunset"]))
    return sorted(images)


def pack_and_upload(wd: Workdir, settings: PackSettings = PackSettings(), rules=RULES) -> tuple:
    report = pack_assets(wd, settings, described_sidecars(wd), list(rules), rules=rules)
    csvs = write_agency_csvs(wd, list(rules), left_out={a: report.left_out(a) for a in rules},  # what goes where
                             packed=report)
    report = finish_batch(wd, report, csvs)
    items = uploadable(report, csvs, list(rules))
    return report, {a: upload_agency(wd, a, items[a]) for a in rules}


def test_a_capped_agency_gets_at_most_its_cap_of_one_motif_and_every_distinct_image(tmp_path):
    wd = Workdir(tmp_path / "work").prepare()
    add_assets(wd, range(6))
    versions = [f"sunset_v{i}.jpg" for i in range(6)]
    report, sent = pack_and_upload(wd)
    assert sent["adobe"].uploaded == ["other_2.jpg", "other_3.jpg", "other_6.jpg", "other_7.jpg"] + versions[:3]
    assert sorted(sent["dreamstime"].uploaded) == sorted(versions + [f"other_{i}.jpg" for i in (2, 3, 6, 7)])
    held = report.held_back["adobe"]
    assert sorted(held) == versions[3:]
    assert all("one of 6 versions of one motif (with sunset_v0.jpg); adobe takes at most 3" in r for r in held.values())
    assert report.similar_held == {"adobe": set(versions[3:])}
    assert {report.left_out_rule("adobe", name) for name in held} == {"similar content"}, "not just `image`"
    csvs = csvs_for_packed(RunContext(wd, Settings()), report)  # the CSV stage names the rule in its report
    assert {p.rule for p in csvs.problems if p.agency == "adobe" and p.asset in held} == {"similar content"}

    add_assets(wd, range(6, 7), distinct=False)  # a later batch with one more version of the motif
    report, sent = pack_and_upload(wd)
    assert sent["adobe"].uploaded == [] and sent["dreamstime"].uploaded == ["sunset_v6.jpg"]
    assert "sunset_v6.jpg" in report.held_back["adobe"]


def test_upscaling_is_off_by_default_and_when_chosen_enlarges_to_the_largest_minimum_and_says_so(tmp_path):
    wd = Workdir(tmp_path / "work").prepare()
    render_demo_image(DEMO_PROMPTS[2], random.Random(3), size=(480, 360)).save(wd.assets / "city.jpg", quality=90)
    write_sidecar(wd.sidecar("city.jpg"), Asset(name="city.jpg", asset_id=sha256_file(wd.assets / "city.jpg"),
                                                path=wd.assets / "city.jpg"),
                  Metadata(title="City at night", description="City at night", keywords=CITY))
    rules = {"adobe": ImageRules("adobe", 200_000), "dreamstime": ImageRules("dreamstime", 100_000)}
    plain, sent = pack_and_upload(wd, rules=rules)  # 0.17 MP: Dreamstime takes it, Adobe does not
    assert "city.jpg" in plain.held_back["adobe"] and plain.upscaled == {} and sent["adobe"].uploaded == []
    assert read_sidecar(wd.sidecar("city.jpg")).upscaled is None

    chosen, sent = pack_and_upload(wd, PackSettings(upscale_to_minimum=True), rules)
    assert sent["adobe"].uploaded == ["city.jpg"] and chosen.held_back == {}
    with Image.open(wd.outbox("adobe") / "city.jpg") as out:
        assert out.width * out.height >= 200_000 and abs(out.width / out.height - 4 / 3) < 0.01
    assert chosen.upscaled == {"city.jpg": f"480×360 → {out.width}×{out.height}"}
    recorded = read_sidecar(wd.sidecar("city.jpg")).upscaled  # the sidecar says so too
    assert (recorded.from_size, recorded.to_size, recorded.agencies) == ((480, 360), out.size, ["adobe", "dreamstime"])
    with Image.open(wd.assets / "city.jpg") as original:
        assert original.size == (480, 360)  # the contributor's file is never touched


def test_upscaling_for_named_agencies_only_never_sends_the_enlarged_copy_to_the_others(tmp_path):
    wd = Workdir(tmp_path / "work").prepare()
    for name, size in (("city.jpg", (480, 360)), ("field.jpg", (600, 450))):  # 0.17 MP and 0.27 MP
        render_demo_image(DEMO_PROMPTS[2], random.Random(len(name)), size=size).save(wd.assets / name, quality=90)
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(wd.assets / name), path=wd.assets / name),
                      Metadata(title="City at night", description="City at night", keywords=CITY))
    # Adobe (not named: it asks contributors not to upsample) takes 0.1 MP here, Dreamstime 0.25 MP
    rules = {"adobe": ImageRules("adobe", 100_000), "dreamstime": ImageRules("dreamstime", 250_000)}
    report, sent = pack_and_upload(wd, PackSettings(upscale_to_minimum=["dreamstime"]), rules)
    assert sent["dreamstime"].uploaded == ["city.jpg", "field.jpg"]
    with Image.open(wd.outbox("dreamstime") / "city.jpg") as out:
        assert out.width * out.height >= 250_000
    assert report.upscaled == {"city.jpg": f"480×360 → {out.width}×{out.height} for dreamstime"}
    assert sent["adobe"].uploaded == ["field.jpg"]  # the original size, never enlarged
    with Image.open(wd.outbox("adobe") / "field.jpg") as original:
        assert original.size == (600, 450)
    assert report.held_back == {"adobe": {"city.jpg": "480×360 passes adobe's rules; the upload-ready copy was "
                                                      "enlarged for dreamstime, and pack.upscale_to_minimum does "
                                                      "not name adobe"}}
