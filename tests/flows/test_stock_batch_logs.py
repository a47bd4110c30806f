"""A stock-batch run's log says each thing about a file once: described, parked, rejected, uploaded to each agency."""

from __future__ import annotations

from collections import Counter
from io import BytesIO

from PIL import Image

from tasks.core.workdir import Workdir
from tests.fakes import prefect_api

FILES = ["red_fox.jpg", "green_hill.jpg", "tiny_sea.jpg"]
AGENCIES = ["adobe", "vecteezy", "dreamstime"]


def run_logs(flow_run_id) -> tuple[list, dict]:
    """The flow run's log records once every task run's last line is in, and its task runs' names by id."""
    logs = prefect_api.logs(flow_run_id)
    return logs, {run.id: run.name for run in prefect_api.task_runs(flow_run_id)}


def test_each_thing_about_a_file_is_said_once(prefect_harness, tmp_path, monkeypatch):
    from flows.stock_batch import stock_batch
    from tests.fakes.gemini import FAKE_KEY, FakeGemini, answer_json, finished

    def reply(req):  # a red image is blocked for SAFETY, any other gets valid metadata
        with Image.open(BytesIO(req.inline_images()[0][1])) as im:
            r, g, _ = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
        return finished("SAFETY") if r > 150 and g < 100 else answer_json()

    fake = FakeGemini().start()
    fake.default = reply
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    wd = Workdir(tmp_path / "data").prepare()
    Image.new("RGB", (2400, 1800), "red").save(wd.assets / "red_fox.jpg")
    Image.new("RGB", (2400, 1800), "green").save(wd.assets / "green_hill.jpg")
    Image.new("RGB", (600, 400), "blue").save(wd.assets / "tiny_sea.jpg")  # too small for every agency
    try:
        state = stock_batch(workdir=str(wd.root), count=0, agencies=AGENCIES, return_state=True)
    finally:
        fake.stop()
    assert state.is_completed() and state.message == "1 described · 1 parked · 1 rejected · 3 uploaded", state.message

    logs, task_runs = run_logs(state.state_details.flow_run_id)
    said: dict[str, list[str]] = {name: [] for name in FILES}
    for log in logs:
        for name in FILES:
            if name in log.message or task_runs.get(log.task_run_id, "").endswith(f"-{name}"):
                said[name].append(log.message)
    print("\n".join(f"{n}: {line}" for n, lines in said.items() for line in lines))  # shown when a test fails
    for name, lines in said.items():
        assert [line for line, n in Counter(lines).items() if n > 1] == [], name
    assert sum("blocked:SAFETY" in line for line in said["red_fox.jpg"]) == 1
    assert sum("too small" in line for line in said["tiny_sea.jpg"]) == 1
    for agency in AGENCIES:
        sent = [line for line in said["green_hill.jpg"] if f"outbox/{agency}/green_hill.jpg" in line]
        assert len(sent) == 1 and sent[0].startswith(f"{agency}: uploaded green_hill.jpg → "), sent
    described = [line for line in said["green_hill.jpg"] if "described in" in line]
    assert len(described) == 1 and "(Gemini " in described[0]

    # The night Gemini cannot be reached (issue 35): nothing parked, the new asset left pending, the run Incomplete
    # with the reason in its message — not a green "0 described · 1 parked".
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once closed
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{closed}")
    wd.config_file.write_text("[gemini]\nretry_delay_s = 0.05\nmax_attempts = 2\nrequests_per_minute = 6000\n",
                              encoding="utf-8")
    Image.new("RGB", (2400, 1800), "blue").save(wd.assets / "blue_lake.jpg")
    down = stock_batch(workdir=str(wd.root), count=0, agencies=AGENCIES, return_state=True)
    assert (down.type.value, down.name) == ("FAILED", "Incomplete"), (down.name, down.message)
    assert down.message.startswith("0 described · 0 parked · 1 pending · 1 rejected · 0 uploaded · stopped: gemini:"), \
        down.message
    assert "unreachable" in down.message and "connection to Gemini failed" in down.message
