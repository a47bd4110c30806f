"""The fake Gemini server itself: routes, recording, and the SDK's choice of path."""

from __future__ import annotations

import json

import httpx
import pytest
from PIL import Image

from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.describer import GeminiDescriber
from tasks.core.errors import PermanentError
from tasks.core.files import sha256_file
from tests.fakes.gemini import FAKE_KEY, answer_json, error, fake_gemini  # noqa: F401


@pytest.fixture
def asset(tmp_path) -> Asset:
    path = tmp_path / "a.jpg"
    Image.new("RGB", (64, 48), (1, 2, 3)).save(path, "JPEG")
    return Asset(name=path.name, asset_id=sha256_file(path), path=path)


def test_unknown_path_gets_the_real_404_and_leaves_the_script_alone(fake_gemini):
    fake_gemini.push(error(503))
    r = httpx.post(f"{fake_gemini.url}/v1/models/m:countTokens", json={"x": 1})
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"
    assert fake_gemini.requests[0].json == {"x": 1}
    r = httpx.post(f"{fake_gemini.url}/v1beta/models/m:generateContent", json={})
    assert r.status_code == 503  # the queued reply was still there
    assert len(fake_gemini.requests) == 2


def test_default_reply_is_valid_metadata_and_queue_comes_first(fake_gemini):
    fake_gemini.push(error(500))
    url = f"{fake_gemini.url}/v1/models/m:generateContent"
    assert httpx.post(url, json={}).status_code == 500
    body = httpx.post(url, json={}).json()
    assert json.loads(body["candidates"][0]["content"]["parts"][0]["text"])["adobe_category"] == 11
    assert body["usageMetadata"]["totalTokenCount"] == 321


def test_sdk_api_version_setting_is_served(fake_gemini, monkeypatch, asset):
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1beta")
    GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    assert fake_gemini.requests[0].path == "/v1beta/models/gemini-2.5-flash:generateContent"


def test_base_url_with_a_wrong_path_is_a_permanent_404(fake_gemini, monkeypatch, asset):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"{fake_gemini.url}/not-gemini/")
    with pytest.raises(PermanentError) as info:
        GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    assert info.value.error_class == "permanent:404"
    assert fake_gemini.requests[0].path.startswith("/not-gemini/v1/models/")
