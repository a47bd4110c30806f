"""The Gemini describer with the real google-genai SDK against the fake Gemini server."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO

import pytest
from PIL import Image

from tasks.core.errors import BadInput, TransientError
from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.describer import ADOBE_CATEGORIES, GeminiDescriber
from tests.fakes.gemini import FAKE_KEY, GOOD_METADATA, answer_json, error, fake_gemini  # noqa: F401
from tests.fakes.pack_samples import quadrant_jpeg


def make_asset(tmp_path, name="photo.jpg", size=(3000, 2000), mode="RGB", fmt="JPEG") -> Asset:
    im = Image.new(mode, size, (30, 120, 200) if mode == "RGB" else (30, 120, 200, 128))
    for x in range(0, size[0], 100):  # some structure, so the JPEG is not trivial
        im.paste((250, 200, 60) if mode == "RGB" else (250, 200, 60, 255), (x, 0, x + 20, size[1]))
    path = tmp_path / name
    im.save(path, fmt)
    return Asset(name=name, asset_id=sha256_file(path), path=path)


@pytest.fixture
def describer(fake_gemini):
    return GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY)


def test_request_goes_to_GOOGLE_GEMINI_BASE_URL_with_the_configured_model(fake_gemini, tmp_path):
    d = GeminiDescriber(GeminiSettings(model="gemini-3.8-flash", timeout_s=5), FAKE_KEY)
    d.describe(make_asset(tmp_path))
    assert len(fake_gemini.requests) == 1
    req = fake_gemini.requests[0]
    assert req.path.endswith("/models/gemini-3.8-flash:generateContent")
    assert req.path.split("/")[1] == "v1beta"  # gemini.api_version, not the SDK default (v1)
    assert d.name == "gemini:gemini-3.8-flash"


def test_success_maps_the_answer_to_metadata(fake_gemini, describer, tmp_path):
    answer = dict(GOOD_METADATA, keywords=["Sunset", " sea ", "sunset", "ocean  waves", "", "SEA"])
    fake_gemini.push(answer_json(answer, tokens=777))
    md = describer.describe(make_asset(tmp_path))
    assert md.title == GOOD_METADATA["title"]
    assert md.description == GOOD_METADATA["description"]
    assert md.keywords == ["Sunset", "sea", "ocean waves"]  # order kept, duplicates and blanks dropped
    assert md.adobe_category == 11
    assert md.category_hints == ["landscape", "nature", "sunsets", "seascapes"]
    assert md.describer == "gemini:gemini-3.5-flash-lite"
    assert md.tokens == 777
    assert md.language == "en"
    assert len(fake_gemini.requests) == 1


def test_sends_the_image_downscaled_to_1024_px_as_jpeg_with_schema_and_prompt(fake_gemini, describer, tmp_path):
    describer.describe(make_asset(tmp_path, size=(3000, 2000)))
    req = fake_gemini.requests[0]
    [(mime, data)] = req.inline_images()
    assert mime == "image/jpeg"
    with Image.open(BytesIO(data)) as sent:
        assert sent.format == "JPEG"
        assert sent.size == (1024, 683)
    [prompt] = req.texts()
    assert "English" in prompt
    assert all(f"{n} {name}" in prompt for n, name in ADOBE_CATEGORIES.items())
    gen = req.json["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    schema = gen["responseSchema"]
    assert set(schema["properties"]) == set(GOOD_METADATA)
    assert schema["properties"]["adobe_category"]["maximum"] == 21


def test_small_image_is_not_enlarged_and_png_alpha_becomes_jpeg(fake_gemini, describer, tmp_path):
    describer.describe(make_asset(tmp_path, name="logo.png", size=(300, 200), mode="RGBA", fmt="PNG"))
    [(mime, data)] = fake_gemini.requests[0].inline_images()
    with Image.open(BytesIO(data)) as sent:
        assert (mime, sent.format, sent.mode, sent.size) == ("image/jpeg", "JPEG", "RGB", (300, 200))


def test_sideways_jpeg_is_sent_upright(fake_gemini, describer, tmp_path):
    # stored left half red, right half blue, Orientation 6 (turn 90° clockwise to display):
    # upright, the red half is on top and the blue half below
    path = quadrant_jpeg(tmp_path / "turned.jpg", size=(1600, 1200), orientation=6)
    describer.describe(Asset(name=path.name, asset_id=sha256_file(path), path=path))
    [(_, data)] = fake_gemini.requests[0].inline_images()
    with Image.open(BytesIO(data)) as sent:
        assert sent.size == (768, 1024)
        top, bottom = sent.getpixel((384, 100)), sent.getpixel((384, 924))
    assert top[0] > 150 and top[2] < 80, top  # red
    assert bottom[2] > 150 and bottom[0] < 80, bottom  # blue


def test_language_setting_reaches_prompt_and_metadata(fake_gemini, tmp_path):
    d = GeminiDescriber(GeminiSettings(language="ja", timeout_s=5), FAKE_KEY)
    md = d.describe(make_asset(tmp_path))
    assert "Japanese" in fake_gemini.requests[0].texts()[0]
    assert md.language == "ja"


def test_key_travels_only_in_the_api_key_header(fake_gemini, describer, tmp_path):
    describer.describe(make_asset(tmp_path))
    req = fake_gemini.requests[0]
    assert req.header("x-goog-api-key") == FAKE_KEY
    assert FAKE_KEY not in req.path
    assert [k for k, v in req.headers if FAKE_KEY in v] == ["x-goog-api-key"]
    assert FAKE_KEY.encode() not in req.raw_body
    assert FAKE_KEY not in repr(describer) and FAKE_KEY not in str(describer)


def test_sdk_does_not_retry_on_its_own(fake_gemini, describer, tmp_path):
    fake_gemini.push(error(503), error(503), error(503))
    with pytest.raises(TransientError) as info:
        describer.describe(make_asset(tmp_path))
    assert info.value.error_class == "retryable:503"
    assert len(fake_gemini.requests) == 1


def test_unreadable_image_is_bad_input_and_makes_no_request(fake_gemini, describer, tmp_path):
    path = tmp_path / "broken.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(BadInput) as info:
        describer.describe(Asset(name="broken.jpg", asset_id=sha256_file(path), path=path))
    assert "broken.jpg" in str(info.value)
    assert fake_gemini.requests == []


def test_one_describer_serves_several_threads(fake_gemini, describer, tmp_path):
    assets = [make_asset(tmp_path, name=f"a{i}.jpg", size=(400, 300)) for i in range(8)]
    fake_gemini.default = lambda req: answer_json(dict(GOOD_METADATA, title=f"image {len(req.raw_body)}"))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(describer.describe, assets))
    assert len(results) == 8 and all(r.describer == "gemini:gemini-3.5-flash-lite" for r in results)
    assert len(fake_gemini.requests) == 8
    assert all(json.loads(r.raw_body)["contents"] for r in fake_gemini.requests)


def test_thinking_is_set_on_purpose_and_no_sampling_parameter_is_sent(fake_gemini, tmp_path):
    GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(make_asset(tmp_path))
    GeminiDescriber(GeminiSettings(model="gemini-3.8-flash", thinking="medium", timeout_s=5), FAKE_KEY).describe(
        make_asset(tmp_path))
    configs = [req.json["generationConfig"] for req in fake_gemini.requests]
    assert [c["thinkingConfig"] for c in configs] == [{"thinking_level": "MINIMAL"}, {"thinking_level": "MEDIUM"}]
    assert all(c["maxOutputTokens"] == 2048 for c in configs)
    sampling = {"temperature", "topP", "topK", "presencePenalty", "frequencyPenalty", "seed", "candidateCount"}
    assert all(not sampling & set(c) for c in configs)


def test_a_model_without_structured_output_stops_before_any_call(fake_gemini, tmp_path):
    from tasks.core.errors import StageStopped

    d = GeminiDescriber(GeminiSettings(model="gemini-3.1-flash-lite-image", timeout_s=5), FAKE_KEY)
    with pytest.raises(StageStopped, match="`gemini.model = gemini-3.1-flash-lite-image` has no structured output") \
            as info:
        d.describe(make_asset(tmp_path))
    assert info.value.error_class == "model"
    assert fake_gemini.requests == []


def test_a_16_bit_grey_tiff_is_shown_to_the_model_in_its_greys_not_white(tmp_path):
    """Issue 55: an editor's 16-bit grey TIFF is an asset now; Pillow's plain conversion of its 16-bit pixels to RGB
    clips every value over 255 to white, so Gemini was shown a blank page."""
    from tasks.gemini.describer import image_for_model

    Image.new("I;16", (64, 48), 30000).save(tmp_path / "scan.tif")  # 30000 / 65535: a middle grey
    sent = image_for_model(Asset(name="scan.tif", asset_id="0" * 64, path=tmp_path / "scan.tif"))
    with Image.open(BytesIO(sent)) as im:
        assert all(110 <= v <= 125 for v in im.convert("RGB").getpixel((10, 10)))
