"""A clip described by the Gemini describer with the real google-genai SDK against the fake server: inline when
small, else uploaded through the Files API, waited for until ACTIVE, used and deleted."""

from __future__ import annotations

import pytest

from tasks.core.errors import PermanentError, StageStopped, TransientError
from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.describer import GeminiDescriber
from tests.fakes.clips import make_clip
from tests.fakes.gemini import FAKE_KEY, GOOD_METADATA, answer_json, fake_gemini  # noqa: F401  (fixture)


def clip_asset(tmp_path, name="harbour.mp4", seconds=2) -> Asset:
    path = make_clip(tmp_path / name, 320, 180, seconds=seconds)
    return Asset(name=name, asset_id=sha256_file(path), path=path)


def describer(**settings) -> GeminiDescriber:
    return GeminiDescriber(GeminiSettings(timeout_s=5, video_poll_s=0.01, **settings), FAKE_KEY)


def _generate_requests(fake):
    return [r for r in fake.requests if r.path.endswith(":generateContent")]


def test_a_small_clip_goes_inline_with_the_prompt_after_it_and_low_media_resolution(fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    md = describer().describe(clip)
    assert md.title == GOOD_METADATA["title"] and md.describer == "gemini:gemini-3.5-flash-lite"
    assert fake_gemini.files.calls == []  # nothing uploaded
    (req,) = _generate_requests(fake_gemini)
    parts = req.json["contents"][0]["parts"]
    assert parts[0]["inlineData"]["mime_type"] == "video/mp4" and "text" in parts[1]  # the video first
    assert req.inline_images() == [("video/mp4", clip.path.read_bytes())]
    assert req.json["generationConfig"]["mediaResolution"] == "MEDIA_RESOLUTION_LOW"
    assert "video clip" in parts[1]["text"] and "image" not in parts[1]["text"].split("\n")[0]


def test_a_clip_over_the_inline_limit_is_uploaded_waited_for_used_by_uri_and_deleted(fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    fake_gemini.files.processing_gets = 2
    md = describer(video_inline_max_mb=clip.path.stat().st_size / 2e6, video_media_resolution="high").describe(clip)
    assert md.keywords
    calls = fake_gemini.files.calls
    assert [c[2] for c in calls] == ["started", "final", "PROCESSING", "PROCESSING", "ACTIVE", "deleted"]
    assert fake_gemini.files.files == {}  # deleted
    (req,) = _generate_requests(fake_gemini)
    part = req.json["contents"][0]["parts"][0]
    assert part["fileData"]["file_uri"].endswith("/files/fake000001") and part["fileData"]["mime_type"] == "video/mp4"
    assert req.inline_images() == []  # the bytes went through the upload only
    assert req.json["generationConfig"]["mediaResolution"] == "MEDIA_RESOLUTION_HIGH"
    uploaded = b"".join(r.raw_body for r in fake_gemini.requests if "upload_id=" in r.path)
    assert uploaded == clip.path.read_bytes()


def test_a_clip_the_service_fails_to_process_is_a_permanent_failure_and_is_deleted(fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    fake_gemini.files.processing_gets, fake_gemini.files.end_as = 1, "FAILED"
    with pytest.raises(PermanentError) as failed:
        describer(video_inline_max_mb=0.000001).describe(clip)
    assert failed.value.error_class == "permanent:clip_failed"
    assert "could not be processed" in failed.value.message
    assert _generate_requests(fake_gemini) == []  # nothing paid
    assert fake_gemini.files.calls[-1][2] == "deleted" and fake_gemini.files.files == {}


def test_a_clip_still_processing_after_the_wait_is_waited_for_by_the_next_attempt_and_deleted_when_the_job_ends(
        fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    fake_gemini.files.processing_gets = 10_000
    d = describer(video_inline_max_mb=0.000001, video_processing_wait_s=0.05)
    with pytest.raises(TransientError) as late:
        d.describe(clip)
    assert late.value.error_class == "retryable:processing"
    assert list(fake_gemini.files.files) == ["files/fake000001"] and _generate_requests(fake_gemini) == []
    fake_gemini.files.processing_gets = 0  # processed meanwhile
    assert d.describe(clip).title == GOOD_METADATA["title"]
    assert [c[2] for c in fake_gemini.files.calls].count("started") == 1  # the same file, not a second upload
    assert fake_gemini.files.files == {}  # described: deleted
    fake_gemini.files.processing_gets = 10_000
    with pytest.raises(TransientError):
        d.describe(clip)  # a new job of the same clip (a later run): uploaded again, kept after the failure
    assert len(fake_gemini.files.files) == 1
    d.job_over(clip)  # its attempts are spent: the kept file goes
    assert fake_gemini.files.files == {} and fake_gemini.files.calls[-1][2] == "deleted"


def test_a_429_keeps_the_uploaded_clip_for_the_next_attempt_and_a_file_gone_meanwhile_is_uploaded_again(
        fake_gemini, tmp_path):
    """A 500 MB clip was uploaded again on every retry; now a retried attempt names the file the first sent."""
    from tests.fakes.gemini import rate_limited

    clip = clip_asset(tmp_path)
    fake_gemini.files.processing_gets = 0
    d = describer(video_inline_max_mb=0.000001)
    fake_gemini.push(rate_limited())
    with pytest.raises(TransientError) as limited:
        d.describe(clip)
    assert limited.value.error_class == "retryable:429" and len(fake_gemini.files.files) == 1
    assert d.describe(clip).keywords
    first, second = (r.json["contents"][0]["parts"][0]["fileData"]["file_uri"] for r in _generate_requests(fake_gemini))
    assert first == second and [c[2] for c in fake_gemini.files.calls].count("started") == 1
    assert fake_gemini.files.files == {}

    fake_gemini.push(rate_limited())
    with pytest.raises(TransientError):
        d.describe(clip)
    fake_gemini.files.files.clear()  # expired (48 h) or deleted by hand before the next attempt
    assert d.describe(clip).keywords
    assert [c[2] for c in fake_gemini.files.calls].count("started") == 3  # gone: uploaded anew, not a failure


def test_a_clip_over_the_files_api_limit_is_parked_before_a_byte_is_uploaded(fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    size_mb = clip.path.stat().st_size / 1e6
    with pytest.raises(PermanentError) as refused:
        describer(video_inline_max_mb=size_mb / 4, video_upload_max_mb=size_mb / 2).describe(clip)
    assert refused.value.error_class == "permanent:clip_too_large"
    assert "gemini.video_upload_max_mb" in refused.value.message and "replay --include-doomed" in refused.value.message
    assert fake_gemini.files.calls == [] and _generate_requests(fake_gemini) == []


def test_a_clip_used_too_early_or_gone_is_transient_not_a_refused_key(fake_gemini, tmp_path):
    clip = clip_asset(tmp_path)
    from google.genai import types

    d = describer(video_inline_max_mb=0.000001)
    uploaded = d._client.files.upload(file=clip.path, config=types.UploadFileConfig(mime_type="video/mp4"))
    part = types.Part.from_uri(file_uri=uploaded.uri, mime_type="video/mp4")
    from tasks.gemini.client import map_gemini_errors

    with pytest.raises(TransientError) as early, map_gemini_errors(d._target, FAKE_KEY):
        d._client.models.generate_content(model=d.model, contents=[part, "describe"])
    assert early.value.error_class == "retryable:file_not_active"
    with pytest.raises(TransientError) as gone, map_gemini_errors(d._target, FAKE_KEY):
        d._client.files.get(name="files/nosuchfile")
    assert gone.value.error_class == "retryable:file_gone" and not isinstance(gone.value, StageStopped)


def test_tokens_and_cost_of_a_clip_are_in_its_metadata_its_sound_at_the_audio_price_where_confirmed(fake_gemini,
                                                                                                 tmp_path):
    clip = clip_asset(tmp_path)
    fake_gemini.push(answer_json(tokens=2000))
    md = describer().describe(clip)
    assert md.usage.prompt_tokens == 2000 - 60 and md.usage.output_tokens == 60
    assert md.cost_usd == pytest.approx((1940 * 0.30 + 60 * 2.50) / 1e6)

    def with_sound():
        answer = answer_json(tokens=2000)
        answer.body["usageMetadata"]["promptTokensDetails"] = [{"modality": "VIDEO", "tokenCount": 1500},
                                                               {"modality": "AUDIO", "tokenCount": 400}]
        return answer

    fake_gemini.push(with_sound())  # 3.5 Flash-Lite: "$0.30 (text / image / video / audio)"
    assert describer().describe(clip).cost_usd == pytest.approx((1540 * 0.30 + 400 * 0.30 + 60 * 2.50) / 1e6)
    fake_gemini.push(with_sound())
    assert describer(model="gemini-3.6-flash").describe(clip).cost_usd is None  # its audio price is not confirmed
    fake_gemini.push(answer_json(tokens=2000))
    assert describer(model="gemini-3.6-flash").describe(clip).cost_usd == pytest.approx(
        (1940 * 1.50 + 60 * 7.50) / 1e6), "a silent clip: priced"


def test_a_media_resolution_the_api_does_not_have_is_refused_by_the_test_server(fake_gemini, tmp_path):
    from google import genai
    from google.genai import errors, types

    client = genai.Client(api_key=FAKE_KEY, http_options=types.HttpOptions(
        api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)))
    with pytest.raises(errors.ClientError) as refused, pytest.warns(UserWarning, match="not a valid"):
        client.models.generate_content(model="gemini-3.5-flash-lite", contents=["x"],
                                       config={"media_resolution": "MEDIA_RESOLUTION_ULTRA"})
    assert refused.value.code == 400 and "media_resolution" in refused.value.message
