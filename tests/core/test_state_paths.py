"""The damage table, continued (tests/core/test_state_files.py damages what is *read*): every state path a stage
*writes*, and the workdir's folders, as a folder where a file belongs, read-only, cut short or with a bad byte.

Each decision is docs/INTERFACE.md's ("State files"): a file rewritten whole each run (a report, a CSV, the ZIP)
with a folder in its place has the folder set aside (one warning naming both) and is written, the stage's other
work done; read-only, cut short or with a bad byte it is simply rewritten (a file's own mode does not protect it
from the rename that replaces it, as for any editor; its reader's damage line is the read table's). A workdir
folder that cannot be written, or a ledger that is a folder or cannot be appended to, stops ``microstock run``
before anything is done: one line naming the path and what to do, exit 2.

Read-only is made real: root ignores file modes, so those rows run ``microstock`` as the second local user
(tests/fakes/local_users.py) on a workdir that user owns, through this venv's own interpreter
(``flows.cli:main``, the console script's entry point). The venv and the checkout may lie where that user cannot
reach (under /root, or a CI clone in a ``mktemp -d`` folder), so they run it keeping only the right to read and
search every file (``run_as_other(..., reading=True)``): what they may *write* is still only what their modes
allow, which is what these rows test.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tasks.agencies.catalog import catalog
from tasks.core.reports import CsvReport, Gathered, PackReport
from tasks.core.settings import PackSettings, Settings
from tasks.core.workdir import Workdir
from tasks.stages.clips import pack_clips
from tasks.stages.csv import write_agency_csvs
from tasks.stages.ingest_report import write_ingest_report
from tasks.stages.pack import PackedFiles, finish_batch
from tasks.stores.dead_letter_open import open_store
from tests.fakes import pack_samples
from tests.fakes.local_users import other_uid, run_as_other
from tests.stages.test_csv import GOLDEN_ASSETS, describe
from tests.stages.test_pack import run as run_pack

AGENCIES = ["adobe", "vecteezy"]


def _csv_stage(wd: Workdir) -> list[Path]:
    write_agency_csvs(wd, AGENCIES, Settings())
    return [wd.csv / "adobe.csv", wd.csv / "vecteezy.csv", wd.reports / "validation.json"]


def _pack_finish(wd: Workdir) -> list[Path]:
    finish_batch(wd, PackReport(), CsvReport())
    return [wd.packs / "batch.zip", wd.reports / "pack.json"]


def _ingest_report(wd: Workdir) -> list[Path]:
    write_ingest_report(wd, Gathered(assets=[], rejected={"x.gif": "unsupported: GIF"}))
    return [wd.reports / "ingest.json"]


def _clips_check(wd: Workdir) -> list[Path]:
    pack_clips(wd, [], AGENCIES, catalog(wd), PackSettings(preview_px=640, thumbnail_px=400))
    return [wd.reports / "clips.json"]


def _pack_stage(wd: Workdir) -> list[Path]:
    if not (wd.assets / "b.jpg").exists():
        pack_samples.jpeg(wd.assets / "b.jpg", size=(80, 60))
    run_pack(wd, ["b.jpg"])
    return [*PackedFiles.of(wd, "b.jpg").all(), wd.packs / "batch.zip", wd.reports / "pack.json"]


#: Each path a stage writes whole, and the stage (it returns every file it wrote: the stage's work).
WRITTEN = {
    "reports/validation.json": _csv_stage,
    "csv/adobe.csv": _csv_stage,
    "reports/pack.json": _pack_finish,
    "packs/batch.zip": _pack_finish,
    "reports/ingest.json": _ingest_report,
    "reports/clips.json": _clips_check,
    "packs/ready/b.jpg": _pack_stage,  # the upload-ready copy: the file that is uploaded
    "packs/previews/b.jpg": _pack_stage,
    "packs/thumbs/b.jpg": _pack_stage,
}
DAMAGES = ["folder", "read-only", "cut short", "bad byte"]


def _written_whole(path: Path) -> None:
    data = path.read_bytes()
    if path.suffix == ".json":
        json.loads(data)
    elif path.suffix == ".zip":
        assert data.startswith(b"PK")
    elif path.suffix == ".jpg":
        assert data.startswith(b"\xff\xd8") and data.endswith(b"\xff\xd9")
    else:
        data.decode("utf-8")


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("where", list(WRITTEN))
def test_a_damaged_file_a_stage_writes_whole_is_written_and_the_stage_goes_on(tmp_path, caplog, where, damage):
    wd = Workdir(tmp_path / "wd").prepare()
    describe(wd, "a.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"])
    path = wd.root / where
    stage = WRITTEN[where]
    stage(wd)  # what the last run left
    good = path.read_bytes()
    path.unlink()
    if damage == "folder":
        path.mkdir()
        (path / "inside").write_bytes(b"kept")
    elif damage == "read-only":
        path.write_bytes(b"an older report")
        path.chmod(0o444)
    elif damage == "cut short":
        path.write_bytes(good[: len(good) // 2])
    else:  # one byte changed, the size kept
        at = len(good) // 2
        path.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])

    caplog.set_level(logging.WARNING)
    wrote = stage(wd)

    for written in wrote:  # the stage's work, all of it
        _written_whole(written)
    assert path.read_bytes() == good
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if damage == "folder":
        [aside] = path.parent.glob(path.name + ".damaged-*")
        assert (aside / "inside").read_bytes() == b"kept"  # set aside, never deleted
        assert len(lines) == 1 and "\n" not in lines[0], lines
        assert str(path) in lines[0] and aside.name in lines[0], lines
    else:
        assert lines == [], lines  # rewritten whole, as every run does: nothing to say


@pytest.mark.parametrize("folder", ["packs/ready", "packs/previews", "packs/thumbs"])
def test_a_file_where_a_pack_folder_belongs_is_set_aside_and_the_stage_goes_on(tmp_path, caplog, folder):
    """A file in place of ``packs/thumbs`` was a NotADirectoryError traceback from the pack stage."""
    wd = Workdir(tmp_path / "wd").prepare()
    (wd.root / folder).parent.mkdir(parents=True, exist_ok=True)
    (wd.root / folder).write_bytes(b"not a folder")
    caplog.set_level(logging.WARNING)
    for written in _pack_stage(wd):
        _written_whole(written)
    [aside] = (wd.root / folder).parent.glob(Path(folder).name + ".damaged-*")
    assert aside.read_bytes() == b"not a folder"
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [f"{wd.root / folder} is a file where a folder belongs: set aside as {aside.name}"], lines


def _argv(wd: Path) -> list[str]:
    return ["run", "--count", "1", "--agency", "adobe", "--workdir", str(wd)]


def test_a_run_with_folders_in_place_of_its_reports_goes_on_saying_one_line_each(tmp_path):
    """A folder in place of each report, a CSV and the ZIP was exit 1 and two tracebacks: now one warning
    each, and the run completes (uploads included). The console script in its own process: what a contributor
    sees, all of it (in this process an earlier command's captured stream can still hold Prefect's handler)."""
    wd = tmp_path / "w"
    damaged = ["reports/validation.json", "reports/ingest.json", "reports/clips.json", "reports/pack.json",
               "csv/adobe.csv", "packs/batch.zip"]
    for where in damaged:
        (wd / where).mkdir(parents=True)
    out = subprocess.run([str(Path(sys.executable).with_name("microstock")), *_argv(wd)], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "200"})
    output = out.stdout + out.stderr
    assert out.returncode == 0, output[-3000:]
    assert "Traceback" not in output
    for where in damaged:
        path = wd / where
        [aside] = path.parent.glob(path.name + ".damaged-*")
        assert path.is_file() and aside.is_dir()
        [line] = [line for line in output.splitlines() if f"{path} is a folder" in line]
        assert f"{path} is a folder where a file belongs: set aside as {aside.name}" in line, line
    assert "1 described · 0 parked · 1 uploaded" in out.stdout


def test_a_folder_in_place_of_the_ledger_stops_the_run_before_anything_is_done(run_microstock, tmp_path):
    """Was exit 1 and two tracebacks after describe and pack; an upload sent now could not be recorded."""
    wd = tmp_path / "w"
    (wd / "uploads.ledger").mkdir(parents=True)
    result = run_microstock(*_argv(wd))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"error: {wd / 'uploads.ledger'} is a folder, not the ledger file: nothing was done (no upload could be "
        f"recorded) — move the folder away (if it holds your ledger file, put that file at "
        f"{wd / 'uploads.ledger'}) and run again"]
    assert not list((wd / "assets").iterdir()) and not (wd / "outbox").exists()


@pytest.fixture(scope="module")
def other_python():
    """``other_python(code, *args)``: Python ``code`` run by this venv's interpreter as the second local user, who
    may read this checkout wherever it is but write only what their own modes allow (``run_as_other(...,
    reading=True)``), ``sys.argv[1:]`` = ``args``, from ``/``."""
    uid = other_uid()
    home = Path(tempfile.mkdtemp(prefix="microstock-other-"))
    os.chown(home, uid, -1)
    home.chmod(0o755)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(home), "PREFECT_HOME": str(home / ".prefect"),
           "MICROSTOCK_PREFECT_SERVER": "ephemeral", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def run(code: str, *args: str) -> subprocess.CompletedProcess:
        return run_as_other([sys.executable, "-I", "-c", f"import sys; {code}", *args], reading=True,
                            capture_output=True, text=True, env=env)

    yield run
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def as_other(other_python):
    """``as_other(*args)``: ``microstock ARGS`` (``flows.cli:main``, the console script's entry point) run as the
    second local user."""
    return lambda *args: other_python("sys.argv[0] = 'microstock'; from flows.cli import main; sys.exit(main())",
                                      *args)


@pytest.fixture
def others_workdir():
    """A workdir the second local user owns (0755, in a folder they can reach), prepared as a run leaves it."""
    base = Path(tempfile.mkdtemp(prefix="microstock-otherwd-"))
    base.chmod(0o755)
    wd = Workdir(base / "w").prepare()
    (wd.ledger).write_text("# uploads\n")
    for path in [wd.root, *wd.root.rglob("*")]:
        os.chown(path, other_uid(), -1)
    yield wd
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("where", ["assets", "csv", "packs", "reports", "uploads.ledger"])
def test_a_read_only_folder_or_ledger_stops_the_run_before_anything_is_done(as_other, others_workdir, where):
    """As their owner (no root), a read-only folder was exit 1 and two tracebacks halfway through the run; a
    read-only ledger let an upload go that could not be recorded (sent again by the next run)."""
    wd = others_workdir
    path = wd.root / where
    path.chmod(0o444 if path.is_file() else 0o555)
    out = as_other(*_argv(wd.root))
    output = out.stdout + out.stderr
    assert out.returncode == 2, output[-3000:]
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.strip()]
    assert line.startswith(f"error: {path} cannot be ") and "make " in line and "run again" in line, line
    assert not list(wd.assets.iterdir()) and not (wd.root / "outbox").exists(), "nothing was done"


#: Each file written in place, read-only to its owner, and the Python (run as that owner) that writes it: it
#: prints the one line a stop says, or what was done.
IN_PLACE = {
    "uploads.ledger": "stopped",
    ".upload-adobe.lock": "uploaded",
    "gemini-requests.json": "stopped",
    "ftps_known_certs": "stopped",
    "batch_jobs.jsonl": "stopped",
    "dead_letter.db": "stopped",
    ".uploads-in-flight/adobe": "stopped",  # a folder: when each send began, so a later run can date it
}
_WRITE_IN_PLACE = """
import hashlib, logging, pathlib
from tasks.core.errors import MicrostockError
from tasks.core.records import UploadItem
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stores.batch_jobs import BatchJobs
from tasks.stores.dead_letter_open import open_store
from tasks.gemini.daybudget import DailyBudget
from tasks.stages.upload import upload_agency
from tasks.transports.pins import CertificatePins
logging.basicConfig(stream=sys.stdout, format="%(message)s", level=logging.WARNING)
wd, where = Workdir(pathlib.Path(sys.argv[1])), sys.argv[2]
try:
    if where == "gemini-requests.json":
        DailyBudget(wd.root / where, "m", 100).take()
    elif where == "ftps_known_certs":
        CertificatePins(wd.root / where).check("adobe", "127.0.0.1", 21, b"a DER certificate")
    elif where == "batch_jobs.jsonl":  # the intent, before a batch job is paid for
        BatchJobs(wd).intend("job-1", {"a" * 64: "a.jpg"}, 1)
    elif where == "dead_letter.db":
        open_store(wd, Settings()).park("a" * 64, payload={}, model="m", error_class="exhausted:503",
                                        error_message="x", attempts=1, asset_name="a.jpg")
    else:  # the upload stage logs its stop, one line
        ready = wd.packs / "a.jpg"
        if upload_agency(wd, "adobe", [UploadItem("a.jpg", ready, hashlib.sha256(b"a").hexdigest())]).uploaded:
            print("uploaded")
except MicrostockError as exc:
    print(exc.message)
"""


@pytest.mark.parametrize("where", list(IN_PLACE))
def test_a_read_only_file_written_in_place_stops_its_writer_with_one_line_or_is_used(other_python, others_workdir,
                                                                                     where):
    """As its owner: a read-only ledger let the upload go and then could not record it (sent again by the next
    run); a read-only day count was a traceback; a lock is only held, so a read-only one locks as well (it
    stopped the agency). As they did: a read-only pin file stops before any password is sent, batch_jobs.jsonl
    before a batch job is paid for (its intent cannot be kept), dead_letter.db the park (the job stays pending).
    """
    wd = others_workdir
    path = wd.root / where
    (wd.packs / "a.jpg").write_bytes(b"an upload-ready JPEG")
    if where == "dead_letter.db":  # a store with one parked job
        open_store(wd, Settings()).park("b" * 64, payload={}, model="m", error_class="exhausted:503",
                                        error_message="x", attempts=1, asset_name="b.jpg")
    elif where.startswith(".uploads-in-flight"):
        path.mkdir(parents=True)
    elif not path.exists():
        path.write_bytes(b"")
    for made in wd.root.rglob("*"):
        os.chown(made, other_uid(), -1)
    path.chmod(0o555 if path.is_dir() else 0o444)
    before = None if path.is_dir() else path.read_bytes()
    out = other_python(_WRITE_IN_PLACE, str(wd.root), where)
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-3000:]
    lines = (out.stdout + out.stderr).splitlines()
    if IN_PLACE[where] == "stopped":
        said = [line for line in lines if " left pending: " not in line]  # each file's own outcome line aside
        assert len(said) == 1 and str(path) in said[0], lines
        assert before is None or path.read_bytes() == before
        assert not (wd.root / "outbox").exists() or not list((wd.root / "outbox").rglob("a.jpg")), "nothing sent"
    else:
        assert lines == ["uploaded"], lines
        assert (wd.root / "outbox" / "adobe" / "a.jpg").is_file()


#: A stage, and the folder that went read-only during the run (after the start's check) where it writes.
MID_RUN = {
    "csv": ("csv", "csv/adobe.csv"),
    "csv report": ("reports", "reports/validation.json"),
    "pack": ("packs", "packs/batch.zip"),
    "ingest report": ("reports", "reports/ingest.json"),
    "clips": ("reports", "reports/clips.json"),
}
_STAGE = """
import pathlib
from tasks.core.errors import MicrostockError
from tasks.core.reports import CsvReport, Gathered, PackReport
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.agencies.catalog import catalog
from tasks.core.settings import PackSettings
from tasks.stages.clips import pack_clips
from tasks.stages.csv import write_agency_csvs
from tasks.stages.ingest_report import write_ingest_report
from tasks.stages.pack import PackedFiles, finish_batch
wd, stage = Workdir(pathlib.Path(sys.argv[1])), sys.argv[2]
try:
    if stage.startswith("csv"):
        write_agency_csvs(wd, ["adobe"], Settings())
    elif stage == "pack":
        finish_batch(wd, PackReport(), CsvReport())
    elif stage == "ingest report":
        write_ingest_report(wd, Gathered(assets=[]))
    else:
        pack_clips(wd, [], ["adobe"], catalog(wd), PackSettings(preview_px=640, thumbnail_px=400))
    print("written")
except MicrostockError as exc:
    print(exc.message)
"""


@pytest.mark.parametrize("stage", list(MID_RUN))
def test_a_folder_made_read_only_during_the_run_stops_its_stage_with_one_line(other_python, others_workdir, stage):
    """As its owner: the CSV, pack, ingest report and clips writers raised PermissionError (a traceback) for a
    folder made read-only after the run's start; now the stage stops with one line naming the file."""
    wd = others_workdir
    describe(wd, "a.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"])
    (wd.packs / ".pack.lock").touch()  # made when the run's pack stage began
    for made in wd.root.rglob("*"):
        os.chown(made, other_uid(), -1)
    folder, where = MID_RUN[stage]
    (wd.root / folder).chmod(0o555)
    out = other_python(_STAGE, str(wd.root), stage)
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-3000:]
    [line] = (out.stdout + out.stderr).splitlines()
    assert line.startswith(f"{wd.root / where} cannot be written (Permission denied): "), line
    assert line.endswith(f"make {wd.root / folder} writable by you and run again"), line
