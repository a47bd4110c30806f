"""The limiter inside the describe stage (plain, no flow run), the real google-genai SDK, the fake Gemini server.

One call per asset on a clean run (the server's request log says so), tokens
counted per call and summed, and a 429 that holds back every describe job,
not only the refused one.
"""

from __future__ import annotations

import hashlib

import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset, read_sidecar
from tasks.core.reports import DescribeReport
from tasks.core.settings import GeminiSettings, KeywordSettings, Settings
from tasks.core.workdir import Workdir
from tasks.gemini.describer import GeminiDescriber
from tasks.observe.events import MemoryEvents
from tasks.stages.describe import describe_stage
from tasks.stages.describe_job import DescribeRun
from tasks.stages.offline_describer import OfflineDescriber
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import FAKE_KEY, answer_json, fake_gemini, rate_limited, slow  # noqa: F401  (fixture)


@pytest.fixture
def gemini_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


def make_assets(wd: Workdir, n: int) -> list[Asset]:
    assets = []
    for i in range(n):
        path = wd.assets / f"pic_{i:02d}.jpg"
        Image.new("RGB", (96, 64), (40 * i % 256, 255 - 30 * i % 256, 90)).save(path, quality=90)
        assets.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
    return assets


def gemini(**over) -> Settings:
    return Settings(gemini=GeminiSettings(**({"requests_per_minute": 6000, "requests_per_day": 0, "retry_delay_s": 0.05,
                                              "timeout_s": 5} | over)))


def run(wd: Workdir, settings: Settings, assets: list[Asset]) -> DescribeReport:
    return describe_stage(RunContext(wd, settings), assets)


def test_a_clean_run_makes_exactly_one_gemini_call_per_asset_and_counts_its_tokens(
        fake_gemini, gemini_key, workdir):
    assets = make_assets(workdir, 6)
    fake_gemini.default = lambda req: answer_json(tokens=321)
    rules = KeywordSettings(excluded=["calm"], vocabulary={"sundown": ["dusk"]}, protected_names=["Acme"])
    report = run(workdir, gemini(concurrency=3).model_copy(update={"keywords": rules}), assets)

    assert sorted(report.described) == sorted(a.name for a in assets)
    assert len(fake_gemini.requests) == 6
    # the contributor's keyword rules apply to Gemini's answer; the prompt names the words to avoid
    assert read_sidecar(workdir.sidecar(assets[0].name)).metadata.keywords == [
        "sunset", "sea", "sun", "horizon", "ocean", "evening", "orange sky", "water", "sundown"]
    (prompt,) = fake_gemini.requests[0].texts()
    assert "Never write these words or names" in prompt and all(w in prompt for w in ("Acme", "Mickey Mouse", "calm"))
    sent = {hashlib.sha256(req.inline_images()[0][1]).hexdigest() for req in fake_gemini.requests}
    assert len(sent) == 6, "some asset was sent twice and another never"
    assert report.tokens == 6 * 321
    assert {read_sidecar(workdir.sidecar(a.name)).metadata.tokens for a in assets} == {321}

    again = run(workdir, gemini(concurrency=3), assets)
    assert len(fake_gemini.requests) == 6, "a re-run called Gemini for assets already described"
    assert sorted(again.already) == sorted(a.name for a in assets) and again.tokens == 0


def test_a_429_holds_back_every_describe_job_until_its_retry_delay_is_over(
        fake_gemini, gemini_key, workdir):
    assets = make_assets(workdir, 8)
    fake_gemini.push(rate_limited("1s"))  # the first request to arrive, whichever asset it is
    fake_gemini.default = lambda req: slow(0.05)
    report = run(workdir, gemini(concurrency=3), assets)

    assert sorted(report.described) == sorted(a.name for a in assets)
    refused_at = fake_gemini.requests[0].at
    later = [r.at - refused_at for r in fake_gemini.requests[1:]]
    assert len(later) == 8  # 7 other assets + the refused one's retry
    during_pause = [t for t in later if t < 1.0]
    # Only calls already under way when the 429 came back (at most concurrency − 1) may arrive in the pause;
    # without the shared pause all 8 would (60 requests/s at this rate and latency).
    assert len(during_pause) <= 2, f"requests during the pause, seconds after the 429: {during_pause}"
    assert len([t for t in later if t >= 1.0]) >= 6


def test_gemini_calls_share_one_limiter_with_the_configured_rate_and_offline_calls_have_none(
        gemini_key, workdir):
    settings = gemini(requests_per_minute=90, concurrency=5)
    store = open_store(workdir, Settings())
    first = DescribeRun(workdir, settings, GeminiDescriber(settings.gemini, FAKE_KEY), store, MemoryEvents())
    second = DescribeRun(workdir, settings, GeminiDescriber(settings.gemini, FAKE_KEY), store, MemoryEvents())
    assert first.gate.limiter is second.gate.limiter  # two stage runs in one process share the quota
    assert (first.gate.limiter.per_minute, first.gate.limiter.concurrency) == (90, 5)
    assert DescribeRun(workdir, settings, OfflineDescriber(), store, MemoryEvents()).gate.limiter is None


def test_the_offline_describers_keywords_pass_the_same_keyword_rules(workdir):
    (asset,) = make_assets(workdir, 1)  # pic_00.jpg: the offline describer's keyword is its file name's "pic"
    settings = Settings(keywords=KeywordSettings(required=["travel"], vocabulary={"picture": ["pic"]}))
    describer = OfflineDescriber()
    run = DescribeRun(workdir, settings, describer, open_store(workdir, settings), MemoryEvents())
    run.save(asset, describer.describe(asset))
    assert read_sidecar(workdir.sidecar(asset.name)).metadata.keywords == ["picture", "travel"]
