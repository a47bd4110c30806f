"""Gemini Batch mode at the boundary: the real google-genai SDK against the test server's Batch API."""

from __future__ import annotations

import pytest
from PIL import Image

from tasks.core.errors import (
    BatchJobEnded,
    ContentBlocked,
    InvalidOutput,
    MicrostockError,
    OutputTruncated,
    PermanentError,
    TransientError,
)
from tasks.core.files import sha256_file
from tasks.core.records import Asset
from tasks.core.settings import GeminiSettings
from tasks.gemini import batch as batch_module
from tasks.gemini.batch import INLINE_LIMIT_BYTES, JOB_BUDGET_BYTES, GeminiBatches
from tasks.gemini.describer import GeminiDescriber
from tests.fakes.gemini import (  # noqa: F401
    FAKE_KEY,
    GOOD_METADATA,
    answer_json,
    answer_text,
    error,
    fake_gemini,
    finished,
    prompt_blocked,
    truncated,
)


def make_assets(tmp_path, n: int, size=(400, 300), noise: bool = False) -> list[Asset]:
    """``n`` different images (so ``n`` different asset ids)."""
    out = []
    for i in range(n):
        if noise:
            im = Image.effect_noise(size, 60 + i % 40).convert("RGB")
        else:
            im = Image.new("RGB", size, (i * 7 % 256, 120, 200))
            im.paste((250, 200, 60), (i % size[0], 0, i % size[0] + 20, size[1]))
        path = tmp_path / f"img{i:04d}.jpg"
        im.save(path, "JPEG", quality=95)
        out.append(Asset(name=path.name, asset_id=sha256_file(path), path=path))
    return out


@pytest.fixture
def batches(fake_gemini):
    return GeminiBatches(GeminiSettings(timeout_s=20), FAKE_KEY)


def finish(batches: GeminiBatches, name: str):
    """The job after the GETs that move it to its end (PENDING -> RUNNING -> end)."""
    batches.get(name)
    return batches.get(name)


def test_create_get_list_cancel_round_trip_through_the_sdk(fake_gemini, batches, tmp_path):
    assets = make_assets(tmp_path, 3)
    job = batches.submit([batches.request(a) for a in assets], "microstock-test-1")
    assert (job.state, job.done, job.display_name) == ("pending", False, "microstock-test-1")
    assert job.name.startswith("batches/") and job.created is not None
    create = fake_gemini.requests[-1]
    assert create.path == "/v1beta/models/gemini-3.5-flash-lite:batchGenerateContent"
    assert create.json["batch"]["displayName"] == "microstock-test-1"
    sent = create.json["batch"]["inputConfig"]["requests"]["requests"]
    assert [item["metadata"] for item in sent] == [{"asset_id": a.asset_id, "asset": a.name} for a in assets]

    assert batches.get(job.name).state == "running"
    done = batches.get(job.name)
    assert (done.state, done.done, done.failure()) == ("succeeded", True, None)
    assert [a.asset_id for a in done.answers] == [a.asset_id for a in assets]
    assert all(a.error is None and a.metadata.title == GOOD_METADATA["title"] for a in done.answers)
    assert done.answers[0].metadata.describer == "gemini-batch:gemini-3.5-flash-lite"

    other = batches.submit([batches.request(assets[0])], "microstock-test-2")
    assert [j.name for j in batches.jobs("microstock-test-")] == [other.name, job.name]  # newest first
    batches.cancel(other.name)
    cancelled = batches.get(other.name)
    assert (cancelled.state, cancelled.done, cancelled.answers) == ("cancelled", True, ())
    assert cancelled.failure().error_class == "batch:cancelled"
    batches.cancel(job.name)  # an ended job stays as it ended
    assert batches.get(job.name).state == "succeeded"
    assert fake_gemini.batch.created == 2 and len(fake_gemini.batch.requests) == 4


def test_a_job_ends_as_the_test_says_and_an_ended_job_without_answers_names_its_state(fake_gemini, batches, tmp_path):
    [asset] = make_assets(tmp_path, 1)
    fake_gemini.batch.end_as = ["expired", "failed", "cancelled"]
    names = [batches.submit([batches.request(asset)], f"mx-{i}").name for i in range(3)]
    ended = [finish(batches, n) for n in names]
    assert [j.state for j in ended] == ["expired", "failed", "cancelled"]
    assert all(j.done and j.answers == () for j in ended)
    failures = [j.failure() for j in ended]
    assert all(isinstance(f, BatchJobEnded) for f in failures)
    assert [f.error_class for f in failures] == ["batch:expired", "batch:failed", "batch:cancelled"]


def test_with_a_set_delay_a_job_runs_until_the_delay_has_passed(fake_gemini, batches, tmp_path):
    [asset] = make_assets(tmp_path, 1)
    fake_gemini.batch.finish_after_s = 3600
    name = batches.submit([batches.request(asset)], "mx-slow").name
    assert [batches.get(name).state for _ in range(4)] == ["running"] * 4
    fake_gemini.batch.finish_after_s = 0  # the delay is over
    assert batches.get(name).state == "succeeded"


def test_a_job_gemini_does_not_know_is_missing(fake_gemini, batches):
    job = batches.get("batches/never-made")
    assert (job.state, job.done, job.failure().error_class) == ("missing", True, "batch:missing")
    with pytest.raises(BatchJobEnded) as err:
        batches.cancel("batches/never-made")
    assert err.value.error_class == "batch:missing"


def sync_error(fake_gemini, reply, asset) -> MicrostockError:
    """What sync mode raises for ``reply`` on its last try (truncation: the second, larger call)."""
    describer = GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY)
    fake_gemini.push(reply)
    with pytest.raises(MicrostockError) as first:
        describer.describe(asset)
    if not isinstance(first.value, OutputTruncated):
        return first.value
    fake_gemini.push(reply)
    with pytest.raises(MicrostockError) as second:
        describer.describe(asset)
    return second.value


def test_a_job_of_30_with_5_failures_gives_25_metadata_and_the_sync_classes_for_the_rest(fake_gemini, batches,
                                                                                       tmp_path):
    assets = make_assets(tmp_path, 30)
    failing = {3: error(400, "Request contains an invalid argument."), 8: error(500, "Internal error encountered."),
               13: finished("SAFETY"), 21: answer_text("this is not JSON"), 27: truncated()}
    fake_gemini.push(*[failing.get(i, answer_json()) for i in range(30)])
    job = finish(batches, batches.submit([batches.request(a) for a in assets], "mx-30").name)
    assert job.state == "succeeded" and len(job.answers) == 30 and job.unmatched == 0
    by_asset = {a.asset_id: a for a in job.answers}
    assert sum(1 for a in job.answers if a.metadata is not None and a.error is None) == 25
    got = {i: by_asset[assets[i].asset_id].error for i in failing}
    assert all(by_asset[assets[i].asset_id].metadata is None for i in failing)
    assert isinstance(got[3], PermanentError) and got[3].error_class == "permanent:400"
    assert isinstance(got[8], TransientError) and got[8].error_class == "retryable:500"
    assert isinstance(got[13], ContentBlocked) and got[13].error_class == "blocked:SAFETY"
    assert isinstance(got[21], InvalidOutput) and got[21].error_class == "invalid_output"
    assert isinstance(got[27], PermanentError) and got[27].error_class == "truncated:MAX_TOKENS"
    for i, reply in failing.items():  # the very classes sync mode raises for the same answers
        sync = sync_error(fake_gemini, reply, assets[i])
        assert (type(got[i]), got[i].error_class) == (type(sync), sync.error_class), i


def test_a_blocked_prompt_and_a_quota_refusal_in_a_job_get_the_sync_classes(fake_gemini, batches, tmp_path):
    assets = make_assets(tmp_path, 2)
    fake_gemini.push(prompt_blocked("PROHIBITED_CONTENT"), error(429, "Resource has been exhausted."))
    job = finish(batches, batches.submit([batches.request(a) for a in assets], "mx-2").name)
    blocked, limited = (a.error for a in job.answers)
    assert blocked.error_class == "blocked:PROHIBITED_CONTENT"
    assert limited.error_class == "retryable:429"


def test_an_answer_costs_half_the_sync_price_of_the_same_tokens(fake_gemini, batches, tmp_path):
    [asset] = make_assets(tmp_path, 1)
    fake_gemini.push(answer_json(tokens=777, thoughts=40), answer_json(tokens=777, thoughts=40))
    sync = GeminiDescriber(GeminiSettings(timeout_s=5), FAKE_KEY).describe(asset)
    [answer] = finish(batches, batches.submit([batches.request(asset)], "mx-cost").name).answers
    assert answer.metadata.usage == sync.usage == answer.usage
    assert sync.cost_usd > 0
    assert answer.metadata.cost_usd == pytest.approx(sync.cost_usd / 2)


def test_no_batch_price_confirmed_means_cost_unknown(fake_gemini, tmp_path):
    batches = GeminiBatches(GeminiSettings(model="gemini-3.8-flash", timeout_s=5), FAKE_KEY)
    [asset] = make_assets(tmp_path, 1)
    [answer] = finish(batches, batches.submit([batches.request(asset)], "mx-38").name).answers
    assert answer.metadata is not None and answer.metadata.cost_usd is None


def test_the_inline_request_is_the_sync_request(fake_gemini, tmp_path):
    settings = GeminiSettings(model="gemini-3.8-flash", language="de", max_output_tokens=900, timeout_s=5)
    [asset] = make_assets(tmp_path, 1, size=(3000, 2000))
    GeminiDescriber(settings, FAKE_KEY).describe(asset)
    batches = GeminiBatches(settings, FAKE_KEY)
    batches.submit([batches.request(asset)], "mx-same")
    sync, inline = fake_gemini.requests[0], fake_gemini.batch.requests[0]
    assert inline.json == sync.json  # contents (image + prompt) and generationConfig, field for field
    assert inline.inline_images() == sync.inline_images() and len(sync.inline_images()) == 1
    assert "German" in inline.texts()[0]
    config = inline.json["generationConfig"]
    assert config["maxOutputTokens"] == 900 and "responseSchema" in config
    assert config["thinkingConfig"] == sync.json["generationConfig"]["thinkingConfig"]


def test_split_keeps_every_job_under_the_inline_limit_which_the_server_enforces(fake_gemini, batches, tmp_path,
                                                                                 monkeypatch):
    # The shipped limit is Google's 20 MB, which the test server enforces too; the budget leaves 10 % of it.
    assert INLINE_LIMIT_BYTES == fake_gemini.batch.max_body_bytes == 20 * 1024 * 1024
    assert JOB_BUDGET_BYTES == INLINE_LIMIT_BYTES * 9 // 10
    # The same rule at a tenth of the scale: 50 small images (~55 KB each as sent) against a 2 MiB limit.
    limit = 2 * 1024 * 1024
    budget = limit * 9 // 10
    monkeypatch.setattr(batch_module, "INLINE_LIMIT_BYTES", limit)
    monkeypatch.setattr(batch_module, "JOB_BUDGET_BYTES", budget)
    fake_gemini.batch.max_body_bytes = limit
    assets = make_assets(tmp_path, 50, size=(256, 256), noise=True)
    requests = [batches.request(a) for a in assets]
    assert sum(batches.size_of(r) for r in requests) > limit  # one job could not take them
    with pytest.raises(PermanentError) as refused:
        batches.submit(requests, "mx-too-big")
    assert refused.value.error_class == "permanent:400" and "exceeds the limit" in refused.value.message
    jobs = batches.split(requests)
    assert len(jobs) >= 2 and [r for job in jobs for r in job] == requests  # all of them, in order, once
    for i, job in enumerate(jobs):
        assert sum(batches.size_of(r) for r in job) <= budget
        batches.submit(job, f"mx-part-{i}")
        body = fake_gemini.requests[-1].raw_body
        assert len(body) < limit
        assert len(body) <= sum(batches.size_of(r) for r in job) + 1024  # size_of does not undercount
    assert len(fake_gemini.batch.requests) == 50


def test_jobs_are_found_by_display_name_prefix_across_list_pages(fake_gemini, batches, tmp_path, monkeypatch):
    monkeypatch.setattr(batch_module, "PAGE_SIZE", 3)
    [asset] = make_assets(tmp_path, 1)
    request = batches.request(asset)
    ours = [batches.submit([request], f"microstock-w1-{i}").name for i in range(5)]
    for i in range(4):
        batches.submit([request], f"someone-else-{i}")
    found = batches.jobs("microstock-w1-")
    assert sorted(j.name for j in found) == sorted(ours)
    assert all(j.answers == () for j in found)
    lists = [r for r in fake_gemini.requests if r.method == "GET" and r.path.startswith("/v1beta/batches?")]
    assert len(lists) == 3 and all("pageSize=3" in r.path for r in lists)  # 9 jobs, 3 a page, no filter sent
    assert batches.jobs("nothing-") == []


def test_answers_without_their_metadata_are_given_to_no_asset(fake_gemini, batches, tmp_path):
    assets = make_assets(tmp_path, 3)
    fake_gemini.batch.echo_metadata = False
    job = finish(batches, batches.submit([batches.request(a) for a in assets], "mx-nometa").name)
    assert (job.state, job.answers, job.unmatched) == ("succeeded", (), 3)


def test_no_key_in_any_error_message(fake_gemini, batches, tmp_path):
    assets = make_assets(tmp_path, 2)
    said = f"API key {FAKE_KEY} is not valid for this request."
    fake_gemini.push(error(400, said), error(503, said))
    job = finish(batches, batches.submit([batches.request(a) for a in assets], "mx-key").name)
    messages = [a.error.message for a in job.answers] + [str(a.error) for a in job.answers]
    fake_gemini.batch.max_body_bytes = 10  # the create itself refused
    with pytest.raises(MicrostockError) as refused:
        batches.submit([batches.request(assets[0])], f"mx-{FAKE_KEY}")
    messages += [refused.value.message, str(refused.value), repr(batches)]
    assert all(FAKE_KEY not in m for m in messages)
    assert any("[redacted]" in m for m in messages)


@pytest.mark.parametrize("grpc, http, error_class", [(3, 400, "permanent:400"), (8, 429, "retryable:429"),
                                                     (14, 503, "retryable:503"), (13, 500, "retryable:500"),
                                                     (16, 401, "auth"), (9, 400, "permanent:400")])
def test_a_status_code_is_read_as_grpc_and_as_http_alike(grpc, http, error_class):
    from tasks.gemini.client import Target, error_of_status

    target = Target("gemini.model", "gemini-3.5-flash-lite", "describe", "v1beta")
    by_grpc = error_of_status(grpc, "fake", None, target)
    by_http = error_of_status(http, "fake", None, target)
    assert by_grpc.error_class == error_class
    assert type(by_http) is type(by_grpc) and by_http.error_class == error_class
