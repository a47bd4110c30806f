"""Clips in the describe stage (issue 38 item 3): the same job loop as images — Gemini from the clip itself
(the real SDK against the fake server, its Files API), the dead-letter park, batch mode's one-by-one clips — and
the offline describer from the clip's own tags."""

from __future__ import annotations

import pytest

from tasks.core.files import sha256_file
from tasks.core.records import Asset, read_sidecar
from tasks.core.settings import GeminiSettings, Settings
from tasks.core.workdir import Workdir
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tests.fakes.clips import make_clip
from tests.fakes.gemini import FAKE_KEY, GOOD_METADATA, answer_json, fake_gemini  # noqa: F401  (fixture)


@pytest.fixture
def gemini_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)


def settings(**gemini) -> Settings:
    base = dict(max_attempts=2, retry_delay_s=0.01, timeout_s=5, requests_per_minute=6000, requests_per_day=0,
                video_poll_s=0.01)
    return Settings(gemini=GeminiSettings(**(base | gemini)))


def clip(wd: Workdir, name="harbour.mp4", tags=None) -> Asset:
    path = make_clip(wd.assets / name, 320, 180, seconds=2, tags=tags)
    return Asset(name=name, asset_id=sha256_file(path), path=path)


def test_a_clip_over_the_inline_limit_is_uploaded_described_and_deleted_with_its_tokens_in_the_sidecar(
        fake_gemini, gemini_key, workdir):
    asset = clip(workdir)
    fake_gemini.push(answer_json(tokens=1500))
    report = describe_stage(RunContext(workdir, settings(video_inline_max_mb=0.000001)), [asset])
    assert report.described == ["harbour.mp4"] and report.tokens == 1500
    assert [c[2] for c in fake_gemini.files.calls] == ["started", "final", "PROCESSING", "ACTIVE", "deleted"]
    assert fake_gemini.files.files == {}
    sidecar = read_sidecar(workdir.sidecar("harbour.mp4"))
    assert sidecar.name == "harbour.mp4" and sidecar.metadata.title == GOOD_METADATA["title"]
    assert sidecar.metadata.usage.total == 1500 and sidecar.metadata.cost_usd > 0
    assert (sidecar.provenance.source, sidecar.provenance.width, sidecar.provenance.height) == ("own", 320, 180)
    assert sidecar.metadata.ai_generated is False  # the contributor's footage: no generator named in its tags


def test_a_clip_whose_attempts_all_fail_is_uploaded_once_parked_and_leaves_no_file_at_google(
        fake_gemini, gemini_key, workdir):
    """Both attempts get a 503: the second names the file the first uploaded, and the job's end deletes it."""
    from tests.fakes.gemini import error

    asset = clip(workdir)
    fake_gemini.push(error(503, "overloaded"), error(503, "overloaded"))
    report = describe_stage(RunContext(workdir, settings(video_inline_max_mb=0.000001)), [asset])
    assert report.parked == {"harbour.mp4": "exhausted:503"}
    steps = [c[2] for c in fake_gemini.files.calls]
    assert steps.count("started") == 1 and steps[-1] == "deleted" and fake_gemini.files.files == {}


def test_a_clip_the_service_fails_to_process_is_parked_with_the_reason_and_not_called_again(
        fake_gemini, gemini_key, workdir):
    asset = clip(workdir)
    fake_gemini.files.end_as = "FAILED"
    ctx = RunContext(workdir, settings(video_inline_max_mb=0.000001))
    report = describe_stage(ctx, [asset])
    assert report.parked == {"harbour.mp4": "permanent:clip_failed"}
    (job,) = ctx.store.list(status="parked")
    assert job.asset_name == "harbour.mp4" and "could not be processed" in job.error_message
    assert job.attempts == 1  # permanent: not tried again
    assert fake_gemini.files.files == {} and not workdir.sidecar("harbour.mp4").exists()
    again = describe_stage(RunContext(workdir, settings()), [asset])
    assert again.still_parked == ["harbour.mp4"] and len(fake_gemini.files.calls) == 5  # no new upload


def test_a_clip_used_before_it_was_active_waits_and_is_tried_again_not_parked(
        fake_gemini, gemini_key, workdir):
    from tests.fakes.gemini import error

    asset = clip(workdir)
    fake_gemini.push(error(400, "The File x is not in an ACTIVE state and usage is not allowed.",
                           status="FAILED_PRECONDITION"), answer_json())
    report = describe_stage(RunContext(workdir, settings()), [asset])  # small: inline, the reply scripted
    assert report.described == ["harbour.mp4"] and not report.parked


def test_in_batch_mode_a_clip_is_described_one_call_each(fake_gemini, gemini_key, workdir):
    asset = clip(workdir)
    report = describe_stage(RunContext(workdir, settings(mode="batch")), [asset])
    assert report.described == ["harbour.mp4"]
    assert any(r.path.endswith(":generateContent") for r in fake_gemini.requests)
    assert not any(":batchGenerateContent" in r.path for r in fake_gemini.requests)


def test_offline_a_clip_is_described_from_its_own_title_and_comment_tags(workdir, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    tagged = clip(workdir, "c0042.mp4", tags={"title": "Fishing boats leaving the harbour at dawn",
                                               "comment": "Boats and gulls over calm water"})
    plain = clip(workdir, "misty_forest_path.mov", tags={"comment": "OLYMPUS DIGITAL CAMERA"})
    report = describe_stage(RunContext(workdir, settings()), [tagged, plain])
    assert sorted(report.described) == ["c0042.mp4", "misty_forest_path.mov"] and report.describer == "offline"
    md = read_sidecar(workdir.sidecar("c0042.mp4")).metadata
    assert md.title == "Fishing boats leaving the harbour at dawn"
    assert md.description == "Boats and gulls over calm water" and "boats" in md.keywords
    named = read_sidecar(workdir.sidecar("misty_forest_path.mov")).metadata
    assert named.title == "Misty forest path" and named.description == "Misty forest path"  # the camera's caption


def test_a_parked_clip_renamed_since_is_found_by_its_content_and_replayed(
        fake_gemini, gemini_key, workdir):
    from tasks.stages.replay import replay_jobs

    asset = clip(workdir)
    fake_gemini.files.end_as = "FAILED"
    ctx = RunContext(workdir, settings(video_inline_max_mb=0.000001))
    assert describe_stage(ctx, [asset]).parked == {"harbour.mp4": "permanent:clip_failed"}
    asset.path.rename(workdir.assets / "harbour_dawn.mp4")
    fake_gemini.files.end_as = "ACTIVE"  # Google processes it this time
    report = replay_jobs(ctx, "test-replay", ctx.store.claim("test-replay", limit=5))
    assert report.recovered_assets == ["harbour_dawn.mp4"]
    assert read_sidecar(workdir.sidecar("harbour_dawn.mp4")).metadata.describer == "gemini:gemini-3.5-flash-lite"
    assert fake_gemini.files.files == {}
