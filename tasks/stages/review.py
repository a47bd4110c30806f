"""The review step: with ``[review] enabled = true``, nothing new leaves before the contributor has looked.

After pack and the CSVs, and before the ZIP and the uploads, a run whose
batch has described assets without a decision pauses for input — the same
three calls as Prefect's ``pause_flow_run(wait_for_input=…)``, made by hand so
the Paused state says what it waits for (``tasks/orchestration/review_pause.py``,
a workaround in docs/ARCHITECTURE.md): the UI shows the run as Paused with a form, and above it a table of the assets
waiting (file, title, first keywords, the keywords the contributor's rules
removed and why, categories, and per agency whether it
will be sent or is held back and why), each with a small inline thumbnail
(a ``data:`` URI, which the UI renders). The form's field ``reject``
picks the file names to leave out (the waiting names are its choices);
submitting it approves every other waiting asset. ``corrections`` may give
an asset (picked the same way) a new title, description and/or keywords:
written to its sidecar before the run packs and writes the CSVs again, so
the same agency rules check them (a rule broken holds the asset back there).
``microstock review edit`` writes a correction the same way
(:func:`edit_asset`); made while a run is paused, it is taken up when the run
is answered, as the form's are: the run packs and writes the CSVs again for
every asset whose sidecar changed while it waited.

Video clips wait for review as images do (one path for every kind of asset, :mod:`tasks.stages.kinds`): every
packed clip without a decision is asked about in the same form, with its facts and its poster's thumbnail, and
a clip rejected (or still waiting) gets no CSV row, so it is not uploaded anywhere.

A decision made from the terminal while the run waits (``microstock review
approve NAME…`` / ``reject NAME…``, written to the sidecar at once) stands:
the answer's "every other asset is approved" covers only the assets nobody
decided (an explicit reject in the answer still wins), and a time-out holds
or approves only those.

An answer naming anything that is not waiting (a name typed slightly wrong,
through the API or the terminal) is refused as a whole: nothing is approved,
and the run asks again with the refusal above the form. The paused run's
state message, the log and the terminal say what it waits for
(:func:`waiting_message`).

Decisions are written into each asset's sidecar (:class:`~tasks.core.records.ReviewDecision`,
when and from where), so a decided asset is never asked about again and a
rejected one never gets a CSV row (:mod:`tasks.stages.csv`) nor an upload
(:mod:`tasks.stores.pending`). Nothing is recorded before the answer: a run
that crashes while paused loses nothing, the next run asks again.

When no answer comes within ``timeout_hours``: ``on_timeout = "hold"`` (the
default) sends nothing of what was waiting — the CSVs leave it out, the next
run asks again — and ``"approve"`` approves it all. Either way the run goes
on, saying so; a run that left assets waiting ends ``Incomplete`` (a
Failed-type state: uploads were left undone), one that approved them ends as
its uploads say.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from tasks.agencies.catalog import catalog
from tasks.agencies.keyword_rules import removed_words
from tasks.agencies.protected import ProtectedNames
from tasks.agencies.rows import RowResult, build_row
from tasks.core.records import (
    CLIP_EXTENSIONS,
    Sidecar,
    described_sidecars,
    read_sidecar,
    ready_name,
    record_review,
    update_sidecar,
)
from tasks.core.reports import CsvReport, PackReport, Problem
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.observe import progress as stage_progress
from tasks.observe.events import Events
from tasks.observe.markdown import md_cell, md_code
from tasks.observe.similar_view import review_cell
from tasks.observe.thumbnails import inline_thumbnail
from tasks.stages.kinds import kind_of
from tasks.stores.ledger import Ledger
from tasks.stores.pending import read_where
from tasks.stores.similar_risks import read_distinct

log = logging.getLogger(__name__)

#: At most this many assets listed in the form's description (the rest are counted; ``reject`` takes any name).
MAX_LISTED = 200

#: The first this many listed assets get an inline thumbnail (≈ 3 KB each in the form's description).
MAX_THUMBNAILS = 50

#: Width of an inline thumbnail, in pixels.
THUMBNAIL_PX = 80


class Correction(BaseModel):
    """A new title, description and/or keywords for one asset (what is left empty stays as it is)."""

    file: str = Field(description="The asset's file name, as listed above.")
    title: str | None = Field(None, description="The new title.")
    description: str | None = Field(None, description="The new description.")
    keywords: list[str] | None = Field(None, description="The new keywords, most important first.")


class Answer(Protocol):
    """What an answer to the review says (the form's fields: :class:`tasks.orchestration.review_pause.ReviewAnswer`)."""

    reject: list[str]
    corrections: list[Correction]


@dataclass(frozen=True)
class Question:
    """What the run asks the contributor: the form's description, the waiting names (the only answers taken),
    the paused run's state message, and how long to wait."""

    description: str
    waiting: list[str]
    message: str
    timeout_s: int


#: ``ask(question)``: pause until the contributor answers; None when no answer came in time.
Ask = Callable[[Question], Answer | None]


def waiting_message(n: int) -> str:
    """What a run paused for review waits for, said in its state message, its log and on the terminal."""
    return f"{n} asset(s) waiting for review — answer in the Prefect UI (the run → Resume) or with `microstock review`"


def refused(answer: Answer, waiting: list[str]) -> list[str]:
    """The names in ``answer`` (rejects and corrections) that are not waiting: any makes the answer refused."""
    named = set(answer.reject) | {c.file for c in answer.corrections}
    return sorted(named - set(waiting))


@dataclass
class ReviewReport:
    """What the review step decided this run, and every asset rejected in review so far."""

    #: Assets this run asked about (empty: review is off, or nothing was waiting).
    asked: list[str] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    #: Still waiting after a time-out with ``on_timeout = "hold"``: not sent this run, asked again next run.
    held: list[str] = field(default_factory=list)
    #: Names in refused answers that were not waiting (each such answer was refused and asked again).
    unknown: list[str] = field(default_factory=list)
    #: Assets whose sidecar's metadata changed while the run waited — corrected in the form or with
    #: ``microstock review edit`` — so their files are packed again.
    corrected: list[str] = field(default_factory=list)
    timed_out: bool = False
    #: Rejected by earlier runs' reviews: name -> when.
    rejected_before: dict[str, str] = field(default_factory=dict)

    def cells(self) -> dict[str, str]:
        """Asset name -> what review made of it, for the ``batch-assets`` table and the summary."""
        out = {name: f"rejected in review ({at})" for name, at in self.rejected_before.items()}
        out.update({name: "rejected in review" for name in self.rejected})
        out.update({name: "waiting for review" for name in self.held})
        return out

    def message(self) -> str:
        """One line for the log: what was asked and decided."""
        if not self.asked:
            return "review: nothing waiting"
        text = f"review: {len(self.asked)} asked · {len(self.approved)} approved · {len(self.rejected)} rejected"
        if self.corrected:
            text += f" · {len(self.corrected)} corrected"
        if self.timed_out:
            text += f" · no answer in time: {len(self.held)} held for the next run" if self.held else \
                " · no answer in time: approved"
        return text


def review_sidecars(wd: Workdir) -> list[Sidecar]:
    """The sidecars review decides about, in file-name order: every described image and every described clip."""
    return sorted(described_sidecars(wd) + described_sidecars(wd, CLIP_EXTENSIONS), key=lambda s: s.name)


def waiting_sidecars(sidecars: list[Sidecar], packed: PackReport) -> list[Sidecar]:
    """Described and packed assets of every kind without a review decision (rejected ones by pack are not asked
    about)."""
    return [s for s in sidecars if s.review is None and s.name in packed.ready and s.name not in packed.rejected]


def agency_verdict(name: str, agency: str, csvs: CsvReport, packed: PackReport) -> str:
    """``sent`` or ``held back: <why>`` for one asset at one agency, from the CSV stage's report (and the pack
    stage's: the rules of its kind that keep it from there, :attr:`PackReport.not_taken`)."""
    if csvs.accepted(agency, name):
        return "sent"
    why = [packed.not_taken[agency][name]] if name in packed.not_taken.get(agency, {}) else []
    why += [p.message for p in csvs.problems if p.agency == agency and p.asset in (name, "")]
    return f"held back: {why[0]}" if why else "held back"


def review_description(wd: Workdir, waiting: list[Sidecar], packed: PackReport, csvs: CsvReport,
                       settings: Settings) -> str:
    """The markdown above the form: one list item per waiting asset (a thumbnail — a clip's is its poster's; file
    and title, a clip's facts, first keywords, categories, where it goes and the keywords the rules removed, a line
    each), and what submitting
    does."""
    m = md_cell
    lines = [f"## {len(waiting)} asset(s) waiting for review", "",
             "Pick the files to leave out in **reject**, then submit: every other asset below is approved "
             "and uploaded. Rejected assets get no CSV row and are never uploaded. **corrections** (optional) "
             "gives an asset a new title, description and/or keywords, checked against every agency's rules "
             "(`microstock review edit NAME` does the same from the terminal before you answer).", "",
             ""]
    risks = packed.risks  # the similarity check's risk and nearest asset (docs/AGENCIES.md, "Similar content")
    changes = read_distinct(wd)  # titles and keywords set apart by `microstock similar distinct`
    for i, s in enumerate(waiting[:MAX_LISTED]):
        md, about = s.metadata, packed.about.get(s.name)  # what its kind tells of it (a clip's facts)
        shown = packed.thumbnails.get(s.name)
        thumb = inline_thumbnail(shown, THUMBNAIL_PX) if shown and i < MAX_THUMBNAILS else ""
        categories = ", ".join(filter(None, [f"Adobe {md.adobe_category}" if md.adobe_category else "",
                                             ", ".join(md.category_hints)]))
        goes = "; ".join(f"{a}: {agency_verdict(s.name, a, csvs, packed)}" for a in csvs.agencies)
        similar = review_cell(wd, risks, changes, s.name, m, i < MAX_THUMBNAILS)
        # a list item, the details a line each: the UI's form is a narrow modal, and a table's cells do not wrap
        lines.append(f"- {thumb + ' ' if thumb else ''}{md_code(s.name)} — **{m(md.title)}**"
                     + (f"<br>{kind_of(s.name).name}: {m(about)}" if about else "")
                     + f"<br>keywords: {m(', '.join(md.keywords[:6]))}<br>categories: {m(categories)}"
                     f"<br>goes: {m(goes)}"
                     + (f"<br>removed keywords: {m(removed_words(md.removed_keywords))}" if md.removed_keywords else "")
                     + (f"<br>similar to: {similar}" if similar else ""))
    if len(waiting) > MAX_LISTED:
        lines.append(f"\n… and {len(waiting) - MAX_LISTED} more (every one is approved unless listed in reject).")
    review = settings.review
    lines += ["", f"Without an answer within {review.timeout_hours:g} h: "
                  + ("nothing of this is sent; the next run asks again." if review.on_timeout == "hold"
                     else "everything above is approved and sent.")]
    return "\n".join(lines)


def review_decisions(wd: Workdir, settings: Settings, packed: PackReport, csvs: CsvReport, ask: Ask,
                     events: Events) -> ReviewReport:
    """Ask about the assets waiting for review (when ``[review]`` is enabled) with ``ask``, and record the answer;
    ``events`` (the run's) is told how many wait before it asks.

    Returns what was decided and every asset rejected so far; never asks when review is off or
    nothing is waiting.
    """
    sidecars = review_sidecars(wd)
    report = ReviewReport(rejected_before={s.name: s.review.at for s in sidecars if s.rejected})
    if not settings.review.enabled:
        return report
    waiting = waiting_sidecars(sidecars, packed)
    if not waiting:
        return report
    report.asked = [s.name for s in waiting]
    events.review_waiting(len(waiting))
    message = waiting_message(len(waiting))
    log.info("review: %s", message)
    stage_progress.notify(message)
    description = review_description(wd, waiting, packed, csvs, settings)
    question = Question(description, report.asked, message, max(1, round(settings.review.timeout_hours * 3600)))
    answer = ask(question)
    while answer is not None and (unknown := refused(answer, report.asked)):
        report.unknown = sorted(set(report.unknown) | set(unknown))
        why = (f"Not waiting for review: {', '.join(unknown)}. The answer was refused and nothing was approved "
               "or rejected; answer again with the names listed below.")
        log.warning("review: answer refused — %s", why)
        stage_progress.notify(f"review: answer refused — {why}")
        question = replace(question, description=f"**⚠ {md_cell(why)}**\n\n{description}",
                           message=f"answer refused (not waiting: {', '.join(unknown)[:200]}) — {message}")
        answer = ask(question)
    if answer is None:
        report.timed_out = True
        rejected, by = set(), "review timeout"
    else:
        rejected, by = set(answer.reject), "review"
        corrections = {c.file: c for c in answer.corrections if c.file not in rejected}
        for name in report.asked:
            if name in corrections:
                apply_correction(wd, name, corrections[name])
    report.corrected = edited_since(wd, sidecars)
    meanwhile = decided_while_waiting(wd, report.asked)
    if answer is None and settings.review.on_timeout == "hold":
        report.held = [name for name in report.asked if name not in meanwhile]
    for name in report.asked:
        if name in rejected:
            decision = "rejected"
        elif name in meanwhile:
            decision = meanwhile[name]  # recorded from the terminal while the run waited: it stands
        elif name in report.held:
            continue
        else:
            decision = "approved"
        if meanwhile.get(name) != decision:
            record_review(wd.sidecar(name), decision, by)
        (report.rejected if decision == "rejected" else report.approved).append(name)
    log.info(report.message())
    return report


def decided_while_waiting(wd: Workdir, asked: list[str]) -> dict[str, str]:
    """The assets of ``asked`` whose sidecar now holds a decision (made from the terminal while the run waited):
    name -> ``approved`` / ``rejected``."""
    now = {name: read_sidecar(wd.sidecar(name)) for name in asked}
    return {name: s.review.decision for name, s in now.items() if s is not None and s.review is not None}


def apply_correction(wd: Workdir, name: str, correction: Correction) -> Sidecar | None:
    """Write a corrected title, description and/or keywords into the asset's sidecar (the form's corrections and
    ``microstock review edit`` both come here); the sidecar written, None when there is none. A title or keywords
    written by the contributor end a hold for words made from the file name (``Metadata.from_file_name``)."""
    update = correction.model_dump(include={"title", "description", "keywords"}, exclude_none=True)
    if "title" in update or "keywords" in update:
        update["from_file_name"] = False
    return update_sidecar(wd.sidecar(name), lambda sidecar: sidecar.model_copy(
        update={"metadata": sidecar.metadata.model_copy(update=update)}))


def edited_since(wd: Workdir, before: list[Sidecar]) -> list[str]:
    """The assets of ``before`` whose metadata in their sidecar is no longer what it was."""
    return [s.name for s in before
            if (now := read_sidecar(wd.sidecar(s.name))) is not None and now.metadata != s.metadata]


# --- the terminal's side: `microstock review` -------------------------------------------------------


def review_overview(wd: Workdir) -> tuple[list[str], dict[str, str]]:
    """(assets waiting for a decision, rejected asset -> when), from the sidecars and the upload-ready files (of
    every kind: :meth:`~tasks.stages.kinds.AssetKind.ready_file`)."""
    sidecars = review_sidecars(wd)
    waiting = [s.name for s in sidecars if s.review is None and kind_of(s.name).ready_file(wd, s.name).is_file()]
    return waiting, {s.name: s.review.at for s in sidecars if s.rejected}


def not_described(wd: Workdir, names: list[str]) -> dict[str, list[str]]:
    """The names that are no described asset of the workdir (no image or clip in ``assets/``, or no sidecar for
    it), each with the described assets it is close to (a name typed slightly wrong: "did you mean …")."""
    known = [s.name for s in review_sidecars(wd)]
    return {name: difflib.get_close_matches(name, known, n=3, cutoff=0.8) for name in names if name not in known}


def already_sent(wd: Workdir, names: list[str]) -> dict[str, list[str]]:
    """The named assets the ledger records as uploaded: name -> the agencies it was sent to (a reject cannot
    unsend them)."""
    sidecars = {s.name: s for s in review_sidecars(wd) if s.name in names}
    if not sidecars or not wd.ledger.is_file():
        return {}
    state = Ledger(wd.ledger).read()
    sent = {name: [agency for agency in sorted(state.done) if state.is_done(agency, s.asset_id)]
            for name, s in sidecars.items()}
    return {name: agencies for name, agencies in sent.items() if agencies}


def decide(wd: Workdir, names: list[str], decision: Literal["approved", "rejected"] | None) -> None:
    """Record ``decision`` (None: reopen) in each named asset's sidecar."""
    for name in names:
        record_review(wd.sidecar(name), decision, "microstock review")


def edit_asset(wd: Workdir, settings: Settings, agencies: list[str],
               correction: Correction) -> tuple[Sidecar, list[RowResult]]:
    """``microstock review edit``: write the correction into the asset's sidecar, as the form's are, and check
    the asset's row at each of ``agencies`` by the rules the CSV stage applies (what a rule fixes, or why the
    asset is held back there; for a clip, the video rule or similarity hold the last run recorded comes
    first). The CSVs themselves are written by the run that sends the asset."""
    sidecar = apply_correction(wd, correction.file, correction)
    specs = catalog(wd)
    names = ProtectedNames.of(settings.keywords)
    rows = [build_row(specs.spec(a), sidecar.metadata, ready_name(sidecar.name), settings.agency(a).csv_defaults,
                      asset=sidecar.name, names=names) for a in agencies]
    held = {agency: found.not_taken[sidecar.name] for agency, found in read_where(wd).agencies.items()
            if sidecar.name in found.not_taken}
    return sidecar, [r if r.agency not in held else r.model_copy(update={"cells": None, "problems": (
        Problem(agency=r.agency, asset=r.asset, rule="video", message=held[r.agency]),)}) for r in rows]
