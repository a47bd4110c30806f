"""The review step's parts that need no paused run: what is waiting, the form's description, what an answer (or
none in time) decides, and what a decision does to the CSVs, the ZIP and the uploads (the pause itself, its form
and the time-out in a real run: tests/orchestration/test_server.py)."""

from __future__ import annotations

import base64
import csv
from io import BytesIO

import pytest
from PIL import Image

from tasks.core.records import Asset, Metadata, described_sidecars, read_sidecar, record_review, write_sidecar
from tasks.core.reports import CsvReport, PackReport
from tasks.core.settings import ReviewSettings, Settings
from tasks.observe.events import REVIEW_WAITING, MemoryEvents
from tasks.stages.csv import write_agency_csvs
from tasks.stages.review import Correction, ReviewReport, review_decisions, review_description, waiting_sidecars
from tasks.stores.pending import uploadable

NAMES = ["alps.jpg", "bay.jpg", "cove.jpg"]


def described(wd) -> PackReport:
    """Three described assets with upload-ready files; returns the pack report that made them."""
    ready = {}
    for i, name in enumerate(NAMES):
        (wd.assets / name).write_bytes(f"image {i}".encode())
        metadata = Metadata(title=f"Quiet {name[:-4]} at dawn", description=f"A quiet {name[:-4]} at dawn.",
                            keywords=[name[:-4], "dawn", "quiet", "landscape", "nature", "travel", "light", "sky",
                                      "morning", "scenic"], adobe_category=11, category_hints=["landscape"])
        wd.sidecar(name).unlink(missing_ok=True)  # described from scratch: a decision for this content would stay
        write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=str(i) * 64, path=wd.assets / name), metadata)
        (wd.packs / "ready").mkdir(parents=True, exist_ok=True)
        ready[name] = wd.packs / "ready" / name
        ready[name].write_bytes(b"jpeg")
    return PackReport(ready=ready, asset_ids={name: str(i) * 64 for i, name in enumerate(NAMES)},
                      thumbnails={name: wd.packs / "thumbs" / name for name in NAMES})


def adobe_files(wd) -> list[str]:
    return [row["Filename"] for row in csv.DictReader((wd.csv / "adobe.csv").read_text(encoding="utf-8").splitlines())]


def test_a_sidecar_records_the_decision_and_decided_assets_are_not_asked_again(workdir):
    packed = described(workdir)
    assert [s.name for s in waiting_sidecars(described_sidecars(workdir), packed)] == NAMES
    record_review(workdir.sidecar("bay.jpg"), "rejected")
    record_review(workdir.sidecar("cove.jpg"), "approved", "review timeout")
    bay, cove = read_sidecar(workdir.sidecar("bay.jpg")), read_sidecar(workdir.sidecar("cove.jpg"))
    assert (bay.review.decision, bay.review.by, bay.rejected) == ("rejected", "review", True)
    assert (cove.review.decision, cove.review.by, cove.rejected) == ("approved", "review timeout", False)
    assert bay.review.at.endswith("+00:00")
    assert [s.name for s in waiting_sidecars(described_sidecars(workdir), packed)] == ["alps.jpg"]
    packed.rejected["alps.jpg"] = "too small for every agency"
    assert waiting_sidecars(described_sidecars(workdir), packed) == [], "what pack rejected is not asked about"


def test_a_new_sidecar_has_no_review_field(workdir):
    described(workdir)
    assert '"review"' not in workdir.sidecar("alps.jpg").read_text(encoding="utf-8")


def test_rejected_assets_get_no_csv_row_and_are_not_uploadable_waiting_ones_no_row(workdir):
    described(workdir)
    record_review(workdir.sidecar("bay.jpg"), "rejected")
    packed = described(workdir)
    record_review(workdir.sidecar("bay.jpg"), "rejected")
    report = write_agency_csvs(workdir, ["adobe"], waiting=["cove.jpg"])
    assert adobe_files(workdir) == ["alps.jpg"]
    assert {(p.asset, p.rule, p.message.split(" (")[0]) for p in report.problems} == {
        ("bay.jpg", "review", "rejected in review"), ("cove.jpg", "review", "waiting for review")}
    assert [item.name for item in uploadable(packed, report, ["adobe"])["adobe"]] == ["alps.jpg"]
    report = write_agency_csvs(workdir, ["adobe"])  # the answer came: cove approved; bay stays out for good
    assert adobe_files(workdir) == ["alps.jpg", "cove.jpg"]
    assert [item.name for item in uploadable(packed, report, ["adobe"])["adobe"]] == ["alps.jpg", "cove.jpg"]


def test_the_form_lists_each_waiting_asset_and_where_it_goes(workdir):
    packed = described(workdir)
    report = write_agency_csvs(workdir, ["adobe", "dreamstime"], left_out={"dreamstime": {"bay.jpg": "under 3 MP"}})
    waiting = waiting_sidecars(described_sidecars(workdir), packed)
    (workdir.packs / "thumbs").mkdir(parents=True)
    Image.new("RGB", (400, 300), "teal").save(workdir.packs / "thumbs" / "alps.jpg")
    text = review_description(workdir, waiting, packed, report, Settings())
    assert "3 asset(s) waiting for review" in text
    assert " `alps.jpg` — **Quiet alps at dawn**<br>keywords: alps, dawn, quiet, landscape, nature, travel" \
           "<br>categories: Adobe 11, landscape<br>goes: adobe: sent; dreamstime: sent" in text
    assert "- `bay.jpg` — **" in text and "<br>goes: adobe: sent; dreamstime: held back: under 3 MP" in text
    assert "|---" not in text, "no table: its cells do not wrap in the UI's narrow form"
    assert "Without an answer within 24 h: nothing of this is sent" in text
    alps_row = next(line for line in text.splitlines() if "`alps.jpg`" in line)
    uri = alps_row.split("(data:image/jpeg;base64,")[1].split(")")[0]
    with Image.open(BytesIO(base64.b64decode(uri))) as thumb:
        assert thumb.size == (80, 60), "a small inline thumbnail of the packed one"
    assert next(line for line in text.splitlines() if "`bay.jpg`" in line).startswith("- `bay"), "no thumbnail file"
    approve = review_description(workdir, waiting, packed, report,
                                 Settings(review=ReviewSettings(on_timeout="approve", timeout_hours=2)))
    assert "Without an answer within 2 h: everything above is approved and sent." in approve


def test_rejected_and_held_assets_are_left_out_of_the_zip(workdir):
    described(workdir)
    record_review(workdir.sidecar("alps.jpg"), "rejected")
    record_review(workdir.sidecar("bay.jpg"), "rejected")
    csvs = write_agency_csvs(workdir, ["adobe", "dreamstime"])  # rejected in review: no row at any agency
    assert csvs.accepted_somewhere() == {"cove.jpg"}  # what the ZIP holds (finish_batch)
    held = write_agency_csvs(workdir, ["adobe", "dreamstime"], waiting=["cove.jpg"])  # still waiting: no row
    assert held.accepted_somewhere() == set()

    report = ReviewReport(asked=NAMES[1:], rejected=["bay.jpg"], held=[], approved=["cove.jpg"],
                          rejected_before={"alps.jpg": "2026-11-29T02:00:00+00:00"})
    assert report.cells() == {"alps.jpg": "rejected in review (2026-11-29T02:00:00+00:00)",
                              "bay.jpg": "rejected in review"}
    assert report.message() == "review: 2 asked · 1 approved · 1 rejected"


def microstock(wd, *args: str) -> str:
    """``microstock review …`` in its own process, with no Prefect server (decisions go to the sidecars).
    (``edit``, and a name that is no asset: tests/flows/test_cli_review.py.)"""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "MICROSTOCK_"))}
    result = subprocess.run([sys.executable, "-c", "from flows.cli import main; main()", "review", *args,
                             "--workdir", str(wd.root)], env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_terminal_lists_rejects_approves_and_reopens_for_the_next_run(workdir):
    described(workdir)
    assert microstock(workdir, "list").splitlines() == [
        f"waiting\t{n}\tQuiet {n[:-4]} at dawn\theld back nowhere\t0 keywords removed by your rules" for n in NAMES]
    assert "rejected 1 asset(s)" in microstock(workdir, "reject", "bay.jpg")
    assert "approved 1 asset(s)" in microstock(workdir, "approve", "cove.jpg")
    listed = microstock(workdir, "list").splitlines()
    assert listed[0].startswith("waiting\talps.jpg\t") and len(listed) == 2
    assert listed[1].startswith("rejected\tbay.jpg\tQuiet bay at dawn\t") and listed[1].split("\t")[-1].startswith("2")
    bay = read_sidecar(workdir.sidecar("bay.jpg"))
    assert (bay.review.decision, bay.review.by) == ("rejected", "microstock review")
    write_agency_csvs(workdir, ["adobe"])
    assert adobe_files(workdir) == ["alps.jpg", "cove.jpg"]
    assert "reopened 1 asset(s)" in microstock(workdir, "reopen", "bay.jpg")
    assert read_sidecar(workdir.sidecar("bay.jpg")).review is None
    assert "approved 2 asset(s)" in microstock(workdir, "approve"), "no names: everything waiting"
    assert "nothing waiting for review" in microstock(workdir, "list")


def test_the_terminal_list_says_per_asset_its_title_where_it_is_held_back_and_what_the_rules_removed(workdir):
    from tasks.core.records import update_sidecar
    from tasks.stages.review_list import review_list_lines

    described(workdir)
    update_sidecar(workdir.sidecar("bay.jpg"), lambda s: s.model_copy(update={"metadata": s.metadata.model_copy(
        update={"title": "Bay\x1b[2J at dawn", "removed_keywords": {"nike": "protected name 'Nike' (brand)",
                                                                      "stock": "excluded"}})}))
    write_agency_csvs(workdir, ["adobe", "dreamstime"], left_out={"dreamstime": {"bay.jpg": "under 3 MP"}},
                      waiting=NAMES)
    lines = dict(line.split("\t", 2)[1:] for line in review_list_lines(workdir))
    assert lines["bay.jpg"] == ("Bay\\x1b[2J at dawn\theld back: dreamstime (under 3 MP)\t"
                                "2 keywords removed by your rules")  # the review itself is the first column
    assert lines["alps.jpg"] == "Quiet alps at dawn\theld back nowhere\t0 keywords removed by your rules"


class Answered:
    """An ``ask`` that answers at once (None: no answer in time), and remembers what it was asked."""

    def __init__(self, reject=(), corrections=(), timed_out: bool = False) -> None:
        self.reject, self.corrections, self.timed_out = list(reject), list(corrections), timed_out
        self.asked: list[tuple[str, int]] = []
        self.questions = []

    def __call__(self, question):
        self.asked.append((question.description, question.timeout_s))
        self.questions.append(question)
        return None if self.timed_out else self


class AnsweredInTurn:
    """An ``ask`` that gives its answers one after the other, keeping each question."""

    def __init__(self, *answers: Answered) -> None:
        self.answers, self.questions = list(answers), []

    def __call__(self, question):
        self.questions.append(question)
        return self.answers.pop(0)(question)


def review_on(**review) -> Settings:
    return Settings(review=ReviewSettings(enabled=True, **review))


@pytest.fixture
def waiting_events() -> MemoryEvents:
    """Where the step's ``microstock.review.waiting`` events go: kept, not sent to any server."""
    return MemoryEvents()


def waiting_counts(events: MemoryEvents) -> list[int]:
    """The counts of the ``microstock.review.waiting`` events kept in ``events``."""
    return [e.payload["waiting"] for e in events.sent if e.event == REVIEW_WAITING]


def test_the_answer_rejects_the_named_approves_the_rest_and_corrects_before_the_decision(workdir, waiting_events):
    packed = described(workdir)
    ask = Answered(reject=["bay.jpg"],
                   corrections=[Correction(file="cove.jpg", title="Cove in the morning"),
                                Correction(file="bay.jpg", title="ignored: rejected")])
    report = review_decisions(workdir, review_on(timeout_hours=2), packed, CsvReport(), ask, waiting_events)
    (description, timeout_s), = ask.asked
    assert "3 asset(s) waiting for review" in description and timeout_s == 7200
    (question,) = ask.questions
    assert question.waiting == NAMES, "the form offers exactly the waiting names"
    assert question.message.startswith("3 asset(s) waiting for review — answer in the Prefect UI")
    assert (report.asked, report.approved, report.rejected) == (NAMES, ["alps.jpg", "cove.jpg"], ["bay.jpg"])
    assert report.unknown == [] and report.corrected == ["cove.jpg"] and not report.timed_out
    cove = read_sidecar(workdir.sidecar("cove.jpg"))
    assert cove.metadata.title == "Cove in the morning"
    assert (cove.review.decision, cove.review.by) == ("approved", "review")
    assert read_sidecar(workdir.sidecar("bay.jpg")).metadata.title == "Quiet bay at dawn"
    again = review_decisions(workdir, review_on(), packed, CsvReport(), ask, waiting_events)
    assert again.asked == [], "decided: not asked again"
    assert len(ask.asked) == 1 and waiting_counts(waiting_events) == [3]


def test_no_answer_in_time_holds_everything_or_approves_it_as_configured(workdir, waiting_events):
    packed = described(workdir)
    held = review_decisions(workdir, review_on(), packed, CsvReport(), Answered(timed_out=True), waiting_events)
    assert held.timed_out and held.held == NAMES and held.approved == held.rejected == []
    assert all(read_sidecar(workdir.sidecar(n)).review is None for n in NAMES), "asked again next run"
    assert held.message() == "review: 3 asked · 0 approved · 0 rejected · no answer in time: 3 held for the next run"
    approved = review_decisions(workdir, review_on(on_timeout="approve"), packed, CsvReport(), Answered(timed_out=True),
                                waiting_events)
    assert approved.approved == NAMES and approved.held == []
    assert {read_sidecar(workdir.sidecar(n)).review.by for n in NAMES} == {"review timeout"}


def test_review_off_or_nothing_waiting_never_asks(workdir, waiting_events):
    packed = described(workdir)
    ask = Answered()
    assert review_decisions(workdir, Settings(), packed, CsvReport(), ask, waiting_events).asked == []
    record_review(workdir.sidecar("bay.jpg"), "rejected")
    off = review_decisions(workdir, Settings(), packed, CsvReport(), ask, waiting_events)
    assert list(off.rejected_before) == ["bay.jpg"], "rejections so far are reported even with review off"
    assert review_decisions(workdir, review_on(), PackReport(), CsvReport(), ask, waiting_events).asked == []
    assert ask.asked == [] and waiting_counts(waiting_events) == []


def test_an_answer_naming_what_is_not_waiting_is_refused_and_asked_again_approving_nothing(workdir, waiting_events):
    """Regression (issue 26): a reject typed without ``.jpg`` was ignored and every asset approved and uploaded."""
    from tasks.observe import progress

    packed = described(workdir)
    said: list[str] = []
    progress.add_notice(said.append)
    ask = AnsweredInTurn(Answered(reject=["bay"]),
                         Answered(corrections=[Correction(file="cove", title="typo")]),
                         Answered(reject=["bay.jpg"]))
    try:
        report = review_decisions(workdir, review_on(), packed, CsvReport(), ask, waiting_events)
    finally:
        progress.remove_notice(said.append)
    first, second, third = ask.questions
    assert "Not waiting for review: bay. The answer was refused" in second.description
    assert second.message.startswith("answer refused (not waiting: bay) — 3 asset(s) waiting")
    assert "Not waiting for review: cove." in third.description
    assert first.waiting == second.waiting == third.waiting == NAMES
    assert (report.approved, report.rejected, report.unknown) == (["alps.jpg", "cove.jpg"], ["bay.jpg"],
                                                                   ["bay", "cove"])
    assert read_sidecar(workdir.sidecar("cove.jpg")).metadata.title != "typo"
    assert said[0].startswith("3 asset(s) waiting for review — answer in the Prefect UI")
    assert any("answer refused" in line for line in said)


def test_timing_out_after_a_refused_answer_approves_nothing_the_hold_way(workdir, waiting_events):
    packed = described(workdir)
    ask = AnsweredInTurn(Answered(reject=["nope.jpg"]), Answered(timed_out=True))
    report = review_decisions(workdir, review_on(), packed, CsvReport(), ask, waiting_events)
    assert report.timed_out and report.held == NAMES and report.approved == []
    assert all(read_sidecar(workdir.sidecar(n)).review is None for n in NAMES)


class DecidedFromTheTerminal(Answered):
    """An ``ask`` during which the contributor decides some assets from the terminal (``microstock review approve
    / reject NAME…`` write the sidecar at once), then the form is answered (or not, in time)."""

    def __init__(self, wd, decisions: dict[str, str], **answer) -> None:
        super().__init__(**answer)
        self.wd, self.decisions = wd, decisions

    def __call__(self, question):
        for name, decision in self.decisions.items():
            record_review(self.wd.sidecar(name), decision, "microstock review")
        return super().__call__(question)


def test_a_decision_made_from_the_terminal_while_the_run_waits_stands(workdir, waiting_events):
    """Regression (issue 35): ``review reject c`` after ``review approve a b`` approved every other asset, including
    ones nobody decided; and the form's "every other asset is approved" overrode a reject from the terminal."""
    packed = described(workdir)
    ask = DecidedFromTheTerminal(workdir, {"bay.jpg": "rejected"})  # then the form: nothing picked in reject
    report = review_decisions(workdir, review_on(), packed, CsvReport(), ask, waiting_events)
    assert (report.approved, report.rejected) == (["alps.jpg", "cove.jpg"], ["bay.jpg"])
    bay = read_sidecar(workdir.sidecar("bay.jpg")).review
    assert (bay.decision, bay.by) == ("rejected", "microstock review"), "the terminal's reject is kept as made"


def test_a_time_out_holds_only_what_nobody_decided_meanwhile(workdir, waiting_events):
    packed = described(workdir)
    ask = DecidedFromTheTerminal(workdir, {"cove.jpg": "approved"}, timed_out=True)
    report = review_decisions(workdir, review_on(), packed, CsvReport(), ask, waiting_events)
    assert report.held == ["alps.jpg", "bay.jpg"] and report.approved == ["cove.jpg"]
    assert read_sidecar(workdir.sidecar("alps.jpg")).review is None, "asked again next run"
    rejected = described(workdir)  # fresh sidecars: nothing decided
    ask = DecidedFromTheTerminal(workdir, {"alps.jpg": "rejected"}, timed_out=True)
    report = review_decisions(workdir, review_on(on_timeout="approve"), rejected, CsvReport(), ask, waiting_events)
    assert (report.approved, report.rejected) == (["bay.jpg", "cove.jpg"], ["alps.jpg"]), \
        "a time-out that approves leaves the terminal's reject alone"


def test_the_form_shows_the_keywords_the_rules_removed_and_why(workdir):
    packed = described(workdir)
    sidecar = read_sidecar(workdir.sidecar("bay.jpg"))
    removed = {"nike": "protected name 'Nike' (brand)", "mickey mouse": "protected name 'Mickey Mouse' (character)"}
    write_sidecar(workdir.sidecar("bay.jpg"), Asset(name="bay.jpg", asset_id=sidecar.asset_id,
                                                    path=workdir.assets / "bay.jpg"),
                  sidecar.metadata.model_copy(update={"removed_keywords": removed}))
    report = write_agency_csvs(workdir, ["adobe"])
    text = review_description(workdir, waiting_sidecars(described_sidecars(workdir), packed), packed, report,
                              Settings())
    bay = next(line for line in text.splitlines() if "`bay.jpg`" in line)
    assert ("<br>removed keywords: nike: protected name 'Nike' (brand); "
            "mickey mouse: protected name 'Mickey Mouse' (character)") in bay
    assert "removed keywords" not in next(line for line in text.splitlines() if "`alps.jpg`" in line)
