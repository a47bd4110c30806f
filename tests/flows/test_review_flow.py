"""A clip waits for review in a real stock-batch run as an image does (issue 38 item 5): the run pauses for both,
holds both when no answer comes in time, and a clip rejected from the terminal is never uploaded — on the session's
Prefect test server, with a real clip and the real pause (its time-out 1 s)."""

from __future__ import annotations

import csv
import json

import pyexiv2
from PIL import Image

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tests.fakes.clips import remuxed

CLIP, IMAGE = "harbour.mp4", "red_barn.jpg"


def batch_assets(flow_run_id) -> dict[str, dict]:
    """The run's ``batch-assets`` table, by asset."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["batch-assets"]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    data = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    return {row["asset"]: row for row in data}


def adobe_files(wd: Workdir) -> list[str]:
    return sorted(r["Filename"] for r in csv.DictReader((wd.csv / "adobe.csv").read_text("utf-8").splitlines()))


def test_a_run_holds_a_waiting_clip_and_never_uploads_one_rejected_from_the_terminal(prefect_harness, run_microstock,
                                                                                     tmp_path, clips):
    from flows.stock_batch import stock_batch

    source = tmp_path / "photos"
    source.mkdir()
    Image.new("RGB", (2400, 1800), "firebrick").save(source / IMAGE, quality=80)
    with pyexiv2.Image(str(source / IMAGE)) as img:  # the words its contributor wrote (issue 52)
        img.modify_iptc({"Iptc.Application2.ObjectName": "Red barn"})
    remuxed(clips["hd"], source / CLIP, {"title": "Harbour at dawn"})
    wd = Workdir(tmp_path / "work").prepare()
    wd.config_file.write_text('[review]\nenabled = true\ntimeout_hours = 0.0003\non_timeout = "hold"\n',
                              encoding="utf-8")

    held = stock_batch(workdir=str(wd.root), source=str(source), agencies=["adobe"], return_state=True)
    assert (held.type.value, held.name) == ("FAILED", "Incomplete"), held.message
    assert "2 waiting for review" in held.message
    assert not wd.outbox("adobe").exists() or list(wd.outbox("adobe").iterdir()) == [], "nothing leaves unseen"
    rows = batch_assets(held.state_details.flow_run_id)
    assert rows[CLIP]["describe"] == "waiting for review" and rows[CLIP]["adobe"].startswith("held back (review)")
    assert rows[CLIP]["clip"].startswith("MP4 · 5.0 s · 1920×1080 · 25 fps · h264 · no sound")
    assert rows[IMAGE]["clip"] == "" and rows[IMAGE]["describe"] == "waiting for review"

    for args in (("reject", CLIP), ("approve", IMAGE)):
        said = run_microstock("review", *args, "--workdir", str(wd.root), env={"PREFECT_API_URL": None})
        assert said.exit_code == 0, said.output
    assert read_sidecar(wd.sidecar(CLIP)).rejected

    sent = stock_batch(workdir=str(wd.root), agencies=["adobe"], return_state=True)
    assert sent.is_completed(), sent.message
    assert sorted(p.name for p in wd.outbox("adobe").iterdir()) == [IMAGE], "the rejected clip is not uploaded"
    assert adobe_files(wd) == [IMAGE]
    assert batch_assets(sent.state_details.flow_run_id)[CLIP]["describe"].startswith("rejected in review")
