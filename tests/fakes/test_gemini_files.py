"""The fake server's Files API against the real google-genai SDK: what the real service does, as sourced in
tests/fakes/gemini_files.py."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types

from tests.fakes.clips import make_clip
from tests.fakes.gemini import FAKE_KEY, answer_json, fake_gemini  # noqa: F401  (fixture)


def _client() -> genai.Client:
    return genai.Client(api_key=FAKE_KEY, http_options=types.HttpOptions(
        api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)))


def test_a_clip_uploads_resumably_is_processing_then_active_and_is_deleted(fake_gemini, tmp_path):
    clip = make_clip(tmp_path / "harbour.mp4", 320, 180, seconds=2)
    client = _client()
    fake_gemini.files.processing_gets = 2
    uploaded = client.files.upload(file=clip, config=types.UploadFileConfig(mime_type="video/mp4"))
    assert uploaded.state == types.FileState.PROCESSING
    assert bytes(fake_gemini.files.files[uploaded.name].data) == clip.read_bytes()
    states = [client.files.get(name=uploaded.name).state for _ in range(3)]
    assert states == [types.FileState.PROCESSING, types.FileState.PROCESSING, types.FileState.ACTIVE]
    part = types.Part.from_uri(file_uri=uploaded.uri, mime_type="video/mp4")
    fake_gemini.push(answer_json())
    assert client.models.generate_content(model="gemini-3.5-flash-lite", contents=[part, "describe"]).text
    client.files.delete(name=uploaded.name)
    assert uploaded.name not in fake_gemini.files.files
    with pytest.raises(errors.ClientError) as gone:
        client.files.get(name=uploaded.name)
    assert gone.value.code == 403 and "or it may not exist" in gone.value.message
    start = next(r for r in fake_gemini.requests if r.path == "/upload/v1beta/files")
    assert start.header("X-Goog-Upload-Protocol") == "resumable" and start.header("x-goog-api-key") == FAKE_KEY


def test_a_file_used_before_it_is_active_is_refused_with_failed_precondition(fake_gemini, tmp_path):
    clip = make_clip(tmp_path / "harbour.mp4", 320, 180, seconds=1)
    client = _client()
    uploaded = client.files.upload(file=clip, config=types.UploadFileConfig(mime_type="video/mp4"))
    part = types.Part.from_uri(file_uri=uploaded.uri, mime_type="video/mp4")
    with pytest.raises(errors.ClientError) as early:
        client.models.generate_content(model="gemini-3.5-flash-lite", contents=[part, "describe"])
    assert early.value.code == 400 and early.value.status == "FAILED_PRECONDITION"
    assert "is not in an ACTIVE state and usage is not allowed" in early.value.message


def test_a_file_can_end_failed(fake_gemini, tmp_path):
    clip = make_clip(tmp_path / "harbour.mp4", 320, 180, seconds=1)
    client = _client()
    fake_gemini.files.processing_gets, fake_gemini.files.end_as = 0, "FAILED"
    uploaded = client.files.upload(file=clip, config=types.UploadFileConfig(mime_type="video/mp4"))
    failed = client.files.get(name=uploaded.name)
    assert failed.state == types.FileState.FAILED and failed.error is not None


def test_an_unknown_file_is_the_real_403_and_a_download_path_is_not_served_here(fake_gemini):
    client = _client()
    with pytest.raises(errors.ClientError) as unknown:
        client.files.get(name="files/nosuchfile")
    assert unknown.value.code == 403 and unknown.value.status == "PERMISSION_DENIED"
    assert fake_gemini.files.handle("GET", "/v1beta/files/abc:download", None) is None
