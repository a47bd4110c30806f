"""What is to upload, and what is pending: the ledger's three questions.

In a run, the upload stage asks :func:`uploadable` with the run's own reports in hand: per agency the upload-ready
file (:class:`~tasks.core.records.UploadItem`: the file and the SHA-256 of its source) of every asset the
agency's final CSV accepted (:meth:`~tasks.core.reports.CsvReport.accepted`, the one answer to "what goes to
agency X"), of every kind, from the pack stage's report. The run records the same answer in the pack manifest
(:class:`Where`, written with the batch ZIP: ``tasks.stages.pack_manifest.record_where``), and ``microstock ledger
pending`` / ``status`` / ``done`` answer from it, the sidecars, the upload-ready files and the ledger — never from
``reports/``, which is written for people. Pending = uploadable and not in the ledger.

Free of Prefect and of the transports (paramiko, ftplib, TLS), so the
``ledger`` commands start fast; :mod:`tasks.stages.upload` builds on it.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tasks.core.errors import BadInput
from tasks.core.files import sha256_file
from tasks.core.records import (
    ACCEPTED_EXTENSIONS,
    CLIP_EXTENSIONS,
    UploadItem,
    described_sidecars,
    iter_asset_files,
    read_sidecar,
    ready_name,
)
from tasks.core.reports import CsvReport, PackReport
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir
from tasks.stores.ledger import Entry, Ledger, LedgerState

log = logging.getLogger(__name__)


@dataclass
class AgencyLedger:
    """One agency's line of ``microstock ledger status``, with its pending files."""

    agency: str
    #: Uploads recorded for this agency (also of assets no longer in the workdir).
    done: int
    #: Described and packed, not held back, not recorded: what the next run sends.
    pending: list[UploadItem]
    #: Asset name -> why the last run keeps it from the agency (never sent there).
    held_back: dict[str, str]


#: The key under which :class:`Where` records a reason that holds back every asset of an agency (its settings
#: are invalid, so it got no CSV).
EVERY_ASSET = ""


class AgencyWhere(BaseModel):
    """One agency's part of :class:`Where`."""

    #: The assets its final CSV of the last run accepted (a valid row): what is sent there.
    accepted: list[str] = Field(default_factory=list)
    #: asset -> why the last run keeps it from there (an image rule, the similarity check, a row problem,
    #: review; :data:`EVERY_ASSET` for every asset).
    held_back: dict[str, str] = Field(default_factory=dict)
    #: asset -> why its kind's rules keep it from there whatever its metadata (a clip's video rules:
    #: :attr:`~tasks.core.reports.PackReport.not_taken`).
    not_taken: dict[str, str] = Field(default_factory=dict)


class Where(BaseModel):
    """Where the last run's upload-ready files go (``where`` in ``packs/manifest.json``): per agency what is sent
    and what is kept back, and per asset its upload-ready file (relative to the workdir) and the SHA-256 of its
    source."""

    agencies: dict[str, AgencyWhere] = Field(default_factory=dict)
    files: dict[str, tuple[str, str]] = Field(default_factory=dict)


def _where_of(raw: bytes, path: Path) -> Where:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("not a table")
    try:
        return Where.model_validate(data.get("where", {}))
    except ValidationError:  # the rest of the manifest is the pack stage's to judge: only this part is lost
        log.warning("%s: where the packed files go is of the wrong shape: nothing counts as pending until the "
                    "next run records it again", path)
        return Where()


def read_where(wd: Workdir) -> Where:
    """Where the last run's files go, as the pack manifest records it; empty when none is recorded yet, or the
    manifest is damaged (then set aside: nothing counts as pending until the next run)."""
    path = wd.packs / "manifest.json"
    return read_file(path, lambda raw: _where_of(raw, path),
                     "nothing counts as pending until the next run packs and records it again") or Where()


def last_csvs(wd: Workdir) -> CsvReport:
    """The last run's CSV report (``reports/validation.json``), for what is shown to people (``microstock review
    list``, the run's table); empty when missing or damaged (then set aside). Nothing is sent by it."""
    return read_file(wd.reports / "validation.json", CsvReport.model_validate_json,
                     "the next run writes it again") or CsvReport()


def uploadable(packed: PackReport, csvs: CsvReport, agencies: list[str]) -> dict[str, list[UploadItem]]:
    """agency -> the upload items it takes this run: every asset of ``packed`` (an image's packed JPEG, a clip as
    it is) that ``csvs`` accepted there (an agency it does not name takes nothing); the ledger not asked."""
    return {agency: [UploadItem(ready_name(name), packed.ready[name], packed.asset_ids[name])
                     for name in sorted(packed.ready) if csvs.accepted(agency, name)]
            for agency in agencies}


def recorded_uploadable(wd: Workdir, agencies: list[str], where: Where | None = None) -> dict[str, list[UploadItem]]:
    """agency -> the upload items the last run recorded for it (:func:`read_where`) that are still what it
    recorded: the upload-ready file there, the asset still described and not rejected in review since."""
    where = where or read_where(wd)
    current = {}
    for name, (file, sha) in where.files.items():
        sidecar = read_sidecar(wd.sidecar(name))
        if sidecar is None or sidecar.name != name or sidecar.rejected or not (wd.root / file).is_file():
            continue
        current[name] = UploadItem(ready_name(name), wd.root / file, sha)
    return {agency: [current[name] for name in (where.agencies[agency].accepted if agency in where.agencies else [])
                     if name in current]
            for agency in agencies}


def held_back(wd: Workdir, where: Where | None = None) -> dict[str, dict[str, str]]:
    """agency -> asset name -> why the last run does not send it there (what ``ledger status`` shows): the rules
    of the asset's kind, the similarity check, its CSV row's problems, review; an agency-wide CSV problem (its
    settings are invalid, so no CSV was written) under :data:`EVERY_ASSET`."""
    where = where or read_where(wd)
    return {agency: {**found.not_taken, **found.held_back} for agency, found in where.agencies.items()}


def ledger_overview(wd: Workdir, agencies: list[str]) -> tuple[list[AgencyLedger], LedgerState]:
    """Done and pending per agency, and the ledger as read (its ``problems`` included).

    The ledger is read in a second thread while the workdir is listed: on a
    long ledger much of the read is hashing, which lets the other thread run.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        reading = pool.submit(Ledger(wd.ledger).read)
        where = read_where(wd)
        taken, held = recorded_uploadable(wd, agencies, where), held_back(wd, where)
        state = reading.result()
    rows = []
    for agency in agencies:
        done = state.done_for(agency)
        pending = [item for item in taken[agency] if item.sha256 not in done]
        rows.append(AgencyLedger(agency, len(done), pending, dict(held.get(agency, {}))))
    return rows, state


def mark_done(wd: Workdir, agency: str, file: str) -> Entry | None:
    """Record an upload made by hand; None when the ledger already has it.

    ``file`` is the asset's name in ``assets/`` or its upload-ready name in
    ``packs/ready/``; the key is the SHA-256 of the asset's source image,
    computed now. BadInput names the file when it is neither.
    """
    name = Path(file).name
    assets = {p.name: p for p in iter_asset_files(wd.assets, ACCEPTED_EXTENSIONS | CLIP_EXTENSIONS)}
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
