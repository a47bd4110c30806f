"""What each stage did in one run: plain records the flows pass on and ``tasks.observe`` renders.

They live here, below the stages, so the summary and the artifacts can read
them without importing the stages that fill them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.records import Asset, Usage


@dataclass
class Gathered:
    """The batch after the assets stage: every asset in the workdir, and what was rejected."""

    assets: list[Asset]
    new: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    #: Generated images that could not be made this run (name -> reason); tried again next run.
    not_generated: dict[str, str] = field(default_factory=dict)
    stopped: str | None = None
    #: Assets ingested now whose upload-ready copy leaves something out (name -> what, in words).
    left_out: dict[str, str] = field(default_factory=dict)


@dataclass
class DescribeReport:
    """What the describe stage did this run."""

    #: Described now.
    described: list[str] = field(default_factory=list)
    #: Had a sidecar already.
    already: list[str] = field(default_factory=list)
    #: Parked now: name → error class.
    parked: dict[str, str] = field(default_factory=dict)
    #: Parked by an earlier run, left for a replay (not called).
    still_parked: list[str] = field(default_factory=list)
    #: Not described and not parked (stage stopped, store unavailable): the next run tries again.
    pending: list[str] = field(default_factory=list)
    #: Why the stage stopped calling the describer, if it did.
    stopped: str | None = None
    tokens: int = 0
    #: Tokens of every call for the assets described now (retries included), as Google bills them.
    usage: Usage = field(default_factory=Usage)
    #: USD of the assets described now whose price is known (``tasks/gemini/prices.toml``).
    cost_usd: float = 0.0
    #: Assets described now whose cost is unknown (no confirmed price for the model).
    cost_unknown: int = 0
    #: The describer used this run (``offline``, ``gemini:<model>``), empty when none was needed.
    describer: str = ""
    #: Batch mode: assets waiting in a live Gemini batch job (submitted now or earlier); a later run collects them.
    in_batch: list[str] = field(default_factory=list)
    #: Batch mode: jobs created this run.
    batch_jobs_submitted: int = 0
    #: Batch mode: what the assets described from batch answers now would have cost at sync prices, minus their cost.
    batch_saved_usd: float = 0.0


@dataclass
class ReplayReport:
    """What a replay did: the original design's four numbers, plus what became of each job."""

    scanned: int = 0
    recovered: int = 0
    still_failing: int = 0
    dry_run: bool = True
    #: Names of the assets described by this replay (they go on to CSVs, pack and upload).
    recovered_assets: list[str] = field(default_factory=list)
    #: asset name (or job id) → why it is still parked.
    failing: dict[str, str] = field(default_factory=dict)
    #: Why the replay stopped calling the describer, if it did.
    stopped: str | None = None
    #: A dry run's list: one :func:`dry_run_line` per job it would replay.
    would_replay: list[str] = field(default_factory=list)
    #: asset name (or job id) → the error class it was parked under, for every job taken (or listed by a dry run).
    error_classes: dict[str, str] = field(default_factory=dict)
    #: Left parked, not replayed: asset name (or job id) → its class, one that fails again unless something is
    #: changed first (``permanent:*``, ``blocked:*``); replayed only when asked (``include_doomed``).
    skipped: dict[str, str] = field(default_factory=dict)

    def headline(self) -> str:
        skipped = f" · {len(self.skipped)} skipped (fail again unless changed first)" if self.skipped else ""
        if self.dry_run:
            return f"dry run: {self.scanned} parked job(s) would be replayed{skipped}"
        return f"{self.scanned} replayed · {self.recovered} recovered · {self.still_failing} still failing{skipped}"


class Problem(BaseModel):
    """Why an asset has no row for an agency (``asset`` is "" for an agency-wide problem)."""

    model_config = ConfigDict(frozen=True)

    agency: str
    asset: str
    rule: str
    message: str


class AgencyCsv(BaseModel):
    """What was written for one agency."""

    agency: str
    display_name: str
    rows: int = 0
    #: Paths of the CSV files, first file first.
    files: list[str] = Field(default_factory=list)
    #: Asset names with a valid row.
    accepted: list[str] = Field(default_factory=list)
    #: Deterministic fixes made, by rule (``title.max_chars`` → 3).
    fixes: dict[str, int] = Field(default_factory=dict)
    #: How the contributor hands the CSV over (``portal``: uploaded by hand).
    csv_upload: str = "portal"
    #: False when the agency's settings are invalid: no file was written.
    written: bool = True


class CsvReport(BaseModel):
    """The run's CSV stage: per agency what was written, and every problem found."""

    agencies: dict[str, AgencyCsv] = Field(default_factory=dict)
    #: Assets skipped for an agency (``asset`` is "" for an agency-wide problem).
    problems: list[Problem] = Field(default_factory=list)

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per agency."""
        return {a: r.rows for a, r in self.agencies.items()}

    @property
    def files(self) -> dict[str, list[str]]:
        """CSV files written per agency."""
        return {a: r.files for a, r in self.agencies.items()}

    def accepted(self, agency: str, asset: str) -> bool:
        """Has ``asset`` a valid row in the agency's CSV this run? The one answer to "what goes to agency X"."""
        found = self.agencies.get(agency)
        return found is not None and asset in found.accepted

    def accepted_somewhere(self) -> set[str]:
        """The assets some agency's CSV has a valid row for: what the batch ZIP holds."""
        return {name for found in self.agencies.values() for name in found.accepted}


@dataclass(frozen=True)
class Risk:
    """One asset at one agency: how alike its nearest other asset is, and what was done about it."""

    score: float
    #: The closest other asset (of this batch, or uploaded there before), "" when none was found.
    nearest: str = ""
    nearest_sha256: str = ""
    #: The closest asset is already uploaded to this agency (else it is in this batch).
    nearest_uploaded: bool = False
    #: The signals behind the score ("colour 0.95, title 1.00").
    why: str = ""
    #: Versions in the asset's group (itself included): 1 when nothing scores above the threshold.
    versions: int = 1
    #: The group's first asset by name (names the motif).
    motif: str = ""
    #: ``held back``, ``released`` (held back but released by the contributor), ``warned`` (above the
    #: threshold, the agency's policy is to warn), ``duplicate`` (the same picture as ``nearest``: held back
    #: everywhere, no version), or "" (below the threshold).
    outcome: str = ""
    threshold: float = 0.0
    #: An earlier asset of the batch with the same title and nearly the same first ten keywords, whatever the
    #: score (``tasks.images.likeness.named_alike``); "" when none. ``microstock similar distinct`` sets it apart.
    same_words_as: str = ""

    @property
    def risky(self) -> bool:
        return self.score >= self.threshold > 0


@dataclass
class PackReport:
    """Upload-ready files per asset name, of every kind, and what was held back or rejected.

    Each kind of asset fills it by its own parts (:mod:`tasks.stages.kinds`): an image's upload-ready file is
    its packed JPEG, a clip's the clip itself; the later stages read it alike for every kind.
    """

    #: asset name -> upload-ready file (every packed asset, held back or not; a clip: the clip in ``assets/``)
    ready: dict[str, Path] = field(default_factory=dict)
    #: asset name -> the SHA-256 of its source (the ledger's key for it), for every asset of ``ready``
    asset_ids: dict[str, str] = field(default_factory=dict)
    #: asset name -> its preview and its thumbnail (an image's packed ones; a clip's poster and its thumbnail)
    previews: dict[str, Path] = field(default_factory=dict)
    thumbnails: dict[str, Path] = field(default_factory=dict)
    #: asset name -> what its kind tells of it in words, when it tells more than its metadata (a clip:
    #: ``MP4 · 8.0 s · 1920×1080 · …``)
    about: dict[str, str] = field(default_factory=dict)
    #: agency -> asset name -> why the agency takes no asset of this kind as it is (a clip's ``[video]`` rules,
    #: its similarity check): no row and no upload there, and not counted as held back (no CSV problem either)
    not_taken: dict[str, dict[str, str]] = field(default_factory=dict)
    #: agency -> asset name -> rule it broke (held back for that agency only)
    held_back: dict[str, dict[str, str]] = field(default_factory=dict)
    #: asset name -> reason (nothing of it is packed, listed in a CSV or uploaded)
    rejected: dict[str, str] = field(default_factory=dict)
    zip_path: Path | None = None
    #: asset name -> "W×H → W×H": enlarged to the run's largest minimum (``pack.upscale_to_minimum``)
    upscaled: dict[str, str] = field(default_factory=dict)
    #: asset names packed this run, and those whose files were already current
    packed_now: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    #: agency -> the assets of ``held_back`` held there as too many versions of one motif (similar content)
    similar_held: dict[str, set[str]] = field(default_factory=dict)
    #: agency -> the assets of ``held_back`` held there as duplicates (the same picture as another asset)
    duplicate_held: dict[str, set[str]] = field(default_factory=dict)
    #: agency -> asset name -> its similarity risk (every kind's check; ``reports/similarity.json`` shows them)
    risks: dict[str, dict[str, Risk]] = field(default_factory=dict)
    #: asset name -> why no agency gets it: its words come from nothing but its file name
    #: (``Metadata.from_file_name``); it is in ``held_back`` at every agency of the run too
    not_seen: dict[str, str] = field(default_factory=dict)

    def joined(self, other: "PackReport") -> "PackReport":
        """This report and ``other`` (of assets of another kind) as one, in name order."""
        def by_agency(a: dict, b: dict) -> dict:
            return {agency: {**a.get(agency, {}), **b.get(agency, {})} for agency in sorted({*a, *b})}

        def sets(a: dict[str, set[str]], b: dict[str, set[str]]) -> dict[str, set[str]]:
            return {agency: a.get(agency, set()) | b.get(agency, set()) for agency in {*a, *b}}

        return PackReport(
            ready=dict(sorted({**self.ready, **other.ready}.items())),
            asset_ids={**self.asset_ids, **other.asset_ids}, previews={**self.previews, **other.previews},
            thumbnails={**self.thumbnails, **other.thumbnails},
            about={**self.about, **other.about}, not_taken=by_agency(self.not_taken, other.not_taken),
            held_back=by_agency(self.held_back, other.held_back),
            rejected=dict(sorted({**self.rejected, **other.rejected}.items())),
            zip_path=self.zip_path or other.zip_path, upscaled={**self.upscaled, **other.upscaled},
            packed_now=sorted(self.packed_now + other.packed_now), reused=sorted(self.reused + other.reused),
            similar_held=sets(self.similar_held, other.similar_held),
            duplicate_held=sets(self.duplicate_held, other.duplicate_held), risks=by_agency(self.risks, other.risks),
            not_seen={**self.not_seen, **other.not_seen})

    def left_out(self, agency: str) -> dict[str, str]:
        """Assets kept from ``agency`` for a reason its CSV report names (their rows' problems): rejected, or held
        back for it (what :attr:`not_taken` keeps from it is no row problem)."""
        return {**self.rejected, **self.held_back.get(agency, {})}

    def left_out_rule(self, agency: str, name: str) -> str:
        """The rule an asset of :meth:`left_out` is left out of ``agency`` by, as the CSV report names it:
        ``similar content`` (too many versions of one motif), ``duplicate`` (the same picture as another asset),
        ``image size`` (the agency's pixel, side or file size rules), ``video`` (a clip's video rules:
        :attr:`not_taken`), ``not seen`` (:attr:`not_seen`), ``image`` (rejected for every agency)."""
        if name in self.not_seen and name in self.held_back.get(agency, {}):
            return NOT_SEEN
        if name in self.similar_held.get(agency, ()):
            return SIMILAR_CONTENT
        if name in self.duplicate_held.get(agency, ()):
            return DUPLICATE
        if name in self.not_taken.get(agency, {}):
            return "video"
        return "image size" if name in self.held_back.get(agency, {}) else "image"

    def as_json(self) -> dict:
        return {
            "packed": sorted(self.ready),
            "held_back": {a: dict(sorted(v.items())) for a, v in sorted(self.held_back.items())},
            "rejected": dict(sorted(self.rejected.items())),
            "upscaled": dict(sorted(self.upscaled.items())),
            "zip": self.zip_path.name if self.zip_path else None,
        }


#: The CSV report's rule for an asset held back as one version too many of one motif (``PackReport.similar_held``).
SIMILAR_CONTENT = "similar content"
#: The CSV report's rule for an asset held back as a duplicate of another (``PackReport.duplicate_held``).
DUPLICATE = "duplicate"
#: The CSV report's rule for an asset held back because no describer saw it (``PackReport.not_seen``).
NOT_SEEN = "not seen"
#: Why an asset of ``PackReport.not_seen`` goes nowhere, and the way on (docs/FAILURES.md, "No describer saw it").
NOT_SEEN_WHY = ("no describer saw it (its title and keywords would come from its file name): set a Gemini key or "
                "an OpenAI-compatible endpoint ([describer] in microstock.toml), or write them with "
                "`microstock review edit`")


@dataclass
class AgencyUpload:
    """One agency's result."""

    #: Sent and confirmed this run.
    uploaded: list[str] = field(default_factory=list)
    #: Found whole on the server and recorded without sending (an earlier run was cut short).
    reconciled: list[str] = field(default_factory=list)
    #: Already in the ledger before this run.
    already: list[str] = field(default_factory=list)
    #: Of ``already``: recorded by another run that was uploading to the agency while this one waited its turn.
    by_other_run: list[str] = field(default_factory=list)
    #: Left pending: name -> why.
    failed: dict[str, str] = field(default_factory=dict)
    #: Left pending without being tried, because the agency stopped (and the file it stopped on, see below).
    not_tried: list[str] = field(default_factory=list)
    #: The file being sent when the agency stopped: tried (maybe several times), not sent, left pending.
    stopped_on: str | None = None
    #: Why the agency stopped early, if it did.
    stopped: str | None = None
    #: Where the files went (no password).
    target: str = ""
