"""Generation at a size agencies take, a whole stock-batch run through the real SDK against the test Gemini server.

The server makes images of the size the model, ``image_size`` and
``aspect_ratio`` of the request would give (tests/fakes/gemini.generated_image).
"""

from __future__ import annotations

import pytest
from PIL import Image

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tests.fakes.gemini import FAKE_KEY, answer_image, fake_gemini, image_or_metadata  # noqa: F401  (fixture)
from tests.stages.test_assets_gemini import FAST


def test_default_settings_make_images_every_enabled_agency_takes_end_to_end(prefect_harness, fake_gemini, monkeypatch,
                                                                           tmp_path):
    from flows.stock_batch import stock_batch

    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    fake_gemini.default = image_or_metadata
    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text(FAST)
    summary = stock_batch(workdir=str(wd.root), count=2, return_state=True).result()
    asked = [r.json["generationConfig"] for r in fake_gemini.requests if r.model.endswith("-image")]
    assert len(asked) == 2 and all(c["imageConfig"] == {"aspectRatio": "3:2", "imageSize": "2K"} for c in asked)
    assert summary["uploaded_now"] == {"adobe": 2, "vecteezy": 2, "dreamstime": 2} and summary["held_back"] == {}
    for path in wd.outbox("adobe").iterdir():
        with Image.open(path) as im:
            assert im.width * im.height >= 4_000_000 and abs(im.width / im.height - 1.5) < 0.02
    sent = sorted(p.name for p in wd.outbox("adobe").iterdir())
    assert summary["ai_ticks"] == {"adobe": ("Created using generative AI tools", sent)}  # Adobe's portal tick
    assert all(read_sidecar(wd.sidecar(name)).metadata.ai_generated for name in sent)
    provenance = read_sidecar(wd.sidecar(sent[0])).provenance  # what generating it cost, kept with the asset
    assert provenance.model == "gemini-3.1-flash-image" and provenance.usage.total == 1680
    assert provenance.cost_usd is None  # no confirmed price for this model (docs/GEMINI.md)
    assert (summary["generation_tokens"], summary["generation_cost_unknown"]) == (2 * 1680, 2)  # in the batch's total


@pytest.mark.parametrize("config", [FAST, FAST + '[pack]\nupscale_to_minimum = ["shutterstock"]\n'],
                         ids=["no upscaling", "upscaling for an agency not in the run"])
def test_an_undersized_image_is_never_described(prefect_harness, fake_gemini, monkeypatch, tmp_path, config):
    from io import BytesIO

    from flows.stock_batch import stock_batch

    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    buf = BytesIO()
    Image.new("RGB", (1184, 864), (30, 90, 160)).save(buf, "PNG")  # a 1 MP answer to a 2K request
    fake_gemini.push(answer_image(buf.getvalue()))
    fake_gemini.default = image_or_metadata
    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text(config)
    summary = stock_batch(workdir=str(wd.root), count=2, return_state=True).result()
    (small,) = [name for name, why in summary["rejected"].items() if "1184×864" in why]
    describe_calls = [r for r in fake_gemini.requests if r.method == "POST" and not r.model.endswith("-image")]
    assert len(describe_calls) == 1 and summary["described_now"] == 1  # only the other image was described
    assert not wd.sidecar(small).exists()
