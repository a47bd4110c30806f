"""The upload stage: ledger-gated, one agency at a time, only what is confirmed is recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tasks.ledger import Ledger
from tasks.progress import StageProgress
from tasks.transports.local import LocalFolder
from tasks.workdir import Workdir


@dataclass
class AgencyUpload:
    """One agency's result: uploaded now, already in the ledger, failed (name -> reason)."""

    uploaded: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UploadItem:
    """A file to upload: the upload-ready file and the SHA-256 of its source image."""

    name: str
    path: Path
    sha256: str


def upload_agency(wd: Workdir, agency: str, items: list[UploadItem]) -> AgencyUpload:
    """Upload each item not yet in the ledger for ``agency``; record each after confirmation."""
    ledger = Ledger(wd.ledger)
    done = ledger.read().done_keys()
    result = AgencyUpload()
    with LocalFolder(wd.outbox(agency)) as transport, StageProgress(f"upload-{agency}", len(items)) as progress:
        for item in items:
            if (agency, item.sha256) in done:
                result.already.append(item.name)
            else:
                remote = transport.put(item.path, item.name)
                ledger.record(agency, item.name, item.sha256, remote)
                result.uploaded.append(item.name)
            progress.advance()
    return result
