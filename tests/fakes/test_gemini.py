"""The fake Gemini server itself: routes, recording, what it refuses as the real service does, the SDK's path."""

from __future__ import annotations

import json

import httpx
import pytest
from PIL import Image

from tasks.core.errors import StageStopped
from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini.describer import GeminiDescriber
from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json, error, fake_gemini  # noqa: F401

SERVED = "gemini-3.5-flash-lite"


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
    r = httpx.post(f"{fake_gemini.url}/v1beta/models/{SERVED}:generateContent", json={})
    assert r.status_code == 503  # the queued reply was still there
    assert len(fake_gemini.requests) == 2


def test_default_reply_is_valid_metadata_and_queue_comes_first(fake_gemini):
    fake_gemini.push(error(500))
    url = f"{fake_gemini.url}/v1beta/models/{SERVED}:generateContent"
    assert httpx.post(url, json={}).status_code == 500
    body = httpx.post(url, json={}).json()
    assert json.loads(body["candidates"][0]["content"]["parts"][0]["text"])["adobe_category"] == 11
    assert body["usageMetadata"]["totalTokenCount"] == 321


def test_the_configured_api_version_wins_over_the_sdks_environment(fake_gemini, monkeypatch, asset):
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    assert fake_gemini.requests[0].path == "/v1beta/models/gemini-3.5-flash-lite:generateContent"


def test_only_the_served_api_version_is_answered(monkeypatch, asset):
    fake = FakeGemini(api_version="v1").start()
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    try:
        with pytest.raises(StageStopped, match="gemini.api_version = v1beta") as info:
            GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
        assert info.value.error_class == "request_shape"
        metadata = GeminiDescriber(GeminiSettings(timeout_s=5, api_version="v1"), FAKE_KEY).describe(asset)
    finally:
        fake.stop()
    assert metadata.title and [r.path.split("/")[1] for r in fake.requests] == ["v1beta", "v1"]


def test_base_url_with_a_wrong_path_stops_with_the_setting_named(fake_gemini, monkeypatch, asset):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"{fake_gemini.url}/not-gemini/")
    with pytest.raises(StageStopped) as info:
        GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    assert info.value.error_class == "request_shape"
    assert fake_gemini.requests[0].path.startswith("/not-gemini/v1beta/models/")


@pytest.mark.parametrize("model, message", [
    ("gemini-2.0-flash-lite",  # shut down, and not in models.toml (a model the table marks retired is not called)
     "This model models/gemini-2.0-flash-lite is no longer available. Please update your code"),
    ("gemini-9-nope", "models/gemini-9-nope is not found for API version v1beta, or is not supported for "
                      "generateContent. Call ListModels"),
])
def test_retired_and_unknown_models_get_the_real_404(fake_gemini, asset, model, message):
    fake_gemini.push(error(503))
    r = httpx.post(f"{fake_gemini.url}/v1beta/models/{model}:generateContent", json={})
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"
    assert r.json()["error"]["message"].startswith(message)
    with pytest.raises(StageStopped, match=f"gemini.model = {model}") as info:
        GeminiDescriber(GeminiSettings(model=model, timeout_s=5), FAKE_KEY).describe(asset)
    assert info.value.error_class == "model"
    assert len(fake_gemini.requests) == 2 and fake_gemini._queue, "the script was not consulted"


@pytest.mark.parametrize("body, message", [
    ({"generationConfig": {"temprature": 0.2}},
     'Invalid JSON payload received. Unknown name "temprature" at \'generation_config\': Cannot find field.'),
    ({"contents": [], "generation_config": {"response_schema": {"type": "OBJECT", "properties": {
        "a": {"type": "STRING"}, "b": {"type": "ARRAY", "items": {"type": "STRING", "additionalProperties": False}}}}}},
     'Invalid JSON payload received. Unknown name "additionalProperties" at '
     "'generation_config.response_schema.properties[1].value.items': Cannot find field."),
    ({"generationConfig": {}, "safety": []},
     'Invalid JSON payload received. Unknown name "safety": Cannot find field.'),
])
def test_unknown_fields_and_schema_keywords_get_the_real_400(fake_gemini, body, message):
    r = httpx.post(f"{fake_gemini.url}/v1beta/models/{SERVED}:generateContent", json=body)
    err = r.json()["error"]
    assert r.status_code == 400 and err["status"] == "INVALID_ARGUMENT" and err["message"] == message
    assert err["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"


def test_snake_case_names_are_taken_as_the_real_proto_json_parser_takes_them(fake_gemini):
    body = {"generation_config": {"max_output_tokens": 10, "thinking_config": {"thinking_level": "LOW"},
                                  "response_schema": {"type": "OBJECT", "property_ordering": ["a"]}}}
    assert httpx.post(f"{fake_gemini.url}/v1beta/models/{SERVED}:generateContent", json=body).status_code == 200


def test_models_list_pages_as_the_real_api_and_get_answers_one_model(fake_gemini):
    fake_gemini.models.max_page_size = 3
    url = f"{fake_gemini.url}/v1beta/models"
    first = httpx.get(url, params={"pageSize": 5}).json()
    assert len(first["models"]) == 3 and first["nextPageToken"]  # 5 asked, at most max_page_size given
    names, token = [m["name"] for m in first["models"]], first["nextPageToken"]
    while token:
        page = httpx.get(url, params={"pageSize": 3, "pageToken": token}).json()
        names += [m["name"] for m in page["models"]]
        token = page.get("nextPageToken")  # left out on the last page
    assert names == [f"models/{m}" for m in fake_gemini.models.listed]
    assert httpx.get(url, params={"pageToken": "not-a-token"}).status_code == 400
    one = httpx.get(f"{url}/gemini-3.5-flash-lite").json()
    assert one["name"] == "models/gemini-3.5-flash-lite" and "generateContent" in one["supportedGenerationMethods"]
    assert {"version", "displayName", "inputTokenLimit", "outputTokenLimit", "baseModelId"} <= set(one)
    missing = httpx.get(f"{url}/gemini-9-nope")
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"


def test_the_sdk_lists_and_gets_models_through_the_fake(fake_gemini):
    from google import genai

    client = genai.Client(api_key=FAKE_KEY, http_options={"api_version": "v1beta"})
    listed = list(client.models.list(config={"page_size": 4}))
    assert [m.name for m in listed] == [f"models/{m}" for m in fake_gemini.models.listed]
    lite = client.models.get(model="gemini-3.5-flash-lite")
    assert lite.input_token_limit == 1_048_576 and "generateContent" in lite.supported_actions
    assert all(r.header("x-goog-api-key") == FAKE_KEY for r in fake_gemini.requests)
