"""Upload caps counted in the ledger (tasks/stages/upload_caps.py)."""

from __future__ import annotations

import datetime as dt

from tasks.agencies.spec import load_spec
from tasks.core.settings import AgencySettings, Settings
from tasks.stages.upload import upload_agency
from tasks.stages.upload_caps import next_window, sent_since, window_start
from tasks.stores.ledger import Ledger
from tests.stages.test_upload import ledger_names, make_items

THURSDAY = dt.datetime(2026, 12, 3, 6, 30, tzinfo=dt.UTC)


def test_windows_are_the_utc_day_the_week_from_monday_and_the_calendar_month():
    assert (window_start("day", THURSDAY), next_window("day", THURSDAY)) == (
        dt.datetime(2026, 12, 3, tzinfo=dt.UTC), dt.datetime(2026, 12, 4, tzinfo=dt.UTC))
    assert (window_start("week", THURSDAY), next_window("week", THURSDAY)) == (
        dt.datetime(2026, 11, 30, tzinfo=dt.UTC), dt.datetime(2026, 12, 7, tzinfo=dt.UTC))
    assert (window_start("month", THURSDAY), next_window("month", THURSDAY)) == (
        dt.datetime(2026, 12, 1, tzinfo=dt.UTC), dt.datetime(2027, 1, 1, tzinfo=dt.UTC))


def test_the_ledger_counts_what_was_sent_in_the_window_for_that_agency_only(workdir):
    ledger = Ledger(workdir.ledger)
    ledger.record("adobe", "new.jpg", "a" * 64, "/new.jpg")  # stamped now
    ledger.record("dreamstime", "other.jpg", "b" * 64, "/other.jpg")
    with workdir.ledger.open("a", encoding="utf-8") as fh:  # last month's line, and one no reader can parse
        fh.write(f"2026-11-02T10:00:00Z\tadobe\told.jpg\t{'c' * 64}\t/old.jpg\nnot a ledger line\n")
    now = dt.datetime.now(dt.UTC)
    assert sent_since(workdir.ledger, "adobe", window_start("day", now)) == 1
    assert sent_since(workdir.ledger, "adobe", dt.datetime(2026, 11, 1, tzinfo=dt.UTC)) == 2


def test_a_run_sends_up_to_the_cap_in_name_order_and_the_rest_stay_pending_with_the_next_window(workdir):
    items = make_items(workdir, 5, size=1000)
    upload_agency(workdir, "adobe", items[:1])  # one sent earlier today: counted from the ledger
    capped = AgencySettings(upload_cap=3, upload_cap_per="day")
    report = upload_agency(workdir, "adobe", list(reversed(items[1:])), capped)
    assert report.uploaded == [items[1].name, items[2].name]  # 3 - 1 left, the first by name
    assert sorted(report.failed) == [items[3].name, items[4].name]
    tomorrow = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
    assert report.failed[items[4].name].startswith(f"cap reached — next window {tomorrow:%Y-%m-%d} (UTC): adobe "
                                                   "takes 3 a day (your setting); 1 sent since")
    assert ledger_names(workdir, "adobe") == [i.name for i in items[:3]]
    assert upload_agency(workdir, "adobe", items, capped).uploaded == []  # the cap holds on the next run too
    assert upload_agency(workdir, "adobe", items, AgencySettings()).uploaded == [i.name for i in items[3:]]


def test_no_shipped_agency_states_a_cap_and_the_setting_is_checked():
    assert all(load_spec(a).uploads.cap is None for a in ("adobe", "freepik", "shutterstock", "vecteezy"))
    assert Settings.model_validate({"agencies": {"adobe": {"upload_cap": 50, "upload_cap_per": "week"}}}).agency(
        "adobe").upload_cap == 50
