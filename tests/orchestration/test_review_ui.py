"""The morning check as the UI shows it: a stock-batch run with a stopped agency and a review, read through
Prefect's API (the one the UI reads) on the session's real server — the paused run's message and form schema, a
mistyped answer refused, the final state's name and message, the agency task run's state, the artifacts."""

from __future__ import annotations

import json
import threading

import pytest

from tasks.core.workdir import Workdir
from tasks.orchestration.local_server import free_port
from tests.fakes import prefect_api
from tests.fakes.prefect_api import wait_until


def table(artifact) -> list[dict]:
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


def test_a_stopped_agency_and_a_review_read_true_through_the_api(prefect_harness, tmp_path):
    """Regression (issue 26): the run was a green ``Completed`` saying ``… 3 uploaded``; a reject typed without
    ``.jpg`` was taken as "approve all"; the paused run said nothing; two csv-validation artifacts."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.flow_runs import resume_flow_run

    from flows.stock_batch import stock_batch

    wd = Workdir(tmp_path / "data").prepare()
    closed = free_port()  # nothing listens there: dreamstime's data connection is refused, the agency stops
    wd.config_file.write_text(f'[review]\nenabled = true\ntimeout_hours = 1\n\n[agencies.dreamstime]\n'
                              f'target = "ftp://contributor@127.0.0.1:{closed}/"\nattempts = 1\ntimeout_s = 2\n'
                              'retry_delay_s = 0\n', encoding="utf-8")
    done: dict = {}
    run_thread = threading.Thread(target=lambda: done.update(state=stock_batch(
        workdir=str(wd.root), count=2, agencies=["vecteezy", "dreamstime"], return_state=True)))
    run_thread.start()
    try:
        paused = wait_until("the run to pause for review", lambda: [
            r for r in prefect_api.flow_runs_with("stock-batch", workdir=str(wd.root))
            if r.state and r.state.is_paused()], timeout_s=120)[0]
        beach, cliff = names = sorted(p.name for p in wd.assets.glob("*.jpg"))
        said, _, form = paused.state.message.partition(" · the form: ")
        assert said == ("2 asset(s) waiting for review — answer in the Prefect UI (the run → Resume) "
                        "or with `microstock review`")
        assert form.startswith("http://") and form.endswith(f"/runs/flow-run/{paused.id}"), paused.state.message
        keyset = paused.state.state_details.run_input_keyset

        def saved_form() -> str | None:  # saved just after the run is Paused (pause_flow_run's order too)
            with get_client(sync_client=True) as client:
                try:
                    return client.read_flow_run_input(paused.id, keyset["schema"])
                except PrefectHTTPStatusError as exc:
                    if exc.response.status_code == 404:
                        return None
                    raise

        schema = json.loads(wait_until("the review form to be saved", saved_form, timeout_s=30))
        assert schema["properties"]["reject"]["items"]["enum"] == names, "a picker"
        correction = schema["$defs"]["Correction"]["properties"]
        assert correction["file"]["enum"] == names
        assert {k: (correction[k]["type"], correction[k]["default"]) for k in ("title", "description", "keywords")} \
            == {k: ("string", "") for k in ("title", "description", "keywords")}, "text boxes, no None toggles"

        with pytest.raises(RuntimeError, match=f"'{beach[:-4]}' is not one of"):
            resume_flow_run(paused.id, run_input={"reject": [beach[:-4]]})
        with get_client(sync_client=True) as client:
            assert client.read_flow_run(paused.id).state.is_paused(), "a refused answer leaves the run waiting"
        resume_flow_run(paused.id, run_input={"reject": [beach]})
        run_thread.join(timeout=240)
    finally:
        if run_thread.is_alive():  # never leave the run waiting for an answer that will not come
            resume_flow_run(paused.id, run_input={"reject": names})
            run_thread.join(timeout=240)

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(paused.id)
    assert (run.state.type.value, run.state.name) == ("FAILED", "Incomplete")  # red in the UI, never "done"
    assert run.state.message.startswith("1 described") or run.state.message.startswith("2 described")
    assert "· 1 rejected in review ·" in run.state.message
    assert "1 upload(s) left pending: dreamstime stopped (" in run.state.message, run.state.message
    assert done["state"].name == "Incomplete"

    def uploads_recorded_finished() -> dict | None:
        """Both agencies' upload runs once the server has recorded their final states (it records task runs from
        events, a little after the flow has returned: a read before that saw them Running)."""
        runs = {t.name: t.state for t in prefect_api.task_runs(paused.id) if t.name.startswith("upload-")}
        finished = len(runs) == 2 and all(s is not None and s.type.value in prefect_api.FINISHED
                                          for s in runs.values())
        return runs if finished else None

    agencies = wait_until("the server to record both upload runs' final states", uploads_recorded_finished,
                          timeout_s=60)
    assert (agencies["upload-dreamstime"].name, agencies["upload-vecteezy"].name) == ("Stopped", "Completed")
    assert (agencies["upload-dreamstime"].type.value, agencies["upload-vecteezy"].type.value) == ("FAILED", "COMPLETED")
    assert "stopped:" in agencies["upload-dreamstime"].message
    describe = prefect_api.task_runs(paused.id, f"describe-{cliff}")[0]
    assert describe.empirical_policy.retries == 0 and describe.empirical_policy.retry_delay == 0

    arts = prefect_api.artifacts(paused.id)
    assert [a.key for a in arts].count("csv-validation") == 1, "one csv-validation per run: the final one"
    rows = {r["asset"]: r for r in table(next(a for a in arts if a.key == "batch-assets"))}
    assert rows[beach]["describe"] == "rejected in review"
    assert rows[beach]["dreamstime"].startswith("held back (review): rejected in review")
    assert rows[cliff]["vecteezy"] == "uploaded"
    assert rows[cliff]["dreamstime"].startswith("left pending: dreamstime stopped (")
    description = next(a for a in arts if a.key == "batch-assets").description
    assert "Fix first — dreamstime stopped" in description
    summary = next(a for a in arts if a.key == "batch-summary")
    assert summary.data.count("1 upload(s) left pending") == 1, "the headline once"
    assert "`ftp://contributor@127.0.0.1:" in summary.data
