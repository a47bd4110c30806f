"""The run summary: one record, built from the stages' reports, shown as a terminal table
(:mod:`tasks.observe.terminal`), Prefect artifacts (:mod:`tasks.observe.artifacts`) and the
final state message."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.agencies.catalog import catalog
from tasks.core.errors import BadInput
from tasks.core.printable import printable
from tasks.core.records import CLIP_EXTENSIONS, described_sidecars, read_sidecar, ready_name
from tasks.core.reports import NOT_SEEN, NOT_SEEN_WHY, AgencyUpload, CsvReport, DescribeReport, Gathered, PackReport
from tasks.core.workdir import Workdir
from tasks.images.provenance import provenance_of
from tasks.observe.similar_view import summary_notes


class BatchSummary(BaseModel):
    """What one stock-batch run left in the workdir, counted."""

    workdir: str
    #: Every asset of the run, images and clips (``described`` counts both); ``clips`` of them are clips.
    assets: int = 0
    clips: int = 0
    described: int = 0
    described_now: int = 0
    parked: int = 0
    #: Parked by earlier runs and waiting for a replay (not called again).
    still_parked: int = 0
    pending: int = 0
    #: Batch mode: assets waiting in a live Gemini batch job (a later run or collect-batches collects them).
    in_batch: int = 0
    #: Batch mode: jobs created this run.
    batch_jobs_submitted: int = 0
    #: Batch mode: what the batch answers collected this run would have cost at sync prices, minus their cost.
    batch_saved_usd: float = 0.0
    #: Generated images that could not be made this run (name -> reason); the next run tries again.
    not_generated: dict[str, str] = Field(default_factory=dict)
    rejected: dict[str, str] = Field(default_factory=dict)
    describer: str = ""
    stopped: str | None = None
    tokens: int = 0
    #: Tokens of every describe call this run (retries included), as Google bills them.
    prompt_tokens: int = 0
    output_tokens: int = 0
    thought_tokens: int = 0
    #: USD of the assets described this run whose price is known; ``cost_unknown`` counts the others.
    cost_usd: float = 0.0
    cost_unknown: int = 0
    #: Images generated this run by Gemini: their tokens, and the USD of those with a known price.
    generation_tokens: int = 0
    generation_cost_usd: float = 0.0
    generation_cost_unknown: int = 0
    #: Clips described this run by a model (part of the describe figures above): how many, their tokens, the
    #: USD of those with a known price (a clip with sound has none: the audio price is not in prices.toml).
    clips_described_now: int = 0
    clip_tokens: int = 0
    clip_cost_usd: float = 0.0
    clip_cost_unknown: int = 0
    csv_rows: dict[str, int] = Field(default_factory=dict)
    csv_files: dict[str, list[str]] = Field(default_factory=dict)
    uploaded_now: dict[str, int] = Field(default_factory=dict)
    uploaded_total: dict[str, int] = Field(default_factory=dict)
    #: Uploaded by another run at the same time, while this one waited its turn (counted in uploaded_total).
    uploaded_by_other_run: dict[str, int] = Field(default_factory=dict)
    upload_failed: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: Agencies that stopped early (refused login, unreachable server): agency -> why.
    upload_stopped: dict[str, str] = Field(default_factory=dict)
    #: Files left pending without being tried because their agency stopped: agency -> count.
    upload_not_tried: dict[str, int] = Field(default_factory=dict)
    #: The file each stopped agency was sending when it stopped (tried, not sent; counted in upload_not_tried).
    upload_stopped_on: dict[str, str] = Field(default_factory=dict)
    held_back: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: Every asset this run kept from an agency, by the rule of the CSV report: agency -> asset -> rule (similar
    #: content and image size from pack, a metadata rule such as ``keywords.min`` from the CSV stage; not the
    #: assets rejected for every agency nor review's, counted apart).
    held_rules: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: Own files no describer saw (their words would come from their file names): held back at every agency.
    not_seen: list[str] = Field(default_factory=list)
    #: Enlarged to the agencies' minimum (``pack.upscale_to_minimum``): name -> "W×H → W×H".
    upscaled: dict[str, str] = Field(default_factory=dict)
    targets: dict[str, str] = Field(default_factory=dict)
    zip_path: str | None = None
    #: What review made of an asset (``[review]`` on): name -> ``rejected in review (…)`` / ``waiting for review``.
    in_review: dict[str, str] = Field(default_factory=dict)
    #: agency -> (the portal tick, the files uploaded this run that need it): AI-generated files.
    ai_ticks: dict[str, tuple[str, list[str]]] = Field(default_factory=dict)
    #: agency -> the assets alike another of the batch or uploaded there (``tasks.observe.similar_view``).
    similar: dict[str, str] = Field(default_factory=dict)
    #: The run's final CSV report, as the CSV stage returned it: the terminal's validation table after the run.
    validation: CsvReport = Field(default_factory=CsvReport)

    @classmethod
    def from_stages(cls, wd: Workdir, gathered: Gathered, described: DescribeReport, csvs: CsvReport,
                    packed: PackReport, uploads: dict[str, AgencyUpload],
                    in_review: Mapping[str, str] | None = None) -> "BatchSummary":
        """The summary of one run, from what each of its stages reported (and the review step's cells)."""
        clips = sum(1 for a in gathered.assets if a.is_clip)
        return cls(
            workdir=str(wd.root),
            assets=len(gathered.assets),
            clips=clips,
            described=len(described.described) + len(described.already),
            described_now=len(described.described),
            parked=len(described.parked),
            still_parked=len(described.still_parked),
            pending=len(described.pending),
            in_batch=len(described.in_batch),
            batch_jobs_submitted=described.batch_jobs_submitted,
            batch_saved_usd=described.batch_saved_usd,
            not_generated=gathered.not_generated,
            rejected={**gathered.rejected, **packed.rejected},
            held_back=packed.held_back,
            held_rules=held_rules(csvs, {**gathered.rejected, **packed.rejected}),
            not_seen=sorted(packed.not_seen),
            upscaled=packed.upscaled,
            stopped="; ".join(filter(None, [gathered.stopped, described.stopped])) or None,
            describer=described.describer,
            tokens=described.tokens,
            prompt_tokens=described.usage.prompt_tokens,
            output_tokens=described.usage.output_tokens,
            thought_tokens=described.usage.thought_tokens,
            cost_usd=described.cost_usd,
            cost_unknown=described.cost_unknown,
            csv_rows=csvs.rows,
            csv_files=csvs.files,
            uploaded_now={a: len(u.uploaded) for a, u in uploads.items()},
            uploaded_total={a: len(u.uploaded) + len(u.reconciled) + len(u.already) for a, u in uploads.items()},
            uploaded_by_other_run={a: len(u.by_other_run) for a, u in uploads.items() if u.by_other_run},
            upload_failed={a: u.failed for a, u in uploads.items() if u.failed},
            upload_stopped={a: u.stopped for a, u in uploads.items() if u.stopped},
            upload_not_tried={a: len(u.not_tried) for a, u in uploads.items() if u.not_tried},
            upload_stopped_on={a: u.stopped_on for a, u in uploads.items() if u.stopped_on},
            targets={a: u.target or str(wd.outbox(a)) for a, u in uploads.items()},
            zip_path=str(packed.zip_path) if packed.zip_path else None,
            in_review=dict(in_review or {}),
            ai_ticks=needs_ai_tick(wd, uploads),
            similar=summary_notes(packed.risks) if packed.ready else {},
            validation=csvs,
            **generation_costs(wd, gathered.new),
            **clip_costs(wd, described.described),
        )

    def stopped_note(self, agency: str) -> str:
        """What a stopped agency left: ``sunset.jpg tried, 3 not tried, all 4 left pending`` (the file it stopped on
        was tried — its stop reason says how often — the others never were)."""
        left = self.upload_not_tried.get(agency, 0)
        tried = self.upload_stopped_on.get(agency)
        if tried is None:
            return f"{left} not tried, left pending"
        return f"{tried} tried, {left - 1} not tried, " + ("left pending" if left == 1 else f"all {left} left pending")

    def assets_note(self) -> str:
        """``3 images · 1 clip`` when the batch has clips; empty otherwise (every asset is an image)."""
        if not self.clips:
            return ""
        images = self.assets - self.clips
        return (f"{images} image{'s' if images != 1 else ''} · "
                f"{self.clips} clip{'s' if self.clips != 1 else ''}")

    def described_note(self) -> str:
        """``12 this run by gemini-2.5-flash``; ``none this run`` when everything was described before."""
        if not self.described_now:
            return "none this run" + (" (all described by earlier runs)" if self.described else "")
        return f"{self.described_now} this run by {self.describer or 'the describer'}"

    def review_count(self, prefix: str) -> int:
        """Assets whose review cell starts with ``prefix`` (``rejected in review``, ``waiting for review``)."""
        return sum(1 for cell in self.in_review.values() if cell.startswith(prefix))

    def ai_tick_notes(self) -> list[str]:
        """One line per agency whose portal needs an AI tick for files uploaded this run."""
        return [f"{agency}: tick \"{tick}\" in the contributor portal for {len(files)} AI-generated file(s) "
                f"(and \"People and Property are fictional\" where they appear): {', '.join(files[:LISTED])}"
                + (f" … and {len(files) - LISTED} more" if len(files) > LISTED else "")
                for agency, (tick, files) in self.ai_ticks.items()]

    @property
    def tokens_per_asset(self) -> float:
        """Average Gemini tokens per asset described this run (0 when none was)."""
        return self.tokens / self.described_now if self.described_now else 0.0

    def tokens_note(self) -> str:
        """``3,852 tokens (321 per asset)``, or empty when no tokens were used (offline)."""
        return f"{self.tokens:,} tokens ({self.tokens_per_asset:,.0f} per asset)" if self.tokens else ""

    def usage_note(self) -> str:
        """Billed tokens and cost of the describe calls: ``prompt 2,700 · output 180 · thinking 120 ·
        $0.0012 ($0.0004 per asset)``; says when the cost is unknown; empty offline."""
        if not (self.prompt_tokens or self.output_tokens or self.thought_tokens):
            return ""
        parts = [f"prompt {self.prompt_tokens:,} · output {self.output_tokens:,} · thinking {self.thought_tokens:,}"]
        priced = self.described_now - self.cost_unknown
        if priced:
            parts.append(f"${self.cost_usd:.4f} (${self.cost_usd / priced:.4f} per asset)")
        if self.cost_unknown:
            parts.append(f"cost unknown for {self.cost_unknown} (no confirmed price)")
        if self.batch_saved_usd:
            parts.append(self.batch_note())
        return " · ".join(parts)

    def batch_note(self) -> str:
        """``batch saved $0.0012 against sync prices``: the savings of the batch answers collected this run."""
        return f"batch saved ${self.batch_saved_usd:.4f} against sync prices"

    def generation_note(self) -> str:
        """Tokens and cost of the images generated this run: ``3,360 tokens · $0.2680``; empty when none was billed."""
        if not self.generation_tokens:
            return ""
        parts = [f"{self.generation_tokens:,} tokens"]
        if self.generation_cost_usd:
            parts.append(f"${self.generation_cost_usd:.4f}")
        if self.generation_cost_unknown:
            parts.append(f"cost unknown for {self.generation_cost_unknown} (no confirmed price)")
        return " · ".join(parts)

    def clip_note(self) -> str:
        """Tokens and cost of the clips a model described this run: ``2 clips · 3,400 tokens · $0.0011 ($0.0006 per
        clip)``; empty when none was billed."""
        if not self.clip_tokens:
            return ""
        parts = [f"{self.clips_described_now} clip{'s' if self.clips_described_now != 1 else ''}",
                 f"{self.clip_tokens:,} tokens"]
        priced = self.clips_described_now - self.clip_cost_unknown
        if priced:
            parts.append(f"${self.clip_cost_usd:.4f} (${self.clip_cost_usd / priced:.4f} per clip)")
        if self.clip_cost_unknown:
            parts.append(f"cost unknown for {self.clip_cost_unknown} (sound, or no confirmed price)")
        return " · ".join(parts)

    def review_count_now(self, prefix: str) -> int:
        """Like :meth:`review_count`, this run's decisions only (an earlier run's cell carries its time)."""
        return sum(1 for cell in self.in_review.values() if cell == prefix)

    def uploads_left_pending(self) -> int:
        """Files this run left for a later one: not tried because their agency stopped, or failed and kept."""
        return sum(self.upload_not_tried.values()) + sum(len(f) for f in self.upload_failed.values())

    def undone(self, reasons: bool = True) -> list[str]:
        """What this run left undone that needs the contributor, worst first (empty: nothing):
        ``6 uploads left pending: adobe stopped (connection refused)``, ``2 waiting for review``,
        ``stopped: …`` (the describe stage), ``1 held back everywhere: no describer saw it …`` (own files whose words
        would come from their file names). Parked jobs are not here: they wait for a replay by design.
        Without ``reasons``, no stop's message (for events, which carry no messages)."""
        parts = []
        stops = ", ".join(f"{agency} stopped" + (f" ({brief(why).removeprefix(agency + ': ')})" if reasons else "")
                          for agency, why in self.upload_stopped.items())
        if self.uploads_left_pending():
            parts.append(f"{self.uploads_left_pending()} upload(s) left pending" + (f": {stops}" if stops else ""))
        elif stops:
            parts.append(stops)
        if self.not_seen:
            parts.append(f"{len(self.not_seen)} held back everywhere: " + (NOT_SEEN_WHY if reasons else "not seen"))
        if self.review_count("waiting for review"):
            parts.append(f"{self.review_count('waiting for review')} waiting for review")
        if self.stopped:
            parts.append(f"stopped: {self.stopped.splitlines()[0][:200]}" if reasons else "describe stopped")
        return parts

    def headline(self, reasons: bool = True) -> str:
        """The final state message: ``12 described · 1 parked · 36 uploaded``, then what is left undone
        (``· 6 upload(s) left pending: adobe stopped (connection refused)``; without ``reasons``, no stop's
        message); every count is this run's."""
        parts = [f"{self.described_now} described", f"{self.parked} parked"]
        if self.pending:
            parts.append(f"{self.pending} pending")
        if self.in_batch:
            parts.append(f"{self.in_batch} in batch jobs")
        if self.not_generated:
            parts.append(f"{len(self.not_generated)} not generated")
        if self.rejected:
            parts.append(f"{len(self.rejected)} rejected")
        if self.review_count_now("rejected in review"):
            parts.append(f"{self.review_count_now('rejected in review')} rejected in review")
        parts.append(f"{sum(self.uploaded_now.values())} uploaded")
        if self.held_rules:
            parts.append(self.held_note())
        return " · ".join(parts + self.undone(reasons))

    def held_note(self) -> str:
        """``held back: adobe 16 (similar content), vecteezy 1 (below the keyword minimum)``: what was kept from
        each agency this run, and why (not undone: sending it would break the agency's rule)."""
        per_agency = []
        for agency, rules in self.held_rules.items():
            counts = Counter(held_label(rule) for rule in rules.values())
            why = ", ".join(label if len(counts) == 1 else f"{n} {label}" for label, n in counts.most_common())
            per_agency.append(f"{agency} {len(rules)} ({why})")
        return "held back: " + ", ".join(per_agency)


def brief(why: str, limit: int = 120) -> str:
    """A stop's reason for a one-line message: its first line up to the advice (`` — check …``), at most
    ``limit`` characters, cut at a word with ``…``."""
    text = why.splitlines()[0].split(" — ", 1)[0] if why else ""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + "…"


#: Readable words for the rules that hold an asset back most often (any other rule is shown by its name).
HELD_LABELS = {"keywords.min": "below the keyword minimum", "ai.refused": "AI-generated not accepted",
               "duplicate": "duplicate: the same picture as another asset", NOT_SEEN: "no describer saw it"}


def held_label(rule: str) -> str:
    """A hold's rule in words: ``similar content``, ``image size``, ``below the keyword minimum``, …"""
    return HELD_LABELS.get(rule, rule)


def held_rules(csvs: CsvReport, rejected: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """agency -> asset -> the first rule that kept it from that agency (the CSV report's problems), leaving out
    review's, the assets in ``rejected`` (kept from every agency, and counted as rejected) and those no describer saw
    (held back everywhere, counted apart: ``not_seen``)."""
    held: dict[str, dict[str, str]] = {}
    for p in csvs.problems:
        if p.asset and p.rule not in ("review", "image", NOT_SEEN) and p.asset not in rejected:
            held.setdefault(p.agency, {}).setdefault(p.asset, p.rule)
    return held


#: Names listed in a summary row; a batch of thousands shows the first ones and a count.
LISTED = 10


#: Where every rejected file is listed with its reason (and, for the assets stage, what to do).
REJECTED_IN = "reports/ingest.json and reports/pack.json"


def listed(reasons: dict[str, str], every_one_in: str = "") -> str:
    """``name: reason; …`` for the first :data:`LISTED` names, then ``… and N more`` (``: every one in …`` when
    a report lists them all)."""
    names = sorted(reasons)
    text = "; ".join(f"{printable(k)}: {printable(reasons[k])}" for k in names[:LISTED])
    if len(names) <= LISTED:
        return text
    return text + f"; … and {len(names) - LISTED} more" + (f": every one in {every_one_in}" if every_one_in else "")


def needs_ai_tick(wd: Workdir, uploads: Mapping[str, AgencyUpload]) -> dict[str, tuple[str, list[str]]]:
    """agency -> (its portal tick, the AI-generated files uploaded there this run), for agencies whose spec has one."""
    asked = {agency: tick for agency, upload in uploads.items()
             if upload.uploaded and (tick := catalog(wd).spec(agency).ai.portal_tick)}
    if not asked:  # no sidecar to read
        return {}
    ai_files = {ready_name(s.name) for s in described_sidecars(wd) + described_sidecars(wd, CLIP_EXTENSIONS)
                if s.metadata.ai_generated}  # a generated clip is ticked as a generated image is
    ticks = {}
    for agency, tick in asked.items():
        files = sorted(set(uploads[agency].uploaded) & ai_files)
        if files:
            ticks[agency] = (tick, files)
    return ticks


def generation_costs(wd: Workdir, new: list[str]) -> dict:
    """The summary's generation fields, from the records the generator kept next to each new image."""
    tokens, cost, unknown = 0, 0.0, 0
    for name in new:
        try:
            provenance = provenance_of(wd.assets / name)
        except BadInput:  # rejected by the assets stage: named there already
            continue
        if provenance.usage is None:
            continue
        tokens += provenance.usage.total
        if provenance.cost_usd is None:
            unknown += 1
        else:
            cost += provenance.cost_usd
    return {"generation_tokens": tokens, "generation_cost_usd": cost, "generation_cost_unknown": unknown}


def clip_costs(wd: Workdir, described_now: list[str]) -> dict:
    """The summary's clip fields, from the sidecars of the clips described this run by a model."""
    count, tokens, cost, unknown = 0, 0, 0.0, 0
    for name in described_now:
        if Path(name).suffix.lower() not in CLIP_EXTENSIONS:
            continue
        sidecar = read_sidecar(wd.sidecar(name))
        if sidecar is None or sidecar.name != name or not sidecar.metadata.usage.total:
            continue
        count, tokens = count + 1, tokens + sidecar.metadata.usage.total
        if sidecar.metadata.cost_usd is None:
            unknown += 1
        else:
            cost += sidecar.metadata.cost_usd
    return {"clips_described_now": count, "clip_tokens": tokens, "clip_cost_usd": cost, "clip_cost_unknown": unknown}
