"""Image generation with Gemini's image model: the real SDK against the fake Gemini server."""

from __future__ import annotations

from io import BytesIO

import pytest
from PIL import Image

from tasks.core.errors import ContentBlocked, InvalidOutput, PermanentError, StageStopped
from tasks.core.settings import GeminiSettings
from tasks.gemini.images import GeminiImageMaker
from tasks.images.contributor_meta import read_embedded
from tasks.images.demo import DEMO_PROMPTS
from tasks.stages.assets import generate
from tests.fakes.gemini import (  # noqa: F401
    FAKE_KEY,
    answer_image,
    answer_text,
    error,
    fake_gemini,
    finished,
    location_refused,
    model_retired,
    prompt_blocked,
    rate_limited,
)

PROMPT = DEMO_PROMPTS[0]


def png_bytes(size=(96, 72), mode="RGBA") -> bytes:
    im = Image.new(mode, size, (250, 120, 60, 255) if mode == "RGBA" else (250, 120, 60))
    im.paste((20, 40, 160, 0) if mode == "RGBA" else (20, 40, 160), (0, 0, size[0] // 2, size[1] // 2))
    buf = BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def maker(fake_gemini):
    return GeminiImageMaker(GeminiSettings(image_model="gemini-3-pro-image", timeout_s=5, requests_per_minute=6000),
                            FAKE_KEY)


def test_png_answer_becomes_a_jpeg_with_the_prompt_in_its_exif(fake_gemini, maker):
    fake_gemini.push(answer_image(png_bytes(), with_text="Here is your image"))
    data = maker(PROMPT, 0).data
    with Image.open(BytesIO(data)) as im:
        assert (im.format, im.mode, im.size) == ("JPEG", "RGB", (96, 72))
        assert im.getpixel((70, 50))[0] > 200  # the orange half survived
        assert im.getpixel((10, 10)) == pytest.approx((255, 255, 255), abs=8)  # transparency on white
        exif = im.getexif()
    assert exif[0x010E] == PROMPT.prompt
    assert "Gemini" in exif[0x0131] and "gemini-3-pro-image" in exif[0x0131]


def test_request_asks_the_image_model_for_an_image_only(fake_gemini, maker):
    fake_gemini.push(answer_image(png_bytes()))
    maker(PROMPT, 3)
    [req] = fake_gemini.requests
    assert req.model == "gemini-3-pro-image"
    assert req.json["generationConfig"]["responseModalities"] == ["IMAGE"]
    assert req.json["generationConfig"]["imageConfig"] == {"aspectRatio": "3:2",
                                                           "imageSize": "2K"}  # generate.* defaults
    # no sampling parameter, as in the describer's requests (docs/GEMINI.md, "Thinking and sampling")
    sampling = {"temperature", "topP", "topK", "presencePenalty", "frequencyPenalty"}
    assert not sampling & set(req.json["generationConfig"])
    assert PROMPT.prompt in req.texts()[0]
    assert req.header("x-goog-api-key") == FAKE_KEY and FAKE_KEY not in req.path


def test_jpeg_answer_is_kept_as_jpeg_and_tagged(fake_gemini, maker):
    buf = BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 10)).save(buf, "JPEG")
    fake_gemini.push(answer_image(buf.getvalue(), "image/jpeg"))
    with Image.open(BytesIO(maker(PROMPT, 0).data)) as im:
        assert im.format == "JPEG" and im.size == (64, 48)
        assert im.getexif()[0x010E] == PROMPT.prompt


def test_works_as_the_asset_generators_image_maker(fake_gemini, maker, tmp_path):
    fake_gemini.default = lambda req: answer_image(png_bytes())
    first = generate(tmp_path, 2, list(DEMO_PROMPTS), 0, maker).assets
    assert len(fake_gemini.requests) == 2
    assert [read_embedded(a.path).description for a in first] == [DEMO_PROMPTS[0].prompt, DEMO_PROMPTS[1].prompt]
    again = generate(tmp_path, 2, list(DEMO_PROMPTS), 0, maker).assets
    assert len(fake_gemini.requests) == 2  # existing images are kept, not generated again
    assert [a.asset_id for a in again] == [a.asset_id for a in first]


@pytest.mark.parametrize("reply, cls, error_class", [
    (finished("IMAGE_SAFETY"), ContentBlocked, "blocked:IMAGE_SAFETY"),
    (prompt_blocked("PROHIBITED_CONTENT"), ContentBlocked, "blocked:PROHIBITED_CONTENT"),
    (finished("IMAGE_PROHIBITED_CONTENT"), ContentBlocked, "blocked:IMAGE_PROHIBITED_CONTENT"),
    (finished("IMAGE_RECITATION"), PermanentError, "refused:IMAGE_RECITATION"),
    (finished("IMAGE_OTHER"), InvalidOutput, "invalid_output"),
    (finished("NO_IMAGE"), InvalidOutput, "invalid_output"),
    (answer_text("I cannot draw that, but here is a poem."), PermanentError, "refused:TEXT_ONLY"),
    (answer_image(b"definitely not an image"), InvalidOutput, "invalid_output"),
    (model_retired("gemini-3-pro-image"), StageStopped, "model"),
    (location_refused(), StageStopped, "location"),
])
def test_failures_map_like_the_describers(fake_gemini, maker, reply, cls, error_class):
    fake_gemini.push(reply)
    with pytest.raises(cls) as info:
        maker(PROMPT, 0)
    assert type(info.value) is cls and info.value.error_class == error_class
    assert FAKE_KEY not in str(info.value) and FAKE_KEY not in repr(maker)
    reason = (reply.body.get("candidates") or [{}])[0].get("finishReason") if isinstance(reply.body, dict) else None
    if reason and reason != "STOP":
        assert reason in str(info.value), "each image reason is named"


def test_a_429_is_waited_out_and_called_again_without_failing_the_image(fake_gemini, maker):
    fake_gemini.push(rate_limited("0.3s"), error(429, "Quota exceeded. Please retry in 0.2s."),
                     answer_image(png_bytes()))
    with Image.open(BytesIO(maker(PROMPT, 0).data)) as im:
        assert im.format == "JPEG"
    times = [r.at for r in fake_gemini.requests]
    assert len(times) == 3 and times[1] - times[0] >= 0.3 and times[2] - times[1] >= 0.2


def test_an_image_model_the_table_marks_retired_stops_generation_before_any_call(fake_gemini, tmp_path):
    """Issue 29: gemini-2.5-flash-image was still called (1 MP images no agency takes); the table's word counts."""
    maker = GeminiImageMaker(GeminiSettings(image_model="gemini-2.5-flash-image", requests_per_minute=6000), FAKE_KEY)
    result = generate(tmp_path, 4, list(DEMO_PROMPTS), 0, maker, sleep=lambda s: None)
    assert fake_gemini.requests == [] and result.assets == []
    assert "`gemini.image_model = gemini-2.5-flash-image` is retired (tasks/gemini/models.toml)" in result.stopped
    assert "its replacement is gemini-3.1-flash-image" in result.stopped


def test_an_image_model_gemini_no_longer_serves_stops_generation_after_one_call(fake_gemini, tmp_path):
    maker = GeminiImageMaker(GeminiSettings(image_model="gemini-3-pro-image-preview", requests_per_minute=6000),
                             FAKE_KEY)  # shut down, not in the table: Gemini's 404 decides
    result = generate(tmp_path, 4, list(DEMO_PROMPTS), 0, maker, sleep=lambda s: None)
    assert len(fake_gemini.requests) == 1 and result.assets == []
    assert "`gemini.image_model = gemini-3-pro-image-preview` is not served any more" in result.stopped
    assert "gemini-3.1-flash-image" in result.stopped


def test_an_image_that_cannot_be_made_is_left_for_the_next_run_and_the_others_go_on(fake_gemini, maker, tmp_path):
    from tests.fakes.gemini import error

    fake_gemini.push(finished("IMAGE_SAFETY"))  # image 0: permanent, no retry
    fake_gemini.push(error(503), error(503), answer_image(png_bytes()))  # image 1: two transient faults, then fine
    fake_gemini.push(answer_image(png_bytes()))  # image 2
    waits = []
    result = generate(tmp_path, 3, list(DEMO_PROMPTS), 0, maker, sleep=waits.append)
    names = [p.name for p in sorted(tmp_path.glob("*.jpg"))]
    assert [a.name for a in result.assets] == [DEMO_PROMPTS[1].slug + "_001.jpg", DEMO_PROMPTS[2].slug + "_002.jpg"]
    assert sorted(a.name for a in result.assets) == names
    assert list(result.failed) == [DEMO_PROMPTS[0].slug + "_000.jpg"]
    assert "IMAGE_SAFETY" in result.failed[DEMO_PROMPTS[0].slug + "_000.jpg"]
    assert len(waits) == 2 and result.stopped is None
    assert len(fake_gemini.requests) == 5


def test_a_daily_quota_stops_generation_at_once(fake_gemini, maker, tmp_path):
    from tests.fakes.gemini import daily_quota

    fake_gemini.push(answer_image(png_bytes()), daily_quota())
    result = generate(tmp_path, 4, list(DEMO_PROMPTS), 0, maker, sleep=lambda s: None)
    assert len(result.assets) == 1 and len(fake_gemini.requests) == 2
    assert result.stopped and "quota" in result.stopped.lower()


def test_each_image_call_logs_its_tokens_and_cost(fake_gemini, maker):
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tasks.gemini.images")
    logger.addHandler(handler)
    try:
        fake_gemini.push(answer_image(png_bytes(), tokens=1400))  # 1340 prompt, 60 output
        maker(PROMPT, 3)
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == [
        f"image 3 ({PROMPT.slug}) by gemini-3-pro-image: prompt 1340 · output 60 · thinking 0 tokens · "
        "cost unknown (no confirmed price)"]


def test_image_requests_take_from_the_days_budget_of_the_image_model(fake_gemini, tmp_path):
    from tasks.core.errors import StageStopped
    from tasks.gemini.daybudget import DailyBudget
    from tests.fakes.gemini import image_or_metadata

    fake_gemini.default = image_or_metadata
    budget = DailyBudget(tmp_path / "gemini-requests.json", "gemini-3-pro-image", 1)
    maker = GeminiImageMaker(GeminiSettings(image_model="gemini-3-pro-image", requests_per_minute=6000), FAKE_KEY,
                             budget=budget)
    made = maker(PROMPT, 0)
    assert made.usage.total == 1680  # the answer's usage comes back with the image
    with pytest.raises(StageStopped, match="gemini.requests_per_day = 1") as info:
        maker(PROMPT, 1)
    assert info.value.error_class == "quota:daily"
    assert len(fake_gemini.requests) == 1  # the second request was never sent
