"""The seed's Gemini step, as its design document wrote it: the baseline that benchmark 1 compares against.

Transcribed from the project's design document (in Japanese, not part of this repository; comments
translated): ``classify_failure``, ``ApiError``, ``run_with_dead_letter``
(retry with capped backoff, park permanent or exhausted jobs in SQLite) and
``park``, whose body the document leaves out and which is written here from
its table (``dead_letter`` with the columns INTERFACE.md keeps). The seed
runs one job after another; :func:`run_jobs` does exactly that.

Only ``call_model`` is new: the seed says ``call_model(payload) -> dict``,
raising ``ApiError``; :func:`gemini_call_model` makes that call with the
real google-genai SDK, sending the same image and prompt as the project's
describer, so the two sides of the benchmark do the same work per call.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
PERMANENT_STATUS = {400, 403, 404, 422}


def classify_failure(status_code: int, message: str) -> str:
    """Classify a failure as 'retryable' / 'permanent' / 'unknown'."""
    text = (message or "").upper()

    # A failure caused by the input itself gives the same result however often it is sent.
    if status_code in PERMANENT_STATUS:
        return "permanent"
    if "INVALID_ARGUMENT" in text or "FAILED_PRECONDITION" in text:
        return "permanent"
    if "SAFETY" in text or "BLOCKED" in text:
        return "permanent"

    # Temporary load or network trouble may pass with time.
    if status_code in RETRYABLE_STATUS:
        return "retryable"
    if "DEADLINE_EXCEEDED" in text or "UNAVAILABLE" in text:
        return "retryable"

    return "unknown"


class ApiError(Exception):
    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code
        self.message = message


DLQ_PATH = "dead_letter.db"


def park(job_id: str, payload: dict, model: str, *, error_class: str, error_message: str, attempts: int,
         path: str = DLQ_PATH) -> None:
    """Put a job in the dead-letter table (upsert: a job parked again keeps first_seen)."""
    now = time.time()
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE IF NOT EXISTS dead_letter (job_id TEXT PRIMARY KEY, payload_json TEXT, model TEXT, "
        "error_class TEXT, error_message TEXT, attempts INTEGER, first_seen REAL, last_seen REAL, status TEXT)")
    con.execute(
        "INSERT INTO dead_letter VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'parked') ON CONFLICT(job_id) DO UPDATE SET "
        "error_class = excluded.error_class, error_message = excluded.error_message, attempts = excluded.attempts, "
        "last_seen = excluded.last_seen, status = 'parked'",
        (job_id, json.dumps(payload), model, error_class, error_message, attempts, now, now))
    con.commit()
    con.close()


def run_with_dead_letter(job_id: str, payload: dict, model: str,
                         call_model, max_attempts: int = 4, dlq_path: str = DLQ_PATH):
    """Retry the model call; park permanent failures and jobs whose attempts ran out.

    Calls call_model(payload) -> dict, which raises ApiError on failure.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return call_model(payload)
        except ApiError as exc:
            kind = classify_failure(exc.status_code, exc.message)

            if kind == "permanent":
                park(job_id, payload, model,
                     error_class="permanent:%d" % exc.status_code,
                     error_message=exc.message, attempts=attempt, path=dlq_path)
                return None

            if attempt >= max_attempts:
                park(job_id, payload, model,
                     error_class="exhausted:%d" % exc.status_code,
                     error_message=exc.message, attempts=attempt, path=dlq_path)
                return None

            # retryable / unknown: a modest backoff to see whether it passes.
            backoff = min(2 ** attempt, 30) + random.uniform(0, 1)
            time.sleep(backoff)


def gemini_call_model(model: str, api_key: str, timeout_s: float = 60) -> Callable[[dict], dict]:
    """The seed's ``call_model`` with the real SDK: payload ``{"path": ...}`` in, the answer's JSON out."""
    from google.genai import errors, types

    from tasks.core.records import Asset
    from tasks.core.settings import GeminiSettings
    from tasks.gemini.client import gemini_client
    from tasks.gemini.describer import describe_prompt, image_for_model

    client = gemini_client(GeminiSettings(model=model, timeout_s=timeout_s), api_key)
    prompt = describe_prompt("en")
    config = types.GenerateContentConfig(response_mime_type="application/json")

    def call_model(payload: dict) -> dict:
        path = Path(payload["path"])
        image = image_for_model(Asset(name=path.name, asset_id=payload["job_id"], path=path))
        try:
            response = client.models.generate_content(
                model=model, contents=[types.Part.from_bytes(data=image, mime_type="image/jpeg"), prompt],
                config=config)
        except errors.APIError as exc:
            raise ApiError(int(exc.code or 0), str(exc.message or exc.status or "")) from None
        return json.loads(response.text)

    call_model.client = client  # type: ignore[attr-defined]  # keep the client alive: a collected one closes
    return call_model


def run_jobs(jobs: list[dict[str, Any]], model: str, call_model, dlq_path: str) -> list[dict | None]:
    """The seed's loop: one job after another through ``run_with_dead_letter``."""
    return [run_with_dead_letter(job["job_id"], job, model, call_model, dlq_path=dlq_path) for job in jobs]
