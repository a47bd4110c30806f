"""The day's request budget: counted in the workdir, per model, reset at midnight Pacific time."""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tasks.core.errors import StageStopped
from tasks.gemini.daybudget import DailyBudget, pacific_day

UTC = dt.timezone.utc


class Now:
    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


def test_the_day_is_googles_pacific_day():
    assert pacific_day(dt.datetime(2026, 11, 30, 7, 59, tzinfo=UTC)) == "2026-11-29"  # 23:59 PST
    assert pacific_day(dt.datetime(2026, 11, 30, 8, 0, tzinfo=UTC)) == "2026-11-30"  # midnight PST
    assert pacific_day(dt.datetime(2026, 7, 1, 7, 0, tzinfo=UTC)) == "2026-07-01"  # midnight PDT


def test_the_budget_stops_before_the_request_that_would_pass_it_and_resets_at_pacific_midnight(tmp_path):
    now = Now(dt.datetime(2026, 11, 30, 7, 0, tzinfo=UTC))
    budget = DailyBudget(tmp_path / "b.json", "m", 2, now=now)
    budget.take()
    DailyBudget(tmp_path / "b.json", "m", 2, now=now).take()  # another run, the same workdir
    with pytest.raises(StageStopped) as info:
        budget.take()
    assert info.value.error_class == "quota:daily" and "`gemini.requests_per_day = 2`" in info.value.message
    other = DailyBudget(tmp_path / "b.json", "other-model", 2, now=now)
    other.take()  # counted per model
    now.at = dt.datetime(2026, 11, 30, 8, 0, tzinfo=UTC)  # midnight in Los Angeles
    budget.take()
    assert json.loads((tmp_path / "b.json").read_text()) == {"day": "2026-11-30", "models": {"m": 1}}


def test_zero_means_no_limit_and_no_file(tmp_path):
    budget = DailyBudget(tmp_path / "b.json", "m", 0)
    for _ in range(50):
        budget.take()
    assert not (tmp_path / "b.json").exists()


def test_threads_never_take_more_than_the_budget(tmp_path):
    budget = DailyBudget(tmp_path / "b.json", "m", 25)

    def take(_):
        try:
            budget.take()
            return 1
        except StageStopped as exc:
            assert exc.error_class == "quota:daily"
            return 0

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(take, range(60))) == 25


def test_a_torn_file_starts_the_count_again(tmp_path):
    (tmp_path / "b.json").write_text('{"day": "2026-11-3')
    DailyBudget(tmp_path / "b.json", "m", 3).take()
    assert json.loads((tmp_path / "b.json").read_text())["models"] == {"m": 1}
