"""A contributor's real photo library, end to end (issue 25, point 7): `microstock run --source LIBRARY`, then a
bare `microstock run`. Every file of the library is delivered or named with its reason; the contributor's
metadata is in the upload-ready JPEG; the bare re-run generates nothing and repeats nothing."""

from __future__ import annotations

import json
import shutil
import subprocess

from tasks.core.records import iter_asset_files, read_sidecar
from tests.fakes import prefect_api
from tests.fakes.photo_library import write_library

AGENCIES = ("adobe", "vecteezy", "dreamstime")


def batch_assets(wd) -> dict[str, dict]:
    """asset -> its row of the newest run's batch-assets table."""
    run = prefect_api.flow_runs_with("stock-batch", workdir=str(wd))[0]
    [artifact] = prefect_api.artifacts(run.id, key="batch-assets")
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    return {row["asset"]: row for row in rows}


def test_a_real_library_then_a_bare_rerun(prefect_harness, run_microstock, tmp_path):
    library, wd = tmp_path / "Pictures", (tmp_path / "data").resolve()
    expected = write_library(library)
    first = run_microstock("run", "--source", str(library), "--workdir", str(wd), env={"COLUMNS": "400"})
    unseen = sum(1 for w in expected.values() if w.outcome == "asset" and not w.embedded)
    assert first.exit_code == 3, first.output[-3000:]  # the photos with nothing but their names go nowhere
    assert f"{unseen} held back everywhere: no describer saw it" in first.stdout, first.stdout[-3000:]
    assert "0 parked" in first.stdout, first.stdout[-3000:]
    rows = batch_assets(wd)
    assets = [p.name for p in iter_asset_files(wd / "assets")]
    for entry, want in expected.items():
        if want.outcome == "named":
            assert rows[entry]["describe"].startswith("rejected:") and want.detail in rows[entry]["describe"], \
                (entry, rows.get(entry))
            continue
        [name] = [a for a in assets if a == want.detail or (want.detail.endswith("_") and a.startswith(want.detail))]
        row = rows[name]
        assert row["describe"] == "described", (entry, row)
        if not want.embedded:
            assert all(row[a].startswith("held back (not seen)") for a in AGENCIES), (entry, row)
            continue
        assert any(row[a] == "uploaded" for a in AGENCIES), (entry, row)
        assert all(row[a] == "uploaded" or row[a].startswith("held back") for a in AGENCIES), (entry, row)
        assert read_sidecar(wd / "assets" / (name.rsplit(".", 1)[0] + ".json")).name == name
    assert len(assets) == sum(1 for w in expected.values() if w.outcome == "asset")  # twins apart, no copy twice

    # the offline describer read the legacy Latin-1 IIM and the XMP behind a corrupt EXIF block
    assert read_sidecar(wd / "assets" / "Café crème.json").metadata.title == "Café crème on a zinc bar"
    assert read_sidecar(wd / "assets" / "corrupt exif.json").metadata.title == "Red fishing boat in the harbour"
    tags = json.loads(subprocess.run([shutil.which("exiftool") or "exiftool", "-j", "-G1", "-a",
                                      str(wd / "packs" / "ready" / "lighthouse.jpg")],
                                     capture_output=True, text=True, check=True).stdout)[0]
    assert tags["XMP-dc:Creator"] == "Ana Fotógrafa" and tags["IPTC:CopyrightNotice"] == "© 2026 Ana Fotógrafa"
    assert "," not in tags["XMP-dc:Title"] and tags["IFD0:ImageDescription"] == tags["XMP-dc:Description"]

    bare = run_microstock("run", "--workdir", str(wd), env={"COLUMNS": "400"})
    assert bare.exit_code == 3, bare.output[-3000:]  # still held back: the way on is a describer or review edit
    assert "nothing is generated" in bare.stdout
    assert "0 described · 0 parked · 0 uploaded" in bare.stdout, bare.stdout[-3000:]
    assert [p.name for p in iter_asset_files(wd / "assets")] == assets  # no image nobody asked for


def test_a_deployment_run_without_parameters_generates_nothing():
    """Regression: the flow's count defaulted to 12, so a deployment run with no parameters (and a bare
    `microstock run`) made 12 images nobody asked for; the deployment now says its count."""
    import inspect
    from pathlib import Path

    import yaml

    from flows.stock_batch import stock_batch

    assert inspect.signature(stock_batch.fn).parameters["count"].default == 0
    spec = yaml.safe_load((Path(__file__).parents[2] / "prefect.yaml").read_text(encoding="utf-8"))
    [batch] = [d for d in spec["deployments"] if d["name"] == "stock-batch"]
    assert batch["parameters"]["count"] == 0
