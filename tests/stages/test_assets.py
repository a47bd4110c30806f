"""The assets stage: deterministic demo images, honest offline metadata, safe ingestion."""

from __future__ import annotations

import hashlib
from io import BytesIO
from pathlib import Path

import pyexiv2
import pytest
from PIL import Image

from tasks.core.records import Asset, Made, list_assets
from tasks.images.demo import DEMO_PROMPTS, demo_jpeg_bytes, generated_name
from tasks.stages.assets import generate
from tasks.stages.ingest import ingest
from tasks.stages.offline_describer import OfflineDescriber


def _photo(path: Path, colour, size=(2000, 1600)) -> Path:
    Image.new("RGB", size, colour).save(path, quality=85)
    return path


def test_demo_images_are_deterministic_varied_and_photo_sized():
    first = demo_jpeg_bytes(DEMO_PROMPTS[0], seed=0, index=0)
    assert demo_jpeg_bytes(DEMO_PROMPTS[0], seed=0, index=0) == first
    assert demo_jpeg_bytes(DEMO_PROMPTS[0], seed=0, index=8) != first
    assert demo_jpeg_bytes(DEMO_PROMPTS[0], seed=1, index=0) != first
    im = Image.open(BytesIO(first))
    assert im.width * im.height >= 4_000_000
    assert im.getexif()[0x010E] == DEMO_PROMPTS[0].prompt


def test_generated_names_fit_the_shortest_file_name_limit_of_the_specs():
    from tasks.agencies.spec import load_spec

    assert load_spec("adobe").filename.max_chars == 30  # the shortest today, read from adobe.toml
    for i, prompt in enumerate(DEMO_PROMPTS):
        assert len(generated_name(prompt, seed=123456, index=999 + i)) <= 30
    assert generated_name(DEMO_PROMPTS[0], 0, 7) == "sunset_sea_007.jpg"  # names stay as they were


def test_generate_keeps_existing_images(tmp_path):
    calls = []

    def make(prompt, i):
        calls.append(i)
        return Made(demo_jpeg_bytes(prompt, 0, i))

    first = generate(tmp_path, 2, list(DEMO_PROMPTS), 0, make).assets
    again = generate(tmp_path, 3, list(DEMO_PROMPTS), 0, make).assets
    assert calls == [0, 1, 2]
    assert [a.asset_id for a in again[:2]] == [a.asset_id for a in first]


def test_a_full_disk_while_generating_stops_the_run_and_keeps_the_images_made(tmp_path, monkeypatch):
    """ENOSPC injected where generation writes (``atomic_write_bytes``) from the third image on: the stage stops
    with the one disk_full line (before, the run went on to describe on a full disk), the two made are kept, and
    the re-run makes the rest without making those again."""
    import errno

    import tasks.stages.assets as assets_stage
    from tasks.core.errors import StageStopped
    from tasks.core.files import disk_of

    real, written, calls = assets_stage.atomic_write_bytes, [], []

    def small_disk(path, data):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)
        written.append(path.name)

    def make(prompt, i):
        calls.append(i)
        return Made(demo_jpeg_bytes(prompt, 0, i))

    monkeypatch.setattr(assets_stage, "atomic_write_bytes", small_disk)
    with pytest.raises(StageStopped) as stop:
        generate(tmp_path, 4, list(DEMO_PROMPTS), 0, make)
    assert stop.value.kind == "disk_full"
    assert stop.value.message.startswith(f"disk full: {disk_of(tmp_path)} has no room left for {tmp_path}")
    assert "2 asset(s) added and kept, 2 file(s) left for the next run" in stop.value.message
    assert sorted(p.name for p in tmp_path.glob("*.jpg")) == sorted(written)
    monkeypatch.setattr(assets_stage, "atomic_write_bytes", real)  # space freed
    assert len(generate(tmp_path, 4, list(DEMO_PROMPTS), 0, make).assets) == 4
    assert calls == [0, 1, 2, 2, 3]  # the third was made once before the disk refused it, then once again


def test_ingest_copies_unchanged_dedups_by_content_and_never_overwrites(tmp_path):
    src, assets = tmp_path / "src", tmp_path / "assets"
    src.mkdir(), assets.mkdir()
    original = _photo(src / "barn.jpg", "red")
    _photo(src / "barn_copy.jpg", "red")  # same bytes as barn.jpg
    report = ingest(src, assets)
    assert [a.name for a in report.added] == ["barn.jpg"] and report.already == ["barn_copy.jpg"]
    assert (assets / "barn.jpg").read_bytes() == original.read_bytes()
    assert report.added[0].asset_id == hashlib.sha256(original.read_bytes()).hexdigest()

    other = tmp_path / "other"
    other.mkdir()
    _photo(other / "barn.jpg", "blue")  # same name, different image
    added = ingest(other, assets).added
    assert len(added) == 1 and added[0].name.startswith("barn_") and added[0].name != "barn.jpg"
    assert (assets / "barn.jpg").read_bytes() == original.read_bytes()
    assert len(list_assets(assets)) == 2


def test_ingest_rejects_each_bad_file_with_its_reason_and_keeps_the_rest(tmp_path):
    src, assets = tmp_path / "src", tmp_path / "assets"
    src.mkdir(), assets.mkdir()
    _photo(src / "good.jpg", "green")
    (src / "empty.jpg").write_bytes(b"")
    (src / "fake.png").write_bytes(b"this is text")
    _photo(src / "tiny.jpg", "white", size=(800, 600))
    Image.new("RGB", (2000, 1600)).save(src / "scan.bmp")  # a TIFF is taken since issue 55; a BMP is not
    (src / "notes.txt").write_text("ignored: not an image extension")
    report = ingest(src, assets)
    assert [a.name for a in report.added] == ["good.jpg"]
    assert set(report.rejected) == {"empty.jpg", "fake.png", "tiny.jpg", "scan.bmp"}
    assert "0 bytes" in report.rejected["empty.jpg"]
    assert "not an image" in report.rejected["fake.png"]
    assert "too small" in report.rejected["tiny.jpg"]
    assert "unsupported" in report.rejected["scan.bmp"]


def _asset(path: Path) -> Asset:
    return Asset(name=path.name, asset_id="0" * 64, path=path)


def test_offline_describer_uses_the_demo_prompt(tmp_path):
    path = tmp_path / "x.jpg"
    path.write_bytes(demo_jpeg_bytes(DEMO_PROMPTS[2], 0, 2))
    meta = OfflineDescriber().describe(_asset(path))
    assert meta.title == DEMO_PROMPTS[2].prompt
    assert meta.keywords == list(DEMO_PROMPTS[2].keywords)
    assert "offline generator" in meta.description and meta.describer == "offline"


def test_offline_describer_reads_metadata_embedded_in_the_users_file(tmp_path):
    path = _photo(tmp_path / "IMG_0042.jpg", "grey")
    with pyexiv2.Image(str(path)) as img:
        img.modify_xmp({"Xmp.dc.title": {'lang="x-default"': "Old lighthouse"},
                        "Xmp.dc.description": {'lang="x-default"': "A lighthouse on a rocky coast"},
                        "Xmp.dc.subject": ["lighthouse", "coast", "sea"]})
    meta = OfflineDescriber().describe(_asset(path))
    assert (meta.title, meta.description, meta.keywords) == (
        "Old lighthouse", "A lighthouse on a rocky coast", ["lighthouse", "coast", "sea"])


def test_offline_describer_falls_back_to_the_file_name(tmp_path):
    meta = OfflineDescriber().describe(_asset(_photo(tmp_path / "misty-forest_path.jpg", "grey")))
    assert meta.title == "Misty forest path"
    assert meta.keywords == ["misty", "forest", "path"]


def test_offline_describer_does_not_call_a_gemini_image_a_demo(tmp_path):
    exif = Image.Exif()
    exif[0x010E] = DEMO_PROMPTS[0].prompt
    exif[0x0131] = "prefect-microstock via Gemini gemini-2.5-flash-image (AI-generated)"
    path = tmp_path / "gen.jpg"
    Image.new("RGB", (2000, 1600), "orange").save(path, exif=exif)
    meta = OfflineDescriber().describe(_asset(path))
    assert "offline generator" not in meta.description
    assert meta.description == DEMO_PROMPTS[0].prompt


def test_an_image_no_chosen_agency_takes_is_rejected_before_it_is_described(tmp_path):
    from io import BytesIO

    from PIL import Image

    from tasks.images.inspect import image_rules, too_small_for_all
    from tasks.stages.assets import gather

    def make(prompt, i):  # the first image comes back at 1184×864 (≈ 1 MP), the second at 2400×1800
        buf = BytesIO()
        Image.new("RGB", (1184, 864) if i == 0 else (2400, 1800), (90, 140, 200)).save(buf, "JPEG")
        return Made(buf.getvalue())

    def too_small_for(*agencies):  # the images' check before describe (tasks/stages/kinds.py ImageKind.unusable)
        return lambda assets: too_small_for_all(assets, [image_rules(a) for a in agencies])

    got = gather(tmp_path, 2, None, list(DEMO_PROMPTS), 0, make, too_small_for("adobe", "dreamstime"))
    small = generated_name(DEMO_PROMPTS[0], 0, 0)
    assert [a.name for a in got.assets] == [generated_name(DEMO_PROMPTS[1], 0, 1)]
    assert "1184×864" in got.rejected[small] and "adobe, dreamstime" in got.rejected[small]
    assert (tmp_path / small).exists()  # kept: it is never made (or paid for) again
    assert small not in [a.name for a in gather(tmp_path, 2, None, list(DEMO_PROMPTS), 0, make,
                                                too_small_for("dreamstime")).assets]
