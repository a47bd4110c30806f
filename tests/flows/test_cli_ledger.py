"""`microstock ledger pending | done | status` on a real workdir (typer's runner, in process)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.core.files import sha256_file
from tasks.core.records import Asset, Metadata, described_sidecars, ready_name, write_sidecar
from tasks.core.reports import AgencyCsv, CsvReport, PackReport, Problem
from tasks.stages.pack import finish_batch
from tests.fakes.ledger import ledger_entries

runner = CliRunner()


@pytest.fixture
def described(workdir):
    """Four assets: three described and packed (one held back for adobe), one not yet described."""
    ready = workdir.packs / "ready"
    ready.mkdir(parents=True)
    for i, name in enumerate(["sunset.jpg", "city.png", "dunes.jpg", "raw.jpg"]):
        path = workdir.assets / name
        path.write_bytes(os.urandom(3000 + i))
        if name == "raw.jpg":
            continue  # not described: never pending
        asset = Asset(name=name, asset_id=sha256_file(path), path=path)
        write_sidecar(workdir.sidecar(name), asset, Metadata(title=name, description=name, keywords=["x"]))
        (ready / (path.stem + ".jpg")).write_bytes(b"packed " + name.encode())
    every = ["city.png", "dunes.jpg", "sunset.jpg"]
    last_run_csvs(workdir, {"adobe": ["city.png", "sunset.jpg"], "vecteezy": every, "dreamstime": every},
                  [{"agency": "adobe", "asset": "dunes.jpg", "rule": "image", "message": "too small"}],
                  {"adobe": {"dunes.jpg": "too small"}})
    return workdir


def last_run_csvs(workdir, accepted: dict[str, list[str]], problems: list[dict],
                  held_back: dict[str, dict[str, str]] | None = None) -> None:
    """What the last run records as it ends (:func:`tasks.stages.pack.finish_batch`): per agency the assets its
    CSV has a row for (an agency a problem names has a CSV report too: it may hold back everything), and the
    upload-ready file of every described asset packed."""
    agencies = {**{p["agency"]: [] for p in problems}, **accepted}
    report = CsvReport(agencies={a: AgencyCsv(agency=a, display_name=a, accepted=names, rows=len(names))
                                 for a, names in agencies.items()},
                       problems=[Problem(**p) for p in problems])
    packed = PackReport(held_back=held_back or {})
    for sidecar in described_sidecars(workdir):
        ready = workdir.packs / "ready" / ready_name(sidecar.name)
        if ready.is_file():
            packed.ready[sidecar.name], packed.asset_ids[sidecar.name] = ready, sidecar.asset_id
    finish_batch(workdir, packed, report)


def cli(workdir, *args):
    return runner.invoke(app, ["ledger", *args, "--workdir", str(workdir.root)])


def test_pending_lists_described_packed_files_per_agency(described):
    result = cli(described, "pending")
    assert result.exit_code == 0, result.output
    lines = sorted(result.stdout.splitlines())
    assert lines == sorted([
        "adobe\tcity.jpg", "adobe\tsunset.jpg",  # dunes is held back for adobe
        "vecteezy\tcity.jpg", "vecteezy\tdunes.jpg", "vecteezy\tsunset.jpg",
        "dreamstime\tcity.jpg", "dreamstime\tdunes.jpg", "dreamstime\tsunset.jpg",
    ])
    only = cli(described, "pending", "--agency", "adobe")
    assert sorted(only.stdout.splitlines()) == ["adobe\tcity.jpg", "adobe\tsunset.jpg"]


def test_pending_and_status_are_the_same_with_reports_deleted(described):
    """``reports/`` is written for people: the ledger commands answer from the ledger, the upload-ready files,
    the sidecars and what the last run recorded with them (the pack manifest)."""
    import shutil

    cli(described, "done", "vecteezy", "sunset.jpg")
    pending, status = cli(described, "pending"), cli(described, "status")
    assert "adobe\tcity.jpg" in pending.stdout and "│ adobe " in status.stdout
    shutil.rmtree(described.reports)
    assert cli(described, "pending").stdout == pending.stdout
    assert cli(described, "status").stdout == status.stdout


def test_done_records_the_source_digest_and_pending_shrinks(described):
    result = cli(described, "done", "adobe", "city.png")
    assert result.exit_code == 0 and "recorded city.jpg as uploaded to adobe" in result.stdout
    [entry] = ledger_entries(described.ledger)
    assert (entry.agency, entry.filename) == ("adobe", "city.jpg")
    assert entry.sha256 == sha256_file(described.assets / "city.png")  # the source image, not the packed file
    assert "adobe\tcity.jpg" not in cli(described, "pending").stdout
    again = cli(described, "done", "adobe", "city.jpg")  # by its upload-ready name: the same asset
    assert again.exit_code == 0 and "already recorded" in again.stdout
    assert len(ledger_entries(described.ledger)) == 1


def test_done_refuses_unknown_files_and_agencies(described):
    unknown = cli(described, "done", "adobe", "nothing.jpg")
    assert unknown.exit_code == 2 and "nothing.jpg: not an asset in" in unknown.output
    sidecar = cli(described, "done", "adobe", "sunset.json")
    assert sidecar.exit_code == 2
    agency = cli(described, "done", "istock", "sunset.jpg")  # no spec, shipped or in the workdir
    assert agency.exit_code == 2 and "unknown agency 'istock'" in agency.output
    assert not described.ledger.exists()


def test_status_table_counts_done_pending_and_held_back(described):
    cli(described, "done", "vecteezy", "sunset.jpg")
    cli(described, "done", "vecteezy", "dunes.jpg")
    result = cli(described, "status")
    assert result.exit_code == 0
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:5]]
            for line in result.stdout.splitlines() if line.startswith("│")}
    assert rows == {"adobe": ["0", "2", "1"], "vecteezy": ["2", "1", "0"], "dreamstime": ["0", "3", "0"]}


def test_ledger_problems_are_reported_with_line_numbers(described):
    described.ledger.write_text("# header\ngarbage line\n")
    result = cli(described, "status")
    assert result.exit_code == 0
    assert "uploads.ledger line 2: expected 5 tab-separated fields" in result.stderr


def test_status_follows_the_enabled_agencies(described):
    described.config_file.write_text("[agencies.dreamstime]\nenabled = false\n")
    result = cli(described, "status")
    assert "dreamstime" not in result.stdout and "adobe" in result.stdout
    bad = cli(described, "pending", "--agency", "istock")
    assert bad.exit_code == 2 and "unknown agency 'istock'" in bad.output


def test_an_asset_without_a_valid_csv_row_for_an_agency_is_not_pending_there(described):
    last_run_csvs(described, {"adobe": ["city.png", "sunset.jpg"], "vecteezy": ["dunes.jpg", "sunset.jpg"]}, [
        {"agency": "adobe", "asset": "dunes.jpg", "rule": "image", "message": "too small"},
        {"agency": "vecteezy", "asset": "city.png", "rule": "keywords.min", "message": "1 keyword; Vecteezy needs 5"},
        {"agency": "dreamstime", "asset": "", "rule": "csv_defaults", "message": "agency-wide: not about one asset"},
    ])
    result = cli(described, "pending", "--agency", "vecteezy")
    assert sorted(result.stdout.splitlines()) == ["vecteezy\tdunes.jpg", "vecteezy\tsunset.jpg"]
    # No CSV is written for an agency whose settings are refused, so a run uploads nothing there:
    # `ledger pending` says the same (it used to list all three).
    assert cli(described, "pending", "--agency", "dreamstime").stdout.splitlines() == []
    assert "agency-wide" not in cli(described, "pending", "--agency", "adobe").output


def test_with_the_ledger_index_a_line_deleted_by_hand_is_pending_again(described, monkeypatch):
    monkeypatch.setattr("tasks.stores.ledger.INDEX_MIN_LINES", 2)  # index even this short ledger
    cli(described, "done", "adobe", "city.png")
    cli(described, "done", "adobe", "sunset.jpg")
    assert "adobe\tcity.jpg" not in cli(described, "pending").stdout
    assert (described.root / ".uploads.ledger.index").is_file()
    lines = described.ledger.read_text().splitlines(keepends=True)
    described.ledger.write_text("".join(line for line in lines if "\tcity.jpg\t" not in line))
    pending = cli(described, "pending", "--agency", "adobe").stdout.splitlines()
    assert pending == ["adobe\tcity.jpg"]


def test_the_ledger_commands_load_neither_prefect_nor_the_transports(described):
    """They must start fast: Prefect (seconds) and paramiko/TLS are for runs, not for reading the ledger."""
    import subprocess
    import sys

    code = ("import atexit, sys; atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('prefect', 'paramiko', 'ftplib') "
            "or m in ('tasks.stages.upload', 'tasks.transports'))));"
            f"sys.argv = ['microstock', 'ledger', 'status', '--workdir', {str(described.root)!r}];"
            "from flows.cli import main; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "adobe" in out.stdout and "LOADED []" in out.stdout


def test_the_ledger_commands_write_out_the_control_characters_of_a_file_name(described):
    """An asset named with an escape sequence (it retitles a terminal), a carriage return (it overwrites the line)
    and a bidi override: ``pending``, ``done`` and ``done`` again print it with those written out, one line each."""
    name = "\x1b]0;PWNED\x07sea\rview\u202egpj.png"
    path = described.assets / name
    path.write_bytes(os.urandom(4000))
    write_sidecar(described.sidecar(name), Asset(name=name, asset_id=sha256_file(path), path=path),
                  Metadata(title="Sea view", description="Sea view", keywords=["x"]))
    ready = "\x1b]0;PWNED\x07sea\rview\u202egpj.jpg"
    (described.packs / "ready" / ready).write_bytes(b"packed")
    last_run_csvs(described, {"vecteezy": [name, "sunset.jpg"]}, [])
    shown = "\\x1b]0;PWNED\\x07sea\\x0dview\\u202egpj.jpg"

    pending = cli(described, "pending", "--agency", "vecteezy")
    assert sorted(pending.stdout.splitlines()) == [f"vecteezy\t{shown}", "vecteezy\tsunset.jpg"]
    done = cli(described, "done", "vecteezy", name)
    recorded = "\\x1b]0;PWNED\\x07sea view\\u202egpj.jpg"  # the ledger's line keeps no line break
    assert done.exit_code == 0 and done.stdout.startswith(f"recorded {recorded} as uploaded to vecteezy (sha256 ")
    again = cli(described, "done", "vecteezy", name)
    assert again.stdout == f"{shown.replace('.jpg', '.png')} is already recorded as uploaded to vecteezy: " \
                           "nothing added\n"
    for result in (pending, done, again):
        assert not {"\x1b", "\x07", "\r", "\u202e"} & set(result.output)
