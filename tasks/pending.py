"""What is pending: the ledger's three questions, answered from the workdir.

``microstock ledger pending`` / ``status`` / ``done`` and the upload stage
agree on what an upload is: an :class:`UploadItem` — a described asset's
upload-ready file in ``packs/ready/`` and the SHA-256 of its source image.
Pending for an agency = packed, not held back there by the last run, not in
the ledger.

Free of Prefect and of the transports (paramiko, ftplib, TLS), so the
``ledger`` commands start fast; ``tasks.upload`` builds on it.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tasks.assets import iter_asset_files
from tasks.failures import BadInput
from tasks.files import sha256_file
from tasks.ledger import Entry, Ledger, LedgerState
from tasks.metadata_csv import described_sidecars
from tasks.pack import ready_name
from tasks.workdir import Workdir


@dataclass(frozen=True)
class UploadItem:
    """A file to upload: the upload-ready file and the SHA-256 of its source image."""

    name: str
    path: Path
    sha256: str


@dataclass
class AgencyLedger:
    """One agency's line of ``microstock ledger status``, with its pending files."""

    agency: str
    #: Uploads recorded for this agency (also of assets no longer in the workdir).
    done: int
    #: Described and packed, not held back, not recorded: what the next run sends.
    pending: list[UploadItem]
    #: Asset name -> the agency rule it breaks (never sent there).
    held_back: dict[str, str]


def packed_assets(wd: Workdir) -> list[tuple[str, UploadItem]]:
    """(asset name, upload item) of every described asset whose upload-ready file exists."""
    folder = wd.packs / "ready"
    try:
        with os.scandir(folder) as entries:  # one listing, not a stat per asset
            ready = {entry.name for entry in entries if entry.is_file()}
    except FileNotFoundError:
        return []
    found = []
    for sidecar in described_sidecars(wd):
        name = ready_name(sidecar.name)
        if name in ready:
            found.append((sidecar.name, UploadItem(name, folder / name, sidecar.asset_id)))
    return found


def held_back(wd: Workdir) -> dict[str, dict[str, str]]:
    """agency -> asset name -> why the last run does not send it there.

    The pack stage's image rules (``reports/pack.json``) and the assets the
    CSV stage gave no valid row (``reports/validation.json``): the flow
    uploads neither, so neither is pending.
    """
    held: dict[str, dict[str, str]] = {}
    for agency, rules in (_report(wd, "pack.json").get("held_back") or {}).items():
        held.setdefault(agency, {}).update(rules)
    for problem in _report(wd, "validation.json").get("problems") or []:
        if problem.get("asset"):
            held.setdefault(problem["agency"], {}).setdefault(problem["asset"], problem.get("message", ""))
    return held


def _report(wd: Workdir, name: str) -> dict:
    """A JSON report of the last run from ``reports/``; empty when missing or unreadable."""
    try:
        found = json.loads((wd.reports / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def ledger_overview(wd: Workdir, agencies: list[str]) -> tuple[list[AgencyLedger], LedgerState]:
    """Done and pending per agency, and the ledger as read (its ``problems`` included).

    The ledger is read in a second thread while the workdir is listed: on a
    long ledger much of the read is hashing, which lets the other thread run.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        reading = pool.submit(Ledger(wd.ledger).read)
        packed = packed_assets(wd)
        held = held_back(wd)
        state = reading.result()
    rows = []
    for agency in agencies:
        done, rules = state.done_for(agency), held.get(agency, {})
        pending = [item for asset, item in packed if asset not in rules and item.sha256 not in done]
        rows.append(AgencyLedger(agency, len(done), pending, dict(rules)))
    return rows, state


def mark_done(wd: Workdir, agency: str, file: str) -> Entry | None:
    """Record an upload made by hand; None when the ledger already has it.

    ``file`` is the asset's name in ``assets/`` or its upload-ready name in
    ``packs/ready/``; the key is the SHA-256 of the asset's source image,
    computed now. BadInput names the file when it is neither.
    """
    name = Path(file).name
    assets = {p.name: p for p in iter_asset_files(wd.assets)}
    source = assets.get(name)
    if source is None:
        by_upload_name = {ready_name(s.name): s.name for s in described_sidecars(wd)}
        if name in by_upload_name:
            source = assets.get(by_upload_name[name])
    if source is None:
        raise BadInput(name, f"not an asset in {wd.assets} nor the upload-ready file of one in {wd.packs / 'ready'}")
    digest = sha256_file(source)
    ledger = Ledger(wd.ledger)
    if ledger.read().is_done(agency, digest):
        return None
    return ledger.record(agency, ready_name(source.name), digest, "(marked done by hand)")
