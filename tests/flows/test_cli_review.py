"""``microstock review edit``: a correction written to the sidecar as the paused run's form writes one, checked
by the agencies' rules at once, and taken up by the next run before anything is sent; an unknown name changes
nothing and exits 1 (answering a paused run: tests/orchestration/test_server.py)."""

from __future__ import annotations

import csv

import pyexiv2
import pytest
from PIL import Image

from tasks.core.files import sha256_file
from tasks.core.records import Asset, Metadata, read_sidecar, write_sidecar
from tasks.core.workdir import Workdir

NAMES = ["alps.jpg", "bay.jpg"]


def described_photos(wd: Workdir) -> None:
    """Two photo-sized JPEGs in ``assets/`` with sidecars, as the describe stage leaves them."""
    for name, colour in zip(NAMES, ("teal", "navy"), strict=True):
        path = wd.assets / name
        Image.new("RGB", (2400, 1800), colour).save(path, quality=80)
        metadata = Metadata(title=f"Quiet {name[:-4]} at dawn", description=f"A quiet {name[:-4]} at dawn.",
                            keywords=[name[:-4], "dawn", "quiet", "landscape", "nature"], adobe_category=11)
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=sha256_file(path), path=path), metadata)


@pytest.fixture
def review(run_microstock):
    """``review(wd, ARGS…)``: ``microstock review ARGS --workdir W`` with no Prefect server (no PREFECT_API_URL)."""
    def invoke(wd: Workdir, *args: str):
        return run_microstock("review", *args, "--workdir", str(wd.root), env={"PREFECT_API_URL": None})

    return invoke


def adobe_rows(wd: Workdir) -> dict[str, dict]:
    return {row["Filename"]: row
            for row in csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines())}


def test_an_edit_is_checked_at_once_and_the_next_run_packs_and_writes_it_before_sending(prefect_harness, review,
                                                                                          tmp_path):
    from flows.stock_batch import stock_batch

    wd = Workdir(tmp_path / "data").prepare()
    described_photos(wd)
    fixed = review(wd, "edit", "alps.jpg", "--title", "Corrected, by the contributor", "--keywords", "snow, peak ,alps",
                   "--description", "Snow on the peaks at dawn.")
    assert fixed.exit_code == 0, fixed.output
    out = fixed.stdout.replace("\n", " ")
    assert "alps.jpg: title, keywords, description written to its sidecar" in out
    assert "adobe: gets a row (fixed: title: removed" in out, ("Adobe's title rule drops the comma, "
                                                               "as the CSV stage does")
    assert "the next run packs it and writes the CSVs with it before anything is sent" in out
    broken = review(wd, "edit", "bay.jpg", "--keywords", " , ")
    assert broken.exit_code == 0, broken.output
    assert "adobe: held back (keywords.min: 0 keyword(s); Adobe Stock needs at least 1)" in broken.stdout
    alps = read_sidecar(wd.sidecar("alps.jpg")).metadata
    assert (alps.title, alps.keywords, alps.description) == (
        "Corrected, by the contributor", ["snow", "peak", "alps"], "Snow on the peaks at dawn.")
    assert read_sidecar(wd.sidecar("bay.jpg")).metadata.title == "Quiet bay at dawn", "what is not given stays"

    state = stock_batch(workdir=str(wd.root), count=0, agencies=["adobe"], return_state=True)
    assert state.is_completed(), state.message
    rows = adobe_rows(wd)
    assert list(rows) == ["alps.jpg"], "the asset whose correction breaks Adobe's rule is held back there"
    assert (rows["alps.jpg"]["Title"], rows["alps.jpg"]["Keywords"]) == ("Corrected by the contributor",
                                                                         "snow,peak,alps")
    assert sorted(p.name for p in wd.outbox("adobe").glob("*.jpg")) == ["alps.jpg"]
    with pyexiv2.Image(str(wd.outbox("adobe") / "alps.jpg")) as sent:
        assert sent.read_iptc()["Iptc.Application2.Keywords"] == ["snow", "peak", "alps"], (
            "the sent file was packed again")


def test_an_edit_of_a_rejected_asset_says_it_is_not_sent(review, tmp_path):
    from tasks.stores.ledger import Ledger

    wd = Workdir(tmp_path / "data").prepare()
    described_photos(wd)
    for agency in ("adobe", "dreamstime"):
        Ledger(wd.ledger).record(agency, "bay.jpg", sha256_file(wd.assets / "bay.jpg"), "/bay.jpg")
    rejected = review(wd, "reject", "bay.jpg", "alps.jpg")
    assert rejected.exit_code == 0, rejected.output
    said = " ".join(rejected.stdout.split())
    assert ("bay.jpg was already uploaded to adobe, dreamstime (the ledger records it): a reject cannot unsend "
            "it") in said
    assert "alps.jpg was already" not in said, "only what the ledger records as sent"
    result = review(wd, "edit", "bay.jpg", "--title", "Still not wanted")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert "bay.jpg was rejected in review: it gets no row and is never sent unless reopened" in said
    assert "the next run" not in said and "gets a row" not in said
    assert read_sidecar(wd.sidecar("bay.jpg")).metadata.title == "Still not wanted"


def test_an_unknown_name_changes_nothing_and_exits_1(review, tmp_path):
    wd = Workdir(tmp_path / "data").prepare()
    described_photos(wd)
    before = {name: wd.sidecar(name).read_bytes() for name in NAMES}
    for args in (("edit", "alsp.jpg", "--title", "A title"), ("reject", "bay.jpg", "alsp.jpg"),
                 ("approve", "alsp.jpg"), ("reopen", "alsp.jpg")):
        result = review(wd, *args)
        assert result.exit_code == 1, (args, result.output)
        assert f"alsp.jpg: no such described asset in {wd.assets}: nothing changed — did you mean alps.jpg?" in \
            " ".join(result.stderr.split())
        assert "Traceback" not in result.stderr
    nothing = review(wd, "edit", "alps.jpg")
    assert nothing.exit_code == 2 and "nothing to change" in nothing.stderr
    assert {name: wd.sidecar(name).read_bytes() for name in NAMES} == before


def test_an_edited_clip_is_told_its_correction_goes_in_its_csv_rows_not_into_a_pack(review, tmp_path, clips):
    import shutil

    from tests.fakes.clips import through_pack

    wd = Workdir(tmp_path / "data").prepare()
    shutil.copy(clips["hd"], wd.assets / "harbour.mp4")
    through_pack(wd, ["adobe"])
    fixed = review(wd, "edit", "harbour.mp4", "--title", "Boats in the harbour at dawn")
    assert fixed.exit_code == 0, fixed.output
    out = fixed.stdout.replace("\n", " ")
    assert "adobe: gets a row" in out
    assert "a clip is not packed: its file is sent unchanged, the correction is in its CSV rows" in out
    assert "packs it" not in out
    assert read_sidecar(wd.sidecar("harbour.mp4")).metadata.title == "Boats in the harbour at dawn"


def test_review_commands_with_no_server_load_neither_prefect_nor_sqlalchemy(workdir):
    """With no server there is no paused run to answer: `review list`, `approve`, `reject` and `reopen` decide in
    the sidecars without importing Prefect's client (~1.3 s of CPU a command) or SQLAlchemy (~0.8 s)."""
    import os
    import subprocess
    import sys

    described_photos(workdir)
    script = ("import sys\nfrom typer.testing import CliRunner\nfrom flows.cli import app\n"
              "for args in (['list'], ['reject', 'bay.jpg'], ['reopen', 'bay.jpg'], ['approve', 'alps.jpg']):\n"
              "    said = CliRunner().invoke(app, ['review', *args, '--workdir', sys.argv[1]])\n"
              "    assert said.exit_code == 0, said.output\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'sqlalchemy'}))")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MICROSTOCK_PREFECT_SERVER")}
    out = subprocess.run([sys.executable, "-c", script, str(workdir.root)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
    assert read_sidecar(workdir.sidecar("alps.jpg")).review.decision == "approved"
