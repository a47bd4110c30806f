"""The describer on an OpenAI-compatible endpoint (issue 52): the real ``openai`` SDK against the project's own Chat
Completions server on 127.0.0.1 (tests/fakes/chat_completions.py), through the plain describe stage (no Prefect):
it describes from the picture, retries, parks and stops as Gemini's describer does, and an unlisted model is
refused before any chat call."""

from __future__ import annotations

import io
import socket

import pytest
from PIL import Image

from flows.cli_common import CANNOT_START, EXIT_CODES
from tasks.core.errors import ConfigError
from tasks.core.records import read_sidecar
from tasks.core.settings import DescriberSettings, GeminiSettings, Settings
from tasks.stages.describe import describe_stage
from tasks.stages.kinds import pack_described
from tasks.stages.run_context import RunContext
from tests.fakes.chat_completions import (
    FAKE_OPENAI_KEY,
    MODEL,
    FakeChat,
    answer,
    error,
    fenced,
    rate_limited,
    server_error,
)
from tests.fakes.dead_letter_memory import MemoryDeadLetterStore
from tests.fakes.gemini import GOOD_METADATA
from tests.stages.test_describe import make_assets


@pytest.fixture
def chat():
    fake = FakeChat()
    yield fake
    fake.close()


def settings_for(url: str, model: str = MODEL) -> Settings:
    """The openai describer on ``url``; the stage's retries quick (``gemini.retry_delay_s``: the one policy)."""
    return Settings(describer=DescriberSettings(provider="openai", base_url=url, model=model, timeout_s=5,
                                                requests_per_minute=6000, concurrency=2),
                    gemini=GeminiSettings(max_attempts=3, retry_delay_s=0.01, requests_per_day=0))


def described(wd, settings, names=("lake.jpg",)):
    ctx = RunContext(wd, settings, ["adobe"], given_store=MemoryDeadLetterStore())
    assets = make_assets(wd, list(names))
    return ctx, describe_stage(ctx, assets)


def test_an_own_photo_is_described_from_its_picture_and_goes_on(workdir, chat):
    ctx, report = described(workdir, settings_for(chat.url))
    assert report.described == ["lake.jpg"] and report.describer == f"openai:{MODEL}"
    md = read_sidecar(workdir.sidecar("lake.jpg")).metadata
    assert (md.title, md.keywords[:3]) == (GOOD_METADATA["title"], GOOD_METADATA["keywords"][:3])
    assert (md.usage.prompt_tokens, md.usage.output_tokens, md.cost_usd) == (900, 120, 0.0), "local: no price"
    assert not md.from_file_name
    [sent] = chat.chats()
    assert sent.json["response_format"]["type"] == "json_schema"
    assert sent.json["response_format"]["json_schema"]["schema"]["required"][:3] == ["title", "description",
                                                                                     "keywords"]
    [picture] = sent.images()
    with Image.open(io.BytesIO(picture)) as im:
        assert (im.format, max(im.size)) == ("JPEG", 1024), "the picture itself, sized for the model"
    assert pack_described(ctx).not_seen == {}, "a describer saw it: it goes to the agencies"


def test_a_clip_is_shown_as_three_frames_evenly_spaced(workdir, chat):
    from tasks.core.files import sha256_file
    from tasks.core.records import Asset
    from tests.fakes.clips import make_clip

    path = make_clip(workdir.assets / "harbour.mp4", 1280, 720, seconds=6)  # a new colour each second
    ctx = RunContext(workdir, settings_for(chat.url), ["adobe"], given_store=MemoryDeadLetterStore())
    report = describe_stage(ctx, [Asset(name=path.name, asset_id=sha256_file(path), path=path)])
    assert report.described == ["harbour.mp4"]
    [sent] = chat.chats()
    assert "attached as 3 frames evenly spaced" in sent.json["messages"][0]["content"][0]["text"]
    colours = []
    for picture in sent.images():
        with Image.open(io.BytesIO(picture)) as im:
            assert (im.format, im.size) == ("JPEG", (768, 432))
            colours.append(im.convert("RGB").getpixel((10, 10))[0])
    assert len(colours) == 3 and colours == sorted(set(colours)), "three frames apart in time, in order"
    assert abs(colours[1] - 120) < 25, "the middle one is the poster's (second 3 of 6, red 3 × 40)"


def test_a_photo_held_back_for_its_file_name_is_described_again_once_an_endpoint_is_set(workdir, chat):
    offline = RunContext(workdir, Settings(), ["adobe"], given_store=MemoryDeadLetterStore())
    [asset] = make_assets(workdir, ["lake_sunset.jpg"])
    describe_stage(offline, [asset])
    assert read_sidecar(workdir.sidecar(asset.name)).metadata.from_file_name
    assert describe_stage(offline, [asset]).already == [asset.name], "offline: nothing new to say"

    ctx = RunContext(workdir, settings_for(chat.url), ["adobe"], given_store=MemoryDeadLetterStore())
    assert describe_stage(ctx, [asset]).described == [asset.name]
    md = read_sidecar(workdir.sidecar(asset.name)).metadata
    assert (md.title, md.from_file_name) == (GOOD_METADATA["title"], False)
    assert pack_described(ctx).not_seen == {}
    assert describe_stage(ctx, [asset]).already == [asset.name], "described once"


def test_a_model_that_ignores_response_format_answers_in_a_fenced_block(workdir):
    chat = FakeChat(ignores_response_format=True)
    try:
        _, report = described(workdir, settings_for(chat.url))
    finally:
        chat.close()
    assert report.described == ["lake.jpg"]
    assert read_sidecar(workdir.sidecar("lake.jpg")).metadata.title == GOOD_METADATA["title"]


def test_429_with_retry_after_and_5xx_are_retried(workdir, chat):
    chat.push(rate_limited(retry_after=0), server_error(503))
    _, report = described(workdir, settings_for(chat.url))
    assert report.described == ["lake.jpg"] and len(chat.chats()) == 3
    assert not report.parked and report.stopped is None


def test_an_image_the_model_cannot_read_parks_that_asset_only(workdir, chat):
    chat.push(error(400, "You uploaded an unsupported image. Please make sure your image is valid.",
                    "invalid_image"))
    _, report = described(workdir, settings_for(chat.url), ("lake.jpg", "hut.jpg"))
    assert len(report.parked) == 1 and next(iter(report.parked.values())) == "permanent:400"
    assert len(report.described) == 1 and report.stopped is None


def test_a_parked_job_is_replayed_through_the_same_endpoint(workdir, chat):
    from tasks.stages.replay import replay_jobs

    chat.push(error(400, "You uploaded an unsupported image. Please make sure your image is valid.", "invalid_image"))
    ctx, report = described(workdir, settings_for(chat.url))
    assert report.parked == {"lake.jpg": "permanent:400"}
    [job] = ctx.store.list(status="parked")
    assert (job.payload["describer"], job.payload["base_url"]) == (f"openai:{MODEL}", chat.url)
    replayed = replay_jobs(ctx, "test", ctx.store.claim("test", limit=5))
    assert (replayed.recovered, replayed.recovered_assets) == (1, ["lake.jpg"])
    assert read_sidecar(workdir.sidecar("lake.jpg")).metadata.describer == f"openai:{MODEL}"
    assert ctx.store.list(status="parked") == []


def test_5xx_every_time_is_parked_when_the_retries_run_out(workdir, chat):
    chat.default = lambda req: server_error(502)
    _, report = described(workdir, settings_for(chat.url))
    assert report.parked == {"lake.jpg": "exhausted:502"} and len(chat.chats()) == 3


def test_a_refused_key_stops_the_stage_in_one_line_and_never_shows_the_key(workdir, monkeypatch):
    chat = FakeChat(key="sk-the-right-one-0123456789abcdefghij")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    try:
        _, report = described(workdir, settings_for(chat.url))
    finally:
        chat.close()
    assert "answered 401" in report.stopped and "OPENAI_API_KEY" in report.stopped
    assert "\n" not in report.stopped and FAKE_OPENAI_KEY not in report.stopped
    assert not report.described and not report.parked and report.pending == ["lake.jpg"]
    assert len(chat.chats()) == 1, "a refused key is not asked again"
    assert all(r.headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}" for r in chat.requests)


def test_a_model_the_server_does_not_serve_stops_the_stage(workdir, chat):
    _, report = described(workdir, settings_for(chat.url, "gpt-4o"))
    assert "`describer.model = gpt-4o` is not served" in report.stopped
    assert not report.parked and report.pending == ["lake.jpg"]


def test_a_closed_port_stops_the_stage_and_leaves_the_assets_pending(workdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    _, report = described(workdir, settings_for(f"http://127.0.0.1:{port}/v1"))
    assert "unreachable" in report.stopped and report.pending == ["lake.jpg"] and not report.parked


def test_an_unlisted_model_is_refused_before_any_chat_call_exit_2(workdir, chat):
    ctx = RunContext(workdir, settings_for(chat.url, "gpt-4o"), ["adobe"])
    with pytest.raises(ConfigError, match=r"model = 'gpt-4o' is not served at .*it lists: llama3\.2:3b, qwen"):
        ctx.check(False, None)
    assert chat.chats() == [] and [r.path for r in chat.requests] == ["/v1/models"]
    assert dict(EXIT_CODES)[ConfigError] == CANNOT_START == 2
    RunContext(workdir, settings_for(chat.url), ["adobe"]).check(False, None)  # a listed one passes
    gemini_named = FakeChat(models=("models/gemini-2.5-flash",))
    try:
        RunContext(workdir, settings_for(gemini_named.url, "gemini-2.5-flash"), ["adobe"]).check(False, None)
    finally:
        gemini_named.close()


def test_an_answer_outside_the_schema_is_retried_then_parked_as_invalid_output(workdir, chat):
    chat.default = lambda req: answer('{"title": "Lake"}')
    _, report = described(workdir, settings_for(chat.url))
    assert report.parked == {"lake.jpg": "invalid_output"}


def test_fenced_json_text_is_read_whatever_surrounds_it():
    from tasks.openai_compat.describer import answer_of

    body = fenced().body["choices"][0]["message"]["content"]
    assert answer_of(body).title == GOOD_METADATA["title"]
    assert answer_of("Sure! " + answer().body["choices"][0]["message"]["content"] + " Done.").keywords[0] == "sunset"


def test_microstock_run_with_an_unlisted_model_exits_2_in_one_line_before_any_chat_call(tmp_path, chat):
    """The command's own check, before Prefect starts (in-process: typer's runner)."""
    from typer.testing import CliRunner

    from flows.cli import app

    wd, source = tmp_path / "work", tmp_path / "own"
    source.mkdir()
    wd.mkdir()
    (wd / "microstock.toml").write_text(f'[describer]\nprovider = "openai"\nbase_url = "{chat.url}"\n'
                                        'model = "gpt-4o"\n', encoding="utf-8")
    said = CliRunner().invoke(app, ["run", "--workdir", str(wd), "--source", str(source)], catch_exceptions=False)
    assert said.exit_code == 2, said.output
    assert said.stderr.strip().splitlines()[-1].startswith("error: [describer] model = 'gpt-4o' is not served at")
    assert chat.chats() == [] and not (wd / "assets").exists(), "nothing started, nothing written"


def test_microstock_models_lists_what_the_endpoint_serves(tmp_path, chat):
    from typer.testing import CliRunner

    from flows.cli import app

    (tmp_path / "microstock.toml").write_text(f'[describer]\nprovider = "openai"\nbase_url = "{chat.url}"\n'
                                              f'model = "{MODEL}"\n', encoding="utf-8")
    said = CliRunner().invoke(app, ["models", "--workdir", str(tmp_path)], catch_exceptions=False)
    assert said.exit_code == 0, said.output
    assert f"{chat.url} lists 2 model(s): llama3.2:3b, {MODEL} (describer.model)" in said.stdout
