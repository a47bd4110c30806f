"""Protected names in a photo's own keywords, end to end through the stock-batch flow in a real Prefect harness
(issue 39 item 1): not in the CSV, not in the upload-ready JPEG's XMP/IPTC (read back with exiftool), and said —
in the sidecar and in the ``batch-assets`` table. A hand-corrected sidecar naming one:
tests/stages/test_pack_names.py."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tasks.core.records import read_sidecar
from tasks.core.workdir import Workdir
from tests.fakes import prefect_api

#: What a Lightroom export of a sneaker photo says (dc:subject, IPTC Keywords and lr:hierarchicalSubject).
KEYWORDS = ["sneaker", "nike", "mickey mouse", "shoe", "red", "sport", "running", "footwear"]
HIERARCHY = ["Brands|nike", "Characters|mickey mouse", "Sport|running"]
REMOVED = {"nike": "protected name 'Nike' (brand)", "mickey mouse": "protected name 'Mickey Mouse' (character)"}


def _exiftool(*args: str) -> str:
    if shutil.which("exiftool") is None:
        pytest.fail("exiftool is not installed: `make test` installs it (Debian's libimage-exiftool-perl)")
    return subprocess.run(["exiftool", *args], capture_output=True, text=True, check=True).stdout


def _embedded(path: Path) -> dict[str, object]:
    """Every XMP and IPTC tag exiftool reads in ``path`` (``-G1``: its group named)."""
    tags = json.loads(_exiftool("-j", "-G1", "-a", "-XMP:all", "-IPTC:all", str(path)))[0]
    return {k: v for k, v in tags.items() if k.startswith(("XMP", "IPTC"))}


def _named(tags: dict[str, object], *words: str) -> list[str]:
    return [f"{k}={v}" for k, v in tags.items() if any(w in json.dumps(v).casefold() for w in words)]


def _adobe_keywords(wd: Workdir) -> list[str]:
    [row] = list(csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines()))
    return row["Keywords"].split(",")


def test_protected_names_in_a_photos_keywords_leave_neither_in_the_csv_nor_embedded_and_are_said(
        prefect_harness, tmp_path):
    from flows.stock_batch import stock_batch

    source = tmp_path / "photos"
    source.mkdir()
    photo = source / "red_sneaker.jpg"
    Image.new("RGB", (2400, 1800), "red").save(photo, quality=80)
    _exiftool("-q", "-overwrite_original", *(f"-XMP-dc:Subject={k}" for k in KEYWORDS),
              *(f"-IPTC:Keywords={k}" for k in KEYWORDS), *(f"-XMP-lr:HierarchicalSubject={h}" for h in HIERARCHY),
              str(photo))
    wd = Workdir(tmp_path / "work").prepare()
    state = stock_batch(workdir=str(wd.root), source=str(source), agencies=["adobe"], return_state=True)
    assert state.is_completed(), state.message

    kept = [k for k in KEYWORDS if k not in REMOVED]
    assert _adobe_keywords(wd) == kept
    assert read_sidecar(wd.sidecar(photo.name)).metadata.removed_keywords == REMOVED
    delivered = wd.packs / "ready" / photo.name
    tags = _embedded(delivered)
    assert tags["XMP-dc:Subject"] == tags["IPTC:Keywords"] == kept
    assert _named(tags, "nike", "mickey") == [], "a protected name is embedded"  # the Lightroom hierarchy too
    run = prefect_api.flow_runs_with("stock-batch", workdir=str(wd.root))[0]
    [artifact] = prefect_api.artifacts(run.id, key="batch-assets")
    rows = {r["asset"]: r for r in (json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data)}
    assert rows[photo.name]["removed keywords"] == ("nike: protected name 'Nike' (brand); "
                                                    "mickey mouse: protected name 'Mickey Mouse' (character)")
