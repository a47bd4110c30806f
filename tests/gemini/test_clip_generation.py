"""Clip generation with Gemini's clip model (issue 38 item 4): the real SDK's Interactions client against the fake
Gemini server's interactions (background create, in_progress → completed)."""

from __future__ import annotations

import base64
import json
from io import BytesIO

import av
import pytest

from tasks.core.errors import PermanentError, StageStopped
from tasks.core.settings import GeminiSettings, GenerateSettings
from tasks.gemini.clip_generation import GeminiClipMaker
from tasks.gemini.daybudget import DailyBudget
from tasks.images.demo import DEMO_PROMPTS, generated_name
from tasks.images.provenance import is_ai_generated, pending_generation, provenance_of
from tasks.stages.assets import generate_clips
from tests.fakes.gemini import FAKE_KEY, error, fake_gemini, rate_limited  # noqa: F401
from tests.fakes.gemini_interactions import TOKENS_PER_SECOND, failed_clip

PROMPT = DEMO_PROMPTS[0]


def maker(clip_wait_s: float = 60, resolution: str = "1080p", model: str = "gemini-omni-1.2-flash",
          sleeps: list | None = None) -> GeminiClipMaker:
    return GeminiClipMaker(GeminiSettings(clip_model=model, timeout_s=10, requests_per_minute=6000,
                                          clip_poll_s=0.01, clip_wait_s=clip_wait_s),
                           FAKE_KEY, GenerateSettings(clip_resolution=resolution),
                           sleep=(sleeps.append if sleeps is not None else lambda s: None))


def posts(fake) -> list:
    return [r for r in fake.requests if r.method == "POST" and r.path.split("?")[0].endswith("/interactions")]


def test_a_clip_is_asked_in_the_background_and_taken_when_completed(fake_gemini, tmp_path):
    fake_gemini.interactions.running_gets = 2
    sleeps: list[float] = []
    path = tmp_path / "sunset_c000.mp4"
    made = maker(sleeps=sleeps)(PROMPT, 0, path)

    [asked] = fake_gemini.interactions.created
    assert asked == {"model": "gemini-omni-1.2-flash", "background": True, "input": asked["input"],
                     "response_format": {"type": "video", "aspect_ratio": "16:9", "resolution": "1080p",
                                         "delivery": "inline"}}
    assert PROMPT.prompt in asked["input"] and "no recognizable people" in asked["input"]
    [create] = posts(fake_gemini)
    assert create.header("x-goog-api-key") == FAKE_KEY and FAKE_KEY not in create.path
    assert [c[2] for c in fake_gemini.interactions.calls] == ["in_progress", "in_progress", "in_progress",
                                                             "completed"]
    assert sleeps == [0.01, 0.01], "it looked again every gemini.clip_poll_s until the clip was made"
    with av.open(BytesIO(made.data)) as clip:  # the fake's MP4, remuxed with the prompt and the generator
        video = clip.streams.video[0]
        assert (video.codec_context.width, video.codec_context.height, video.codec_context.name) == (
            1920, 1080, "h264")
        assert clip.metadata["title"] == PROMPT.prompt
        assert clip.metadata["encoder"] == "prefect-microstock via Gemini gemini-omni-1.2-flash (AI-generated)"
    assert (made.usage.prompt_tokens, made.usage.output_tokens) == (24, TOKENS_PER_SECOND * 6)
    assert made.cost_usd is None, "no price of a clip model is confirmed: unknown, never guessed"


def test_a_generated_clip_is_recorded_as_made_by_a_model(fake_gemini, tmp_path):
    done = generate_clips(tmp_path, 1, [PROMPT], 0, maker())
    [asset] = done.assets
    provenance = provenance_of(asset.path)
    assert (provenance.source, provenance.generator, provenance.model) == ("generated", "gemini",
                                                                          "gemini-omni-1.2-flash")
    assert provenance.usage is not None and provenance.usage.output_tokens == TOKENS_PER_SECOND * 6
    assert is_ai_generated(provenance), "agencies' AI rules apply to it"
    assert not pending_generation(asset.path).exists(), "written: nothing left to take up"


def test_a_clip_still_being_made_is_taken_up_again_never_asked_for_twice(fake_gemini, tmp_path):
    fake_gemini.interactions.running_gets = 10**6  # never ready within this run
    path = tmp_path / generated_name(PROMPT, 0, 0, clip=True)
    done = generate_clips(tmp_path, 1, [PROMPT], 0, maker(clip_wait_s=0.05), sleep=lambda s: None)
    assert list(done.failed) == [path.name] and "still making the clip" in done.failed[path.name]
    assert not path.exists() and len(posts(fake_gemini)) == 1, "three attempts, one interaction"
    started = json.loads(pending_generation(path).read_text())["interaction"]
    assert {c[1].split("?")[0].rsplit("/", 1)[1] for c in fake_gemini.interactions.calls if c[0] == "GET"} == {
        started}, "every attempt looked at the interaction kept in the pending record"

    fake_gemini.interactions.running_gets = 0  # a later run: the clip is ready
    done = generate_clips(tmp_path, 1, [PROMPT], 0, maker())
    assert [a.name for a in done.assets] == [path.name] and not done.failed
    assert len(posts(fake_gemini)) == 1, "the run after took up the same interaction: no second paid call"
    assert not pending_generation(path).exists()


def test_a_failed_clip_is_reported_with_the_services_words_and_not_taken_up(fake_gemini, tmp_path):
    fake_gemini.interactions.end = failed_clip("The prompt could not be submitted: it may violate our policies.")
    path = tmp_path / "sunset_c000.mp4"
    with pytest.raises(PermanentError) as caught:
        maker()(PROMPT, 0, path)
    assert caught.value.error_class == "refused:failed"
    assert "may violate our policies" in caught.value.message and "v1_fake" in caught.value.message
    assert not pending_generation(path).exists(), "a final status: nothing left to take up"


def test_an_interaction_gemini_no_longer_shows_is_forgotten(fake_gemini, tmp_path):
    path = tmp_path / "sunset_c000.mp4"
    pending_generation(path).write_text(json.dumps({"interaction": "v1_expired"}))
    with pytest.raises(PermanentError) as caught:
        maker()(PROMPT, 0, path)
    assert caught.value.error_class == "refused:interaction_gone" and "v1_expired" in caught.value.message
    assert not pending_generation(path).exists() and posts(fake_gemini) == []
    maker()(PROMPT, 0, path)  # the next attempt asks anew
    assert len(posts(fake_gemini)) == 1


def test_a_model_that_is_not_a_clip_model_of_the_table_is_refused_before_any_call(fake_gemini, tmp_path):
    with pytest.raises(StageStopped) as caught:
        maker(model="veo-3.1-generate-preview")(PROMPT, 0, tmp_path / "a_c000.mp4")
    assert caught.value.kind == "model" and "gemini.clip_model = veo-3.1-generate-preview" in caught.value.message
    assert fake_gemini.requests == [], "nothing was sent"


def test_a_429_on_create_is_waited_out_as_a_rate_limit_not_an_attempt(fake_gemini, tmp_path):
    fake_gemini.interactions.refuse_creates.append(rate_limited("0.05s"))
    made = maker()(PROMPT, 0, tmp_path / "a_c000.mp4")
    assert made.data and len(posts(fake_gemini)) == 2 and len(fake_gemini.interactions.created) == 1


def test_a_refused_key_stops_generation_and_never_leaks(fake_gemini, tmp_path):
    fake_gemini.interactions.refuse_creates.append(
        error(400, f"API key not valid: {FAKE_KEY}", details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                                               "reason": "API_KEY_INVALID"}]))
    done = generate_clips(tmp_path, 2, [PROMPT], 0, maker())
    assert done.stopped and "GEMINI_API_KEY" in done.stopped and FAKE_KEY not in done.stopped
    assert len(posts(fake_gemini)) == 1, "stopped at the first refusal: the second clip was not asked for"


def test_the_clip_models_requests_count_in_the_days_budget(fake_gemini, tmp_path):
    budget = DailyBudget(tmp_path / "gemini-requests.json", "gemini-omni-1.2-flash", 1)
    clip = GeminiClipMaker(GeminiSettings(requests_per_minute=6000, clip_poll_s=0.01), FAKE_KEY, GenerateSettings(),
                           budget, sleep=lambda s: None)
    done = generate_clips(tmp_path, 2, [PROMPT], 0, clip)
    assert len(done.assets) == 1 and "gemini.requests_per_day = 1" in done.stopped
    assert len(fake_gemini.interactions.created) == 1, "the second clip was not asked for"


def test_a_finished_clip_that_cannot_be_read_is_not_taken_up_again(fake_gemini, tmp_path):
    fake_gemini.interactions.end = lambda asked: {"status": "completed", "steps": [{"type": "model_output", "content": [
        {"type": "video", "mime_type": "video/mp4", "data": base64.b64encode(b"not an mp4").decode()}]}]}
    path = tmp_path / "a_c000.mp4"
    with pytest.raises(PermanentError) as caught:
        maker()(PROMPT, 0, path)
    assert caught.value.error_class == "permanent:unreadable_clip" and "cannot be read as a video" in (
        caught.value.message)
    assert not pending_generation(path).exists(), "the same interaction would answer the same bytes"
