"""End to end through the real SDK and the test Gemini server: the Dreamstime row says which asset is AI-generated."""

from __future__ import annotations

import csv

from PIL import Image

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tasks.images.provenance import TRAINED_ALGORITHMIC_MEDIA
from tests.fakes.gemini import FAKE_KEY, fake_gemini, image_or_metadata  # noqa: F401  (fixture)
from tests.images.test_provenance import xmp_source_type

FAST = "[gemini]\nrequests_per_minute = 6000\nrequests_per_day = 0\n"


def test_a_generated_assets_dreamstime_row_and_xmp_say_it_is_ai_generated_and_an_own_photos_do_not(
        prefect_harness, fake_gemini, monkeypatch, tmp_path):
    from flows.stock_batch import stock_batch

    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    fake_gemini.default = image_or_metadata
    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text(FAST)
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.new("RGB", (2500, 1800), (40, 120, 60)).save(photos / "own_meadow.jpg", quality=90)
    assert stock_batch(workdir=str(wd.root), count=1, return_state=True).is_completed()  # a Gemini image
    assert stock_batch(workdir=str(wd.root), source=str(photos), return_state=True).is_completed()  # own photo

    rows = {r["Filename"]: r
            for r in csv.DictReader((wd.csv / "dreamstime.csv").read_text(encoding="utf-8").splitlines())}
    (generated,) = [name for name in rows if name != "own_meadow.jpg"]
    assert read_sidecar(wd.sidecar(generated)).metadata.ai_generated
    assert "AI-generated" in rows[generated]["Description"]
    assert "212" in (rows[generated]["Category 1"], rows[generated]["Category 2"], rows[generated]["Category 3"])
    own = rows["own_meadow.jpg"]
    assert not read_sidecar(wd.sidecar("own_meadow.jpg")).metadata.ai_generated
    assert "AI" not in own["Description"] and "212" not in (own["Category 1"], own["Category 2"], own["Category 3"])
    assert sorted(p.name for p in wd.outbox("dreamstime").iterdir()) == sorted(rows)  # both were sent
    # and the files the agency received: the IPTC Digital Source Type on the generated one only
    assert xmp_source_type((wd.outbox("dreamstime") / generated).read_bytes()) == TRAINED_ALGORITHMIC_MEDIA
    assert xmp_source_type((wd.outbox("dreamstime") / "own_meadow.jpg").read_bytes()) is None
