"""What is to upload, and what is pending: the ledger's three questions, answered from the workdir.

The upload stage and ``microstock ledger pending`` / ``status`` / ``done``
agree on what an upload is because both ask :func:`uploadable`: an
:class:`~tasks.core.records.UploadItem` — a described asset's upload-ready
file in ``packs/ready/`` and the SHA-256 of its source image — for every
asset the agency's CSV accepted (:meth:`~tasks.core.reports.CsvReport.accepted`,
the one answer to "what goes to agency X": the flow's own report, else the
last run's ``reports/validation.json``). Pending = uploadable and not in the
ledger.

Free of Prefect and of the transports (paramiko, ftplib, TLS), so the
``ledger`` commands start fast; :mod:`tasks.stages.upload` builds on it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.errors import BadInput
from tasks.core.files import sha256_file
from tasks.core.records import UploadItem, described_sidecars, iter_asset_files, ready_name
from tasks.core.reports import CsvReport
from tasks.core.state_files import read_file
from tasks.core.workdir import Workdir
from tasks.images.clip_probe import ClipFacts
from tasks.stores.ledger import Entry, Ledger, LedgerState


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
    """(asset name, upload item) of every described asset whose upload-ready file exists, unless rejected in review."""
    folder = wd.packs / "ready"
    try:
        with os.scandir(folder) as entries:  # one listing, not a stat per asset
            ready = {entry.name for entry in entries if entry.is_file()}
    except FileNotFoundError:
        return []
    found = []
    for sidecar in described_sidecars(wd):
        name = ready_name(sidecar.name)
        if name in ready and not sidecar.rejected:
            found.append((sidecar.name, UploadItem(name, folder / name, sidecar.asset_id)))
    return found


def held_back(wd: Workdir) -> dict[str, dict[str, str]]:
    """agency -> asset name -> why the last run does not send it there (what ``ledger status`` shows).

    The pack stage's image rules (``reports/pack.json``) and the assets the
    CSV stage gave no valid row (``reports/validation.json``): the flow
    uploads neither, so neither is pending. An agency-wide CSV problem (its
    settings are invalid, so no CSV was written) holds back every asset
    there, under :data:`EVERY_ASSET`.
    """
    held: dict[str, dict[str, str]] = {}
    packed = read_file(wd.reports / "pack.json", PackHeldBack.model_validate_json,
                       "`ledger status` shows no asset held back by the image rules until the next run")
    for agency, rules in (packed.held_back if packed else {}).items():
        held.setdefault(agency, {}).update(rules)
    for clip in last_clips(wd).clips:  # a clip's video rule, as an image's rule
        for agency, rule in clip.held_back.items():
            held.setdefault(agency, {})[clip.file] = rule
    for problem in last_csvs(wd).problems:
        held.setdefault(problem.agency, {}).setdefault(problem.asset or EVERY_ASSET, problem.message)
    return held


class PackHeldBack(BaseModel):
    """What ``ledger status`` reads of ``reports/pack.json`` (:meth:`PackReport.as_json` writes it)."""

    held_back: dict[str, dict[str, str]] = Field(default_factory=dict)


#: The key under which :func:`held_back` records a reason that holds back every asset of an agency.
EVERY_ASSET = ""


def uploadable(wd: Workdir, agencies: list[str], csvs: CsvReport | None = None) -> dict[str, list[UploadItem]]:
    """agency -> the upload items it takes: packed (or a clip, sent as it is), and accepted by its CSV (``csvs``,
    else the last run's ``reports/validation.json``; an agency it does not name takes nothing); the ledger not
    asked. A clip has a row only where its agency's video rules take it (:mod:`tasks.stages.clips`)."""
    clips = [(name, item) for name, item, _ in taken_clips(wd)]
    return _taken(packed_assets(wd) + clips, csvs if csvs is not None else last_csvs(wd), agencies)


def taken_clips(wd: Workdir) -> list[tuple[str, UploadItem, set[str]]]:
    """(clip name, upload item, the agencies whose video rules take it) of every clip the last clips check
    (``reports/clips.json``) read, still in ``assets/``: the clip file itself, its identity its content."""
    found = []
    for clip in last_clips(wd).clips:
        path = wd.assets / clip.file
        if path.is_file():
            found.append((clip.file, UploadItem(clip.file, path, clip.asset_id), set(clip.taken_by)))
    return found


class ClipLine(BaseModel):
    """What is read back of one clip in ``reports/clips.json`` (:meth:`ClipsReport.as_json` writes it)."""

    file: str
    asset_id: str
    taken_by: list[str] = Field(default_factory=list)
    held_back: dict[str, str] = Field(default_factory=dict)
    # the clip's facts (ClipFacts), as the review form and batch-assets show them
    container: str = ""
    bytes: int = 0
    duration_s: float = 0.0
    width: int = 0
    height: int = 0
    frame_rate: float = 0.0
    codec: str = ""
    audio: str | None = None
    rotation: int = 0

    def facts(self) -> ClipFacts:
        return ClipFacts(**self.model_dump(include=set(ClipFacts.__dataclass_fields__)))


class ClipsRead(BaseModel):
    clips: list[ClipLine] = Field(default_factory=list)
    #: clip -> why the check could not read it (nothing is done with it)
    rejected: dict[str, str] = Field(default_factory=dict)


def last_clips(wd: Workdir) -> ClipsRead:
    """The last run's clips check; empty when missing or damaged (then set aside: no clip is pending or held
    back until the next run checks them again)."""
    return read_file(wd.reports / "clips.json", ClipsRead.model_validate_json,
                     "no clip counts as pending or held back until the next run checks them again") or ClipsRead()


def last_csvs(wd: Workdir) -> CsvReport:
    """The last run's CSV report (``reports/validation.json``); empty when missing or damaged (then set aside:
    nothing counts as pending until the next run's CSV stage writes it again)."""
    return read_file(wd.reports / "validation.json", CsvReport.model_validate_json,
                     "nothing counts as pending until the next run writes it again") or CsvReport()


def _taken(packed: list[tuple[str, UploadItem]], csvs: CsvReport, agencies: list[str]) -> dict[str, list[UploadItem]]:
    taken = {}
    for agency in agencies:
        accepted = set(csvs.agencies[agency].accepted) if agency in csvs.agencies else set()  # one set, not a scan
        taken[agency] = [item for asset, item in packed if asset in accepted]
    return taken


def ledger_overview(wd: Workdir, agencies: list[str]) -> tuple[list[AgencyLedger], LedgerState]:
    """Done and pending per agency, and the ledger as read (its ``problems`` included).

    The ledger is read in a second thread while the workdir is listed: on a
    long ledger much of the read is hashing, which lets the other thread run.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        reading = pool.submit(Ledger(wd.ledger).read)
        taken, held = uploadable(wd, agencies), held_back(wd)
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
