"""`microstock run --source` with a clip and a Gemini key (the fake server; issue 38 item 3): the clip is described
from the clip itself — uploaded through the Files API, used once ACTIVE, deleted — and gets its Adobe row, its
tokens and cost in its sidecar and in the run's summary."""

from __future__ import annotations

import csv
import shutil

from tasks.core.records import read_sidecar
from tests.fakes.gemini import FAKE_KEY, GOOD_METADATA, answer_json, fake_gemini  # noqa: F401  (fixture)


def test_a_clip_is_described_by_gemini_from_its_frames_and_delivered_with_its_row(
        prefect_harness, run_microstock, fake_gemini, clips, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    source, wd = tmp_path / "footage", (tmp_path / "data").resolve()
    source.mkdir()
    wd.mkdir()
    shutil.copy(clips["hd"], source / "harbour.mp4")
    # the 49 kB test clip over the inline limit: it takes the Files API way
    (wd / "microstock.toml").write_text("[gemini]\nvideo_inline_max_mb = 0.01\nvideo_poll_s = 0.01\n"
                                        "requests_per_day = 0\nrequests_per_minute = 600\n", encoding="utf-8")
    fake_gemini.push(answer_json(tokens=2400))
    result = run_microstock("run", "--source", str(source), "--workdir", str(wd), "--agency", "adobe",
                            env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output[-3000:]

    [asked] = [r for r in fake_gemini.requests if r.path.endswith(":generateContent")]
    video, prompt = asked.json["contents"][0]["parts"]
    assert video["fileData"]["mime_type"] == "video/mp4" and "video clip" in prompt["text"]
    assert asked.json["generationConfig"]["mediaResolution"] == "MEDIA_RESOLUTION_LOW"
    assert [c[2] for c in fake_gemini.files.calls][-1] == "deleted" and fake_gemini.files.files == {}

    md = read_sidecar(wd / "assets" / "harbour.json").metadata
    assert md.describer == "gemini:gemini-3.5-flash-lite" and md.title == GOOD_METADATA["title"]
    assert md.usage.total == 2400 and md.cost_usd and md.cost_usd > 0
    rows = {r["Filename"]: r for r in csv.DictReader((wd / "csv" / "adobe.csv").read_text(encoding="utf-8")
                                                     .splitlines())}
    assert rows["harbour.mp4"]["Title"] == GOOD_METADATA["title"]
    assert (wd / "outbox" / "adobe" / "harbour.mp4").read_bytes() == clips["hd"].read_bytes()
    assert "of which clips" in result.stdout and "1 clip · 2,400 tokens" in result.stdout
