"""Generated clips end to end (issue 38 item 4): ``run --clips N`` with a key makes them with Gemini's clip model
(the real SDK's Interactions client against the test server), and the stock-batch run describes, discloses and
takes them to the agencies that take clips."""

from __future__ import annotations

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fixture)
from tests.fakes.gemini_interactions import TOKENS_PER_SECOND
from tests.stages.test_assets_clips import CLIP, FAST


def test_a_gemini_clip_is_made_described_disclosed_and_delivered(prefect_harness, fake_gemini, monkeypatch,
                                                                  tmp_path):
    from flows.stock_batch import stock_batch

    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    wd = Workdir(tmp_path / "w").prepare()
    wd.config_file.write_text(FAST)
    summary = stock_batch(workdir=str(wd.root), clips=1, agencies=["adobe", "vecteezy"], return_state=True).result()

    [asked] = fake_gemini.interactions.created
    assert asked["model"] == "gemini-omni-1.2-flash" and asked["response_format"]["resolution"] == "1080p"
    described = [r for r in fake_gemini.requests if r.method == "POST" and ":generateContent" in r.path]
    assert len(described) == 1 and described[0].model == "gemini-3.5-flash-lite"  # the clip, described from itself
    assert summary["uploaded_now"] == {"adobe": 1, "vecteezy": 1}
    assert sorted(p.name for p in wd.outbox("adobe").iterdir()) == [CLIP]
    sidecar = read_sidecar(wd.sidecar(CLIP))
    assert sidecar.metadata.ai_generated and sidecar.provenance.model == "gemini-omni-1.2-flash"
    assert summary["ai_ticks"] == {"adobe": ("Created using generative AI tools", [CLIP])}
    assert (summary["generation_tokens"], summary["generation_cost_unknown"]) == (24 + TOKENS_PER_SECOND * 6, 1)
