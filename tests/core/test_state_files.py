"""Every state file of a workdir, damaged every way, read by its real reader (plain Python, no Prefect).

Each case gives its one warning line (or one MicrostockError line where nothing can rebuild the file) and goes
on: a damaged line skipped and named, a damaged file set aside as ``<name>.damaged-<UTC>`` (never deleted) and
read as missing, a read-only file read as it is. The list of files is docs/INTERFACE.md's "State files".
What the stages *write* (a folder in a file's place, read-only to its owner, a workdir folder read-only) is
the table's continuation, tests/core/test_state_paths.py.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tasks.agencies.catalog import catalog
from tasks.core.errors import ConfigError, MicrostockError, StageStopped, StoreUnavailable
from tasks.core.records import Asset, Metadata, read_sidecar, write_sidecar
from tasks.core.settings import load_settings
from tasks.core.workdir import Workdir
from tasks.gemini import served
from tasks.gemini.clip_generation import _pending_id
from tasks.gemini.daybudget import DailyBudget, pacific_day
from tasks.images.provenance import _generation_cost
from tasks.stages import pack_manifest
from tasks.stores.batch_jobs import BatchJobs
from tasks.stores.pending import held_back, last_csvs
from tasks.stores.portfolio import read_portfolio
from tasks.stores.similar_risks import read_distinct, read_risks, released
from tasks.transports.pins import CertificatePins, fingerprint
from tasks.transports.transit import SendsInFlight

TODAY = dt.datetime.now(dt.UTC).date()
SHA = "a" * 64
CERT = b"a DER certificate"  # only its SHA-256 is pinned
#: A workdir's own agency spec: a copy of a shipped one.
SHIPPED_SPEC = Path(__file__).parents[2] / "tasks" / "agencies" / "dreamstime.toml"
#: What a config or trust file stops on: it is never guessed at, set aside or rebuilt.
EVERY_DAMAGE = ("bad byte", "wrong type", "truncated", "folder")
#: A file that cannot be written stops too where a write may be needed (a pin added); as root every file can be.
UNWRITABLE = () if os.geteuid() == 0 else ("read-only",)


def _json(data) -> bytes:
    return json.dumps(data, indent=1).encode()


def _sidecar_bytes(wd: Workdir) -> bytes:
    path = wd.assets / "a.json"
    write_sidecar(path, Asset(name="a.jpg", asset_id=SHA, path=wd.assets / "a.jpg"),
                  Metadata(title="A red square", description="A red square on white", keywords=["red"]))
    return path.read_bytes()


@dataclass(frozen=True)
class StateFile:
    """One state file: where it is, good bytes and bytes of the wrong type, its reader, and what a read of the
    good file and of nothing look like."""

    path: str
    good: Callable[[Workdir], bytes]
    wrong_type: bytes
    read: Callable[[Workdir], object]
    read_good: Callable[[object], bool]
    read_nothing: Callable[[object], bool]
    #: JSON lines: damage is one line's (the second); the first is still read.
    lines: bool = False
    #: An unreadable file stops cleanly with this error (nothing can rebuild it), instead of being set aside.
    stops: type[MicrostockError] | None = None
    #: The damages that stop with ``stops`` (a trust or config file stops on every damage: never guessed at).
    stops_on: tuple[str, ...] = ("folder",)
    #: Informs only: damage reads as nothing, with no warning, the file left where it is (its own reader).
    quiet: bool = False
    #: How its stop names the file, when not by its full path.
    named: Callable[[Workdir], str] | None = None
    #: Of the wrong type, one entry of the file is skipped and named so (the file is kept), not the file set aside.
    entries: str = ""
    #: Read and rewritten in place under its lock: damaged bytes are kept beside it, the file stays.
    in_place: bool = False


PORTFOLIO_LINE = {"sha256": SHA, "name": "a.jpg", "dhash": "0" * 16, "phash": "f" * 16, "colour": "00" * 48,
                  "title": "A red square", "keywords": ["red"]}
INTENT = {"event": "intent", "display_name": "job-1", "assets": {SHA: "a.jpg"}, "try": 1, "at": "2026-12-03"}

FILES = [
    StateFile("packs/portfolio.jsonl", lambda wd: _json(PORTFOLIO_LINE).replace(b"\n", b"") + b"\n",
              b'{"sha256": ["a"], "name": "b.jpg"}', read_portfolio,
              lambda got: set(got) == {SHA}, lambda got: got == {}, lines=True),
    StateFile("batch_jobs.jsonl", lambda wd: json.dumps(INTENT).encode() + b"\n",
              b'{"event": "intent", "display_name": "job-2", "assets": "a.jpg", "try": 1, "at": "x"}',
              lambda wd: BatchJobs(wd).records(), lambda got: [r.display_name for r in got] == ["job-1"],
              lambda got: got == [], lines=True, stops=StoreUnavailable),
    StateFile("similar_released.json",
              lambda wd: _json({"released": [{"agency": "adobe", "asset": "a.jpg", "sha256": SHA, "at": "x"}]}),
              _json({"released": [{"agency": ["adobe"], "asset": "a.jpg", "sha256": SHA}]}), released,
              lambda got: got == {("adobe", SHA)}, lambda got: got == set(), entries="release 1"),
    StateFile("reports/similarity.json",
              lambda wd: _json({"agencies": {"adobe": {"a.jpg": {"score": 0.8, "nearest": "b.jpg",
                                                                  "threshold": 0.4, "outcome": "held back"}}}}),
              _json({"agencies": []}), read_risks,
              lambda got: got["adobe"]["a.jpg"].outcome == "held back", lambda got: got == {}),
    StateFile("reports/distinct.json",
              lambda wd: _json({"a.jpg": {"before": {"title": "t", "keywords": ["k"]},
                                          "after": {"title": "u", "keywords": ["k"]}, "by": "offline"}}),
              _json({"a.jpg": "set apart"}), read_distinct,
              lambda got: got["a.jpg"]["after"]["title"] == "u", lambda got: got == {}),
    StateFile("gemini-models.json",
              lambda wd: _json({"day": TODAY.isoformat(), "api_version": "v1beta", "asked_at": "",
                                "models": [{"name": "gemini-2.5-flash", "methods": ["generateContent"]}]}),
              _json({"day": TODAY.isoformat(), "api_version": "v1beta",
                     "models": [{"name": "gemini-2.5-flash", "methods": "generateContent"}]}),
              lambda wd: served._read_day(wd, TODAY, "v1beta"),
              lambda got: [m.name for m in got.models] == ["gemini-2.5-flash"], lambda got: got is None),
    StateFile("packs/manifest.json",
              lambda wd: _json({"assets": {"a.jpg": {"key": "k", "source": {}, "width": 80, "height": 60,
                                                     "bytes": [1, 2, 3]}}}),
              _json({"assets": []}), pack_manifest.load_manifest,
              lambda got: set(got["assets"]) == {"a.jpg"}, lambda got: got == {"assets": {}}),
    StateFile("assets/a.json", _sidecar_bytes, _json({"asset_id": SHA, "name": ["a.jpg"], "metadata": {}}),
              lambda wd: read_sidecar(wd.assets / "a.json"),
              lambda got: got.metadata.title == "A red square", lambda got: got is None),
    StateFile("reports/validation.json",
              lambda wd: _json({"problems": [{"agency": "adobe", "asset": "a.jpg", "rule": "title",
                                              "message": "too long"}]}),
              _json({"problems": "too long"}), last_csvs,
              lambda got: [p.asset for p in got.problems] == ["a.jpg"], lambda got: got.problems == []),
    StateFile("packs/manifest.json",  # its `where` table: what the ledger commands answer from
              lambda wd: _json({"assets": {}, "where": {"agencies": {"adobe": {"held_back": {"a.jpg": "too small"},
                                                                              "not_taken": {"a.mp4": "61 s"}}}}}),
              _json({"assets": {}, "where": {"agencies": []}}), lambda wd: held_back(wd),
              lambda got: got == {"adobe": {"a.jpg": "too small", "a.mp4": "61 s"}}, lambda got: got == {},
              entries="where the packed files go"),
    StateFile("gemini-requests.json", lambda wd: _json({"day": pacific_day(), "models": {"m": 3}}),
              _json({"day": pacific_day(), "models": []}),
              lambda wd: (DailyBudget(wd.root / "gemini-requests.json", "m", 100).take(),
                          json.loads((wd.root / "gemini-requests.json").read_bytes()))[1],
              lambda got: got["models"] == {"m": 4}, lambda got: got["models"] == {"m": 1}, in_place=True),
    StateFile("microstock.toml", lambda wd: b'[gemini]\nmodel = "gemini-2.5-flash"\nconcurrency = 3\n',
              b'[gemini]\nconcurrency = "three"\n', lambda wd: load_settings(wd.config_file),
              lambda got: got.gemini.concurrency == 3, lambda got: False, stops=ConfigError, stops_on=EVERY_DAMAGE),
    StateFile("agencies/mystock.toml", lambda wd: SHIPPED_SPEC.read_bytes(),
              SHIPPED_SPEC.read_bytes().replace(b'display_name = "Dreamstime"', b"display_name = 3"),
              lambda wd: catalog(wd).names, lambda got: "mystock" in got, lambda got: False, stops=ConfigError,
              stops_on=EVERY_DAMAGE, named=lambda wd: f"agencies/mystock.toml in {wd.root}"),
    StateFile("ftps_known_certs", lambda wd: f"127.0.0.1:21 {fingerprint(CERT)}\n".encode(),
              b"127.0.0.1:21 SHA1:ab\n", lambda wd: CertificatePins(wd.root / "ftps_known_certs").check(
                  "adobe", "127.0.0.1", 21, CERT) or True,
              lambda got: got is True, lambda got: False, stops=StageStopped,
              stops_on=EVERY_DAMAGE + UNWRITABLE),
    StateFile(".uploads-in-flight/adobe/a.jpg", lambda wd: f"{time.time():.3f}\n".encode(), b"[1764000000]",
              lambda wd: SendsInFlight(wd.root / ".uploads-in-flight" / "adobe").began("a.jpg"),
              lambda got: got is not None, lambda got: got is None, quiet=True),
    StateFile("assets/.a.made.json", lambda wd: _json({"usage": {"prompt_tokens": 10, "output_tokens": 1290},
                                                       "cost_usd": 0.039}),
              _json({"usage": [10, 1290], "cost_usd": 0.039}),
              lambda wd: _generation_cost(wd.assets / "a.jpg"),
              lambda got: got["cost_usd"] == 0.039, lambda got: got == {}, quiet=True),
    StateFile("assets/.a_c000.pending.json", lambda wd: _json({"interaction": "v1_fake000001", "model": "m"}),
              _json({"interaction": 5}), lambda wd: _pending_id(wd.assets / ".a_c000.pending.json"),
              lambda got: got == "v1_fake000001", lambda got: got is None),
]

DAMAGES = ["bad byte", "wrong type", "truncated", "folder", "read-only"]


def _damage(damage: str, good: bytes, wrong_type: bytes) -> bytes:
    if damage == "bad byte":
        at = good.index(b'"') + 1 if b'"' in good else 1  # inside a string where there is one
        return good[:at] + b"\xff" + good[at:]
    if damage == "truncated":
        return good[: len(good) // 2]
    return wrong_type


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("state", FILES, ids=[f.path for f in FILES])
def test_a_damaged_state_file_costs_one_line_never_a_traceback(tmp_path, caplog, state, damage):
    wd = Workdir(tmp_path / "wd").prepare()
    path = wd.root / state.path
    path.parent.mkdir(parents=True, exist_ok=True)
    good = state.good(wd)
    path.unlink(missing_ok=True)
    if damage == "folder":
        path.mkdir()
        (path / "inside").write_bytes(b"kept")
    elif damage == "read-only":
        path.write_bytes(good)
        os.chmod(path, 0o444)
    elif state.lines:  # the first line whole, the second damaged
        path.write_bytes(good + _damage(damage, good.strip(), state.wrong_type) + b"\n")
    else:
        path.write_bytes(_damage(damage, good, state.wrong_type))

    caplog.set_level(logging.WARNING)
    if state.stops and damage in state.stops_on:
        before = None if damage == "folder" else path.read_bytes()
        with pytest.raises(state.stops) as stop:
            state.read(wd)
        assert (state.named(wd) if state.named else str(path)) in stop.value.message, stop.value.message
        assert "\n" not in stop.value.message
        if damage == "folder":
            assert (path / "inside").read_bytes() == b"kept"  # stopped: nothing moved
        else:
            assert path.read_bytes() == before  # stopped: the file left as it was, for its owner to correct
        return
    got = state.read(wd)

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if damage == "read-only":
        assert state.read_good(got) and warnings == []
        return
    if state.quiet:
        assert state.read_nothing(got) and warnings == [], (got, warnings)
        assert path.exists() and not list(path.parent.glob(path.name + ".damaged-*"))  # left where it is
        return
    assert len(warnings) == 1 and "\n" not in warnings[0] and str(path) in warnings[0], warnings
    aside = sorted(path.parent.glob(path.name + ".damaged-*"))
    if state.lines and damage != "folder":
        assert state.read_good(got), got  # the good line read
        assert "line 2" in warnings[0] and aside == []
    elif state.entries and damage == "wrong type":
        assert state.read_nothing(got), got
        assert state.entries in warnings[0] and aside == [] and path.is_file()
    else:
        assert state.read_nothing(got), got
        assert len(aside) == 1 and aside[0].name in warnings[0]  # set aside, never deleted
        if damage == "folder":
            assert (aside[0] / "inside").read_bytes() == b"kept"
        elif state.in_place:
            assert path.is_file()  # rewritten whole, the damaged bytes beside it
        else:
            assert not path.exists()  # read as missing: its owner writes it again


@pytest.mark.parametrize("folder", ["reports", "packs", "assets", "csv"])
def test_a_file_where_a_workdir_folder_belongs_is_set_aside_and_the_folder_made(tmp_path, caplog, folder):
    """``reports`` as a file was rc 1 and a Prefect traceback: now one warning, the file kept aside, the run
    goes on with the folder."""
    root = tmp_path / "wd"
    root.mkdir()
    (root / folder).write_bytes(b"not a folder")
    caplog.set_level(logging.WARNING)
    Workdir(root).prepare()
    assert (root / folder).is_dir()
    [aside] = root.glob(f"{folder}.damaged-*")
    assert aside.read_bytes() == b"not a folder"
    [line] = [r.getMessage() for r in caplog.records]
    assert str(root / folder) in line and aside.name in line


def test_runs_preparing_one_workdir_at_the_same_moment_never_fail_each_other(tmp_path, caplog):
    """One shared write probe made the slower of two runs starting at once fail ("not usable: No such file"); a
    file where a folder belongs is set aside once."""
    root = tmp_path / "wd"
    root.mkdir()
    (root / "reports").write_bytes(b"not a folder")
    caplog.set_level(logging.WARNING)

    def prepare(_):
        for _ in range(100):
            Workdir(root).prepare()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(prepare, range(8)))
    assert (root / "reports").is_dir() and len(list(root.glob("reports.damaged-*"))) == 1
    assert len(caplog.records) == 1
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == [], "no probe left behind"


@pytest.mark.parametrize("damage", ["not a database", "truncated", "folder"])
def test_a_damaged_dead_letter_store_is_one_line_naming_it_and_never_replaced(tmp_path, damage):
    """``dead_letter.db`` is SQLite's own file: damage is one StoreUnavailable line naming it (describe leaves its
    jobs pending, ``dead-letter list`` says the line), and the file is left as it is — it holds the parked jobs."""
    from tasks.core.settings import Settings
    from tasks.stores.dead_letter_open import open_store

    wd = Workdir(tmp_path / "wd").prepare()
    open_store(wd, Settings()).park(SHA, payload={}, model="m", error_class="exhausted:503", error_message="x",
                                    attempts=1, asset_name="a.jpg")
    path, good = wd.dead_letter_db, wd.dead_letter_db.read_bytes()
    for side in wd.root.glob("dead_letter.db-*"):  # the write-ahead log: the damage is the file's alone
        side.unlink()
    if damage == "folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(b"not a database " * 100 if damage == "not a database" else good[: len(good) // 2])
    before = None if damage == "folder" else path.read_bytes()
    with pytest.raises(StoreUnavailable) as stop:
        open_store(wd, Settings()).list()
    assert stop.value.message.startswith(f"{path}: cannot use the dead-letter store: ")
    assert "\n" not in stop.value.message
    assert path.is_dir() if damage == "folder" else path.read_bytes() == before
