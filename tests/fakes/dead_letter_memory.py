"""The dead-letter store in memory: the same contract as SQLite and PostgreSQL, for tests.

It lets the stages' tests park and replay without a file, and the store's
contract tests run on it as on the real backends
(``tests/stores/test_dead_letter.py``). It is thread-safe, not shared between
processes, and lost when the process ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from tasks.core.secrets import redact
from tasks.stores.dead_letter import CLAIM_TIMEOUT_S, DeadLetterStore, ParkedJob, Summary


class MemoryDeadLetterStore(DeadLetterStore):
    """Every job in a dict, behind one lock; ``clock`` gives the time in Unix seconds."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._jobs: dict[str, ParkedJob] = {}
        self._lock = threading.Lock()
        self.clock = clock

    def park(self, job_id, *, payload, model, error_class, error_message, attempts, asset_name="", task_run_id=None):
        now = int(self.clock())
        payload = json.loads(redact(json.dumps(payload, sort_keys=True, ensure_ascii=False)))
        with self._lock:
            old = self._jobs.get(job_id)
            job = ParkedJob(
                job_id=job_id, payload=payload, model=model, error_class=error_class,
                error_message=redact(error_message), attempts=attempts + (old.attempts if old else 0),
                first_seen=old.first_seen if old else now, last_seen=now, status="parked",
                asset_name=asset_name, task_run_id=task_run_id,
                claimed_by=old.claimed_by if old else None, claimed_at=old.claimed_at if old else None,
            )
            self._jobs[job_id] = job
            return job

    def get(self, job_id):
        with self._lock:
            return self._jobs.get(job_id)

    def _matching(self, status, error_class) -> list[ParkedJob]:
        jobs = [j for j in self._jobs.values()
                if (status is None or j.status == status)
                and (not error_class or j.error_class.startswith(error_class))]
        return sorted(jobs, key=lambda j: (j.last_seen, j.job_id))

    def list(self, *, status=None, error_class=None, limit=None):
        with self._lock:
            return self._matching(status, error_class)[:limit]

    def claim(self, claimant, *, limit, error_class=None):
        now = int(self.clock())
        with self._lock:
            free = [j for j in self._matching("parked", error_class)
                    if j.claimed_by is None or (j.claimed_at or 0) < now - CLAIM_TIMEOUT_S][:limit]
            for job in free:
                self._jobs[job.job_id] = replace(job, claimed_by=claimant, claimed_at=now)
            return [self._jobs[j.job_id] for j in free]

    def _update(self, job_id: str, claimant: str, **changes) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.claimed_by != claimant:
                return False
            self._jobs[job_id] = replace(job, claimed_by=None, claimed_at=None, **changes)
            return True

    def mark_recovered(self, job_id, claimant):
        return self._update(job_id, claimant, status="recovered", last_seen=int(self.clock()))

    def release(self, job_id, claimant, *, error_message=None):
        if error_message is None:
            return self._update(job_id, claimant)
        return self._update(job_id, claimant, error_message=redact(error_message), last_seen=int(self.clock()))

    def summary(self):
        with self._lock:
            parked = [j for j in self._jobs.values() if j.status == "parked"]
        counts: dict[str, int] = {}
        for job in parked:
            counts[job.error_class] = counts.get(job.error_class, 0) + 1
        by_class = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return Summary(by_class=by_class, oldest_first_seen=min((j.first_seen for j in parked), default=None))
