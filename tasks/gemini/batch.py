"""Gemini Batch mode at the boundary: the describe requests of sync mode, sent as batch jobs at half the price.

Google: "The Gemini Batch API is designed to process large volumes of
requests asynchronously at 50% of the standard cost. The target turnaround
time is 24 hours, but in majority of cases, it is much quicker." Inline
requests suit batches "that keep the total request size under 20MB"
(ai.google.dev/gemini-api/docs/batch-api, read 2026-11-30; docs/GEMINI.md
"Batch mode" has the rest and what could not be confirmed).

The interface the describe stage uses (:class:`GeminiBatches`):

* ``request(asset)`` — one ``types.InlinedRequest``: the same downscaled
  image, prompt, response schema, thinking setting and output budget as
  :class:`~tasks.gemini.describer.GeminiDescriber` sends (the same functions
  build them), with ``metadata = {"asset_id", "asset"}``. BadInput when the
  image cannot be read (nothing to send); StageStopped ``model`` for a
  model without structured output.
* ``size_of(request)`` / ``split(requests)`` — jobs whose requests add up to
  at most :data:`JOB_BUDGET_BYTES` (the 20 MB limit less a 10 % margin).
* ``submit(requests, display_name)`` → :class:`BatchJob` (``client.batches.create``).
* ``get(name)`` → :class:`BatchJob`; a SUCCEEDED job carries one
  :class:`BatchAnswer` per request the service answered. A job Gemini no
  longer knows (404) comes back with state ``missing`` (ended, no answers).
* ``jobs(prefix)`` — every job whose display name starts with ``prefix``
  (the Developer API has no server-side filter: all are listed, filtered
  here), without answers.
* ``cancel(name)`` — BatchJobEnded ``batch:missing`` for a job Gemini does not know.

Answers and errors are sync mode's: an answer goes through the same
:func:`~tasks.gemini.describer.parse_answer` (and so
:func:`~tasks.gemini.client.check_answer`) into the same
:class:`~tasks.core.records.Metadata` (describer ``gemini-batch:<model>``,
``usage`` and ``cost_usd`` at the batch price, None when no batch price is
confirmed); a per-request error (a ``google.rpc.Status``) becomes the class a
sync call answered with that status gets
(:func:`~tasks.gemini.client.error_of_status`). Batch mode asks once: an
answer cut at the output budget is ``truncated:<REASON>`` (a
:class:`~tasks.core.errors.PermanentError`), as sync mode classes a cut on
its last try; what sync mode would retry (InvalidOutput, 5xx) is reported as
it is, for the caller to resubmit or park. A job that ended without answers
(expired, cancelled, failed, missing) gives :meth:`BatchJob.failure`, a
:class:`~tasks.core.errors.BatchJobEnded` (``batch:<state>``).

Answers are matched to assets by the request's metadata only: reports say
the service has returned inline responses out of request order
(googleapis/python-genai#1909, open) and without their metadata (#2008,
open). An answer without ``asset_id`` metadata is counted in
:attr:`BatchJob.unmatched` and given to no asset (its asset has no answer:
the caller treats it as unanswered), never guessed from its position.

Every SDK failure leaves as a :mod:`tasks.core.errors` class through
:func:`~tasks.gemini.client.map_gemini_errors`; messages never hold the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Iterable

from tasks.core.errors import BatchJobEnded, InvalidOutput, MicrostockError, OutputTruncated, PermanentError
from tasks.core.records import Asset, Metadata, Usage
from tasks.core.settings import GeminiSettings
from tasks.gemini.client import Target, error_of_status, gemini_client, map_gemini_errors, usage_of
from tasks.gemini.describer import (
    StockAnswer,
    check_describe_model,
    describe_config,
    describe_contents,
    describe_prompt,
    parse_answer,
    to_metadata,
)

if TYPE_CHECKING:  # the SDK is imported where a job is asked for, not by an offline run (BatchJob is plain)
    from google.genai import errors, types

#: Google: inline requests "under 20MB" in total (ai.google.dev/gemini-api/docs/batch-api; docs/GEMINI.md).
INLINE_LIMIT_BYTES = 20 * 1024 * 1024
#: What one job's requests may add up to by :meth:`GeminiBatches.size_of`: 10 % of the limit is left for the
#: envelope (display name, JSON framing) and for the difference between that measure and the SDK's encoding.
JOB_BUDGET_BYTES = INLINE_LIMIT_BYTES * 9 // 10
#: Added to each request's measure for what the SDK's encoding adds (its JSON has a space after each separator:
#: about 300 bytes a describe request, measured against the test server).
_FRAMING_BYTES = 1024
#: Jobs asked for per list page.
PAGE_SIZE = 100
_STATES = {"JOB_STATE_PENDING": "pending", "JOB_STATE_RUNNING": "running", "JOB_STATE_SUCCEEDED": "succeeded",
           "JOB_STATE_FAILED": "failed", "JOB_STATE_CANCELLED": "cancelled", "JOB_STATE_EXPIRED": "expired"}
_ENDED = frozenset({"succeeded", "failed", "cancelled", "expired", "missing"})
_NAME = re.compile(r"^batches/[^/]+$")


@dataclass(frozen=True)
class BatchAnswer:
    """What the job answered for one asset: metadata, or the error a sync call would have raised."""

    asset_id: str
    metadata: Metadata | None
    error: MicrostockError | None
    #: Tokens of the answer (also of a failed one: they are billed), zeros when it carries none.
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class BatchJob:
    """A batch job as Gemini reports it."""

    name: str
    display_name: str
    #: ``pending``, ``running``, ``succeeded``, ``failed``, ``cancelled``, ``expired``; ``missing`` when Gemini
    #: no longer knows the job; ``unknown`` for a state this code does not know.
    state: str
    created: datetime | None
    done: bool
    answers: tuple[BatchAnswer, ...] = ()
    #: Answers that came without the request's ``asset_id`` metadata (given to no asset).
    unmatched: int = 0

    def failure(self) -> BatchJobEnded | None:
        """The error of a job that ended without answers (``batch:<state>``); None otherwise."""
        if not self.done or self.state == "succeeded":
            return None
        return BatchJobEnded(f"Gemini batch job {self.name} ({self.display_name or 'no name'}) ended {self.state} "
                             "without answers", state=self.state)


class GeminiBatches:
    """Describe requests as Gemini batch jobs (see the module docstring for the contract)."""

    def __init__(self, settings: GeminiSettings, api_key: str, avoid: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.model = settings.model
        self.name = f"gemini-batch:{settings.model}"
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._target = Target("gemini.model", settings.model, "describe", settings.api_version)
        self._config = describe_config(settings, settings.max_output_tokens)
        self._prompt = describe_prompt(settings.language, avoid)
        # The config as JSON, its schema written out (the SDK sends the schema, not the class).
        as_sent = self._config.model_copy(update={"response_schema": None,
                                                  "response_json_schema": StockAnswer.model_json_schema()})
        self._config_bytes = len(as_sent.model_dump_json(exclude_none=True))

    def __repr__(self) -> str:  # never show the key
        return f"GeminiBatches(model={self.model!r})"

    # --- requests -------------------------------------------------------------------------

    def request(self, asset: Asset) -> types.InlinedRequest:
        from google.genai import types

        check_describe_model(self.model)
        return types.InlinedRequest(contents=describe_contents(asset, self._prompt), config=self._config,
                                    metadata={"asset_id": asset.asset_id, "asset": asset.name})

    def size_of(self, request: types.InlinedRequest) -> int:
        """Bytes ``request`` adds to a create body (image as base64, prompt, config, metadata)."""
        bare = request.model_copy(update={"config": None}).model_dump_json(exclude_none=True)
        return len(bare) + self._config_bytes + _FRAMING_BYTES

    def split(self, requests: Iterable[types.InlinedRequest]) -> list[list[types.InlinedRequest]]:
        """``requests`` in order, cut into jobs of at most :data:`JOB_BUDGET_BYTES` each."""
        jobs: list[list[types.InlinedRequest]] = []
        room = 0
        for request in requests:
            size = self.size_of(request)
            if not jobs or size > room:
                jobs.append([])
                room = JOB_BUDGET_BYTES
            jobs[-1].append(request)
            room -= size
        return jobs

    # --- jobs -----------------------------------------------------------------------------

    def submit(self, requests: list[types.InlinedRequest], display_name: str) -> BatchJob:
        """One job of ``requests`` named ``display_name`` (keep it within :data:`JOB_BUDGET_BYTES`: :meth:`split`)."""
        with map_gemini_errors(self._target, self._api_key):
            job = self._client.batches.create(model=self.model, src=requests, config={"display_name": display_name})
        return self._job(job)

    def get(self, name: str) -> BatchJob:
        from google.genai import errors

        self._check_name(name)
        with map_gemini_errors(self._target, self._api_key):
            try:
                job = self._client.batches.get(name=name)
            except errors.APIError as exc:
                if not _entity_missing(exc):
                    raise
                return BatchJob(name, "", "missing", None, True)
        return self._job(job, with_answers=True)

    def jobs(self, prefix: str) -> list[BatchJob]:
        """Every job whose display name starts with ``prefix``, newest first as Gemini lists them, no answers."""
        with map_gemini_errors(self._target, self._api_key):
            listed = [job for job in self._client.batches.list(config={"page_size": PAGE_SIZE})
                      if (job.display_name or "").startswith(prefix)]
        return [self._job(job) for job in listed]

    def cancel(self, name: str) -> None:
        """Ask Gemini to cancel the job (a job already ended stays as it ended)."""
        from google.genai import errors

        self._check_name(name)
        with map_gemini_errors(self._target, self._api_key):
            try:
                self._client.batches.cancel(name=name)
            except errors.APIError as exc:
                if not _entity_missing(exc):
                    raise
                raise BatchJobEnded(f"Gemini knows no batch job {name}", state="missing") from None

    # --- reading ----------------------------------------------------------------------------

    @staticmethod
    def _check_name(name: str) -> None:
        if not _NAME.match(name):
            raise BatchJobEnded(f"{name!r} is not a Gemini batch job name (batches/…)", state="missing")

    def _job(self, job: types.BatchJob, with_answers: bool = False) -> BatchJob:
        state_name = getattr(job.state, "name", None) or str(job.state or "")
        state = _STATES.get(state_name, "unknown")
        answers: list[BatchAnswer] = []
        unmatched = 0
        if with_answers and state == "succeeded" and job.dest is not None:
            settings = self.settings
            model = (job.model or "").removeprefix("models/")
            if model and model != settings.model:  # priced as the model that answered
                settings = settings.model_copy(update={"model": model})
            seen: set[str] = set()
            for item in job.dest.inlined_responses or []:
                asset_id = str((item.metadata or {}).get("asset_id") or "")
                if not asset_id or asset_id in seen:
                    unmatched += 1
                    continue
                seen.add(asset_id)
                answers.append(self._answer(asset_id, item, settings))
        return BatchJob(name=job.name or "", display_name=job.display_name or "", state=state,
                        created=job.create_time, done=state in _ENDED, answers=tuple(answers), unmatched=unmatched)

    def _answer(self, asset_id: str, item: types.InlinedResponse, settings: GeminiSettings) -> BatchAnswer:
        if item.error is not None:
            err = item.error
            return BatchAnswer(asset_id, None, error_of_status(err.code, err.message, err.details, self._target,
                                                               self._api_key))
        response = item.response
        if response is None:
            return BatchAnswer(asset_id, None, InvalidOutput("Gemini's batch answer holds neither a response nor "
                                                             "an error"))
        usage = usage_of(response)
        try:
            answer = parse_answer(response)
        except OutputTruncated as exc:
            return BatchAnswer(asset_id, None, PermanentError(f"{exc.message} (batch mode asks once)",
                                                              kind="truncated", code=exc.reason), usage)
        except MicrostockError as exc:
            return BatchAnswer(asset_id, None, exc, usage)
        metadata = to_metadata(answer, response, describer=self.name, settings=settings, usage=usage, batch=True)
        return BatchAnswer(asset_id, metadata, None, usage)


def _entity_missing(exc: errors.APIError) -> bool:
    """A 404 about the job itself, not about the address (a wrong API version: mapped as usual)."""
    return exc.code == 404 and "NOT FOUND ON THIS SERVER" not in str(exc.message or "").upper()
