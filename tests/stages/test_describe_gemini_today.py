"""Issue 13 in the describe stage: called plainly, the real google-genai SDK, the fake Gemini server (the whole
batch in real Prefect: tests/flows/test_stock_batch_check.py).

Whole-run refusals stop the stage after the first answer and park nothing;
each finish reason gets its decided class; the day's request budget is kept
in the workdir; every sidecar carries its usage and cost.
"""

from __future__ import annotations

import json

import pytest

from tasks.core.records import read_sidecar
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.daybudget import FILE_NAME, pacific_day
from tasks.stages.describe import describe_stage
from tasks.stages.run_context import RunContext
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import (  # noqa: F401  (fake_gemini is a fixture)
    FakeGemini,
    answer_json,
    fake_gemini,
    finished,
    location_refused,
    truncated,
    unknown_field,
)
from tests.stages.test_describe import Script, fast_settings, gemini_key, make_assets, stage_lines  # noqa: F401

NAMES = [f"w{i}.jpg" for i in range(8)]


@pytest.mark.parametrize("settings, reply, says", [
    (dict(model="gemini-2.0-flash-lite"), None,  # shut down, not in models.toml (its retired rows are not called)
     "`gemini.model = gemini-2.0-flash-lite` is not served any more"),
    (dict(model="gemini-9-flash"), None, "`gemini.model = gemini-9-flash` is not found for API version v1beta"),
    ({}, location_refused(), "User location is not supported"),
    ({}, unknown_field("thinkingConfig", "generation_config"), "`gemini.api_version = v1beta`"),
    ({}, finished("PUP_LIMITED_DISABLED"), "account is limited or disabled"),
], ids=["retired model", "unknown model", "location", "request shape", "restricted account"])
def test_a_whole_run_refusal_stops_the_stage_after_the_first_answers(fake_gemini, gemini_key,
                                                                     tmp_path, settings, reply, says):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, NAMES)
    if reply is not None:
        fake_gemini.default = lambda req: reply
    with stage_lines() as lines:
        report = describe_stage(RunContext(wd, fast_settings(concurrency=2, **settings)), assets)
    assert 1 <= len(fake_gemini.requests) <= 2, "at most the calls already in flight"
    assert says in report.stopped
    assert report.parked == {} and report.described == [] and sorted(report.pending) == NAMES
    assert open_store(wd, Settings()).list() == []
    logs = "\n".join(lines)  # the flow run of such a stop ends Completed: test_a_whole_batch_run_with_retired_models…
    assert logs.count("describe stopped:") == 1 and says in logs


def test_a_retired_model_names_current_ones_to_pick(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    report = describe_stage(RunContext(wd, fast_settings(model="gemini-2.5-flash")), make_assets(wd, ["a.jpg"]))
    assert "its replacement is gemini-3.5-flash-lite; or pick one of gemini-3.5-flash-lite" in report.stopped
    assert "docs/GEMINI.md" in report.stopped


FINISH = ["recited.jpg", "foreign.jpg", "escalated.jpg", "cut_twice.jpg", "cut_once.jpg", "odd.jpg"]


def test_each_finish_reason_gets_its_class(fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    assets = make_assets(wd, FINISH)
    script = Script(fake_gemini, FINISH)
    script.set("recited.jpg", finished("RECITATION"))
    script.set("foreign.jpg", finished("LANGUAGE"))
    script.set("escalated.jpg", finished("ESCALATION"))
    script.set("cut_twice.jpg", truncated(), truncated(reason="CONTINUATION"))
    script.set("cut_once.jpg", truncated(reason="CONTINUATION"))
    script.set("odd.jpg", *[finished("A_REASON_NEWER_THAN_THE_SDK")] * 3)
    report = describe_stage(RunContext(wd, fast_settings(max_attempts=3)), assets)
    assert report.parked == {"recited.jpg": "refused:RECITATION", "foreign.jpg": "refused:LANGUAGE",
                             "escalated.jpg": "blocked:ESCALATION", "cut_twice.jpg": "truncated:CONTINUATION",
                             "odd.jpg": "invalid_output"}
    assert report.described == ["cut_once.jpg"]
    assert {n: script.count(n) for n in FINISH} == {"recited.jpg": 1, "foreign.jpg": 1, "escalated.jpg": 1,
                                                   "cut_twice.jpg": 2, "cut_once.jpg": 2, "odd.jpg": 3}
    budgets = {}
    for req in fake_gemini.requests:
        budgets.setdefault(script.asset_of(req), []).append(req.json["generationConfig"]["maxOutputTokens"])
    assert budgets["cut_twice.jpg"] == budgets["cut_once.jpg"] == [2048, 4 * 2048]
    assert budgets["odd.jpg"] == [2048] * 3


def test_the_days_request_budget_stops_the_stage_before_it_is_spent_and_holds_across_runs(
        fake_gemini, gemini_key, tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = [f"d{i}.jpg" for i in range(5)]
    assets = make_assets(wd, names)
    settings = fast_settings(concurrency=1, requests_per_day=3)
    report = describe_stage(RunContext(wd, settings), assets)
    assert len(fake_gemini.requests) == 3 and len(report.described) == 3
    assert report.parked == {} and len(report.pending) == 2
    assert "`gemini.requests_per_day = 3`" in report.stopped and "midnight Pacific" in report.stopped
    counted = json.loads((wd.root / FILE_NAME).read_text())
    assert counted == {"day": pacific_day(), "models": {"gemini-3.5-flash-lite": 3}}
    again = describe_stage(RunContext(wd, settings), assets)  # the same day: nothing more is sent
    assert len(fake_gemini.requests) == 3 and again.described == [] and sorted(again.pending) == sorted(report.pending)


def test_every_sidecar_carries_usage_and_cost_and_the_report_sums_them(fake_gemini, gemini_key,
                                                                      tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = ["u0.jpg", "u1.jpg", "u2.jpg"]
    assets = make_assets(wd, names)
    script = Script(fake_gemini, names)
    script.fallback = lambda req: answer_json(tokens=1000, thoughts=40)  # 900 prompt, 60 answer, 40 thinking
    script.set("u2.jpg", truncated())  # 321 tokens: 261 prompt, 60 answer, billed too
    report = describe_stage(RunContext(wd, fast_settings()), assets)
    usage = {n: read_sidecar(wd.sidecar(n)).metadata.usage.model_dump() for n in names}
    assert usage["u0.jpg"] == usage["u1.jpg"] == {"prompt_tokens": 900, "output_tokens": 60, "thought_tokens": 40}
    assert usage["u2.jpg"] == {"prompt_tokens": 900 + 261, "output_tokens": 120, "thought_tokens": 40}
    cost = {n: read_sidecar(wd.sidecar(n)).metadata.cost_usd for n in names}
    assert cost["u0.jpg"] == pytest.approx((900 * 0.30 + 100 * 2.50) / 1e6)  # prices.toml: 3.5 Flash-Lite
    assert cost["u2.jpg"] == pytest.approx((1161 * 0.30 + 160 * 2.50) / 1e6)
    assert report.usage.prompt_tokens == 900 * 3 + 261 and report.usage.thought_tokens == 120
    assert report.cost_usd == pytest.approx(sum(cost.values())) and report.cost_unknown == 0


def test_a_model_without_a_confirmed_price_has_cost_unknown_said_once(fake_gemini, gemini_key,
                                                                      tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    names = ["p0.jpg", "p1.jpg"]
    with stage_lines() as lines:
        report = describe_stage(RunContext(wd, fast_settings(model="gemini-3.1-flash-lite")), make_assets(wd, names))
    assert [read_sidecar(wd.sidecar(n)).metadata.cost_usd for n in names] == [None, None]
    assert report.cost_unknown == 2 and report.cost_usd == 0
    assert "\n".join(lines).count("cost unknown for 2 asset(s): no confirmed price for gemini-3.1-flash-lite") == 1
