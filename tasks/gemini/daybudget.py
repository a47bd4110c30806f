"""The day's request budget per model, counted in the workdir across runs.

Google counts requests per day per project and model and resets the count
"at midnight Pacific time" (rate-limits page, docs/GEMINI.md). The free tier
allows as few as 20 a day, so rather than discovering the end by a 429 the
stage counts its own requests in ``<workdir>/gemini-requests.json`` and stops
before sending the one that would pass ``gemini.requests_per_day``.

The file is ``{"day": "2026-11-30", "models": {"<model>": <requests>}}``,
``day`` being the date in America/Los_Angeles; a file of another day counts
as empty. Several processes may share the workdir: each count is taken under
an exclusive ``flock`` on the file and written in place. Requests made
elsewhere with the same key (another workdir, AI Studio) are not seen: the
budget is a floor, not Google's counter.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import threading
from pathlib import Path
from typing import Callable
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from tasks.core.errors import StageStopped
from tasks.core.state_files import open_in_place, parse_in_place

#: Where Google's day ends.
PACIFIC = ZoneInfo("America/Los_Angeles")
FILE_NAME = "gemini-requests.json"


class DayCount(BaseModel):
    """The file: the Pacific day and each model's requests on it."""

    day: str = ""
    models: dict[str, int] = Field(default_factory=dict)


def pacific_day(now: dt.datetime | None = None) -> str:
    """Today's date in Pacific time, ISO format."""
    return (now or dt.datetime.now(dt.timezone.utc)).astimezone(PACIFIC).date().isoformat()


class DailyBudget:
    """At most ``per_day`` requests to ``model`` per Pacific day from this workdir (0: no limit)."""

    def __init__(self, path: Path, model: str, per_day: int,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self.path = path
        self.model = model
        self.per_day = per_day
        self._now = now
        self._lock = threading.Lock()

    def take(self) -> None:
        """Count one request, or raise StageStopped ``quota:daily`` (naming the setting) when the day's budget
        is spent, or (naming the file) when the count cannot be read and written."""
        if self.per_day == 0:
            return
        day = pacific_day(self._now())
        try:
            fd = open_in_place(self.path)
        except OSError as exc:  # read-only, say: uncounted requests could pass the day's limit
            raise StageStopped(f"{self.path} cannot be read and written ({exc.strerror or exc}): the day's Gemini "
                               "requests cannot be counted, so none is made — make it readable and writable by "
                               "you and run again", kind="quota", code="daily") from None
        with self._lock, open(fd, "r+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            # a torn or foreign file: its bytes kept aside, the day's count starts again
            kept = parse_in_place(self.path, fh.read() or b"{}", DayCount.model_validate_json,
                                  "the day's request count starts again") or DayCount()
            counts = kept.models if kept.day == day else {}
            used = counts.get(self.model, 0)
            if used >= self.per_day:
                raise StageStopped(f"{used} requests to {self.model} today (Pacific time) reach "
                                   f"`gemini.requests_per_day = {self.per_day}`: the rest waits for the next run "
                                   "after midnight Pacific (raise the setting if your project's limit is higher)",
                                   kind="quota", code="daily")
            counts[self.model] = used + 1
            fh.seek(0)
            fh.truncate()
            fh.write(DayCount(day=day, models=counts).model_dump_json().encode())
            fh.flush()
