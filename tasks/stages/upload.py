"""The upload stage: ledger-gated, reconciled, confirmed — nothing is posted twice.

For one agency (the flow runs agencies in parallel, one task each)::

    lock the agency (another run holding it: wait for it, then take what it
    left) → read the ledger once → pending = items whose source
    SHA-256 is not recorded for this agency → for each pending file:
        reconcile: is it already on the server, whole? → record it, send nothing
        send → confirm (success reply + remote size) → record one ledger line

Reconciling first closes the crash window the ledger alone leaves open: an
upload confirmed by the server, then the process killed before its ledger
line was written. Where the server cannot be listed (``remote_keeps_files =
false``) that window stays open; docs/UPLOADS.md says so.

Failures (classified once, by each transport's error mapper on top of ``tasks.transports.base.network_errors``):
a TransientError retries the file with backoff within ``attempts``, on a
fresh connection; a file that keeps failing, or fails permanently, is
reported and left pending — never recorded; a StageStopped (refused login,
unknown host key, a server that lost a confirmed file) stops this agency at
once with one message, the other agencies go on; so do
``stop_after_same_failures`` files in a row failing for a cause every file
meets alike (``scope="target"``: the data connection, a full disk). A
send whose reply came too late may still be arriving: its remote copy is
watched (``tasks.transports.transit``) before anything is sent again. One
connection per agency is reused for every file; ``parallel_files`` opens that
many, each taking files from one queue.

Each file's outcome is logged once, on this module's logger (a run's logs
when it runs inside one), and handed to ``on_file`` (the agency's task run
makes its ``upload-<agency>`` table of them). No Prefect here: the agency's
task run is :func:`tasks.orchestration.stage_tasks.upload_stage`.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable

from tasks.core.errors import (
    AuthenticationFailed,
    ConfigError,
    MicrostockError,
    PermanentError,
    ReplyOverdue,
    StageStopped,
    StoreUnavailable,
    TransientError,
)
from tasks.core.records import FileOutcome, UploadItem
from tasks.core.reports import AgencyUpload
from tasks.core.retry import delay_before_retry
from tasks.core.secrets import password_block_name, password_env_var
from tasks.core.settings import AgencySettings
from tasks.core.workdir import Workdir
from tasks.observe.progress import StageProgress, notify
from tasks.stages.upload_caps import upload_cap, within_cap
from tasks.stores.ledger import Ledger
from tasks.transports.base import Transport
from tasks.transports.targets import open_transport, target_display
from tasks.transports.transit import SendsInFlight, Settled, watch

#: The least time a partial remote file must stay unchanged before it counts as abandoned
#: (longer at a slow server: tasks.transports.transit).
SETTLE_S = 3.0

#: Makes the (unconnected) transport of an agency; tests and tools may pass their own.
Opener = Callable[[str, AgencySettings, Workdir], Transport]

#: Told each tried file's outcome, once, from the worker thread that sent it (under a lock).
FileListener = Callable[[UploadItem, FileOutcome], None]

log = logging.getLogger(__name__)


def upload_agency(
    wd: Workdir,
    agency: str,
    items: list[UploadItem],
    settings: AgencySettings | None = None,
    *,
    opener: Opener = open_transport,
    sleep: Callable[[float], None] = time.sleep,
    settle_s: float = SETTLE_S,
    on_file: FileListener | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> AgencyUpload:
    """Upload every item not yet in the ledger for ``agency``; record each only once confirmed.

    A partial remote file is watched for ``settle_s`` (longer while it
    grows) before it is replaced: a killed run's last file may still be
    arriving from the kernel's buffers. Never raises for what happens to a
    file or to the agency's server: it is all in the returned report (and
    each tried file's outcome in ``on_file``). An upload cap (``tasks.stages.upload_caps``) leaves the files
    past it pending, with the reason, counted from the ledger at ``now()``.
    """
    settings = settings or AgencySettings()
    result = AgencyUpload()
    ledger = Ledger(wd.ledger)
    before_wait: set[str] | None = None  # what the ledger held for the agency when another run held it

    def waiting() -> None:
        nonlocal before_wait
        before_wait = set(ledger.read().done_for(agency))
        log.info("%s: another run is uploading there right now: this run waits for it to finish, then sends what "
                 "it left", agency)
        notify(f"{agency}: another run is uploading there right now; waiting for it to finish")

    try:
        result.target = target_display(agency, settings, wd)  # also when nothing is pending
        with ledger.agency_lock(agency, waiting):
            state = ledger.read()
            done = state.done_for(agency)
            pending: list[UploadItem] = []
            seen: set[str] = set()
            doubts: dict[str, str] = {}
            for item in items:  # identity is content: the same image under two names goes once
                if item.sha256 in done or item.sha256 in seen:
                    result.already.append(item.name)
                    if before_wait is not None and item.sha256 in done and item.sha256 not in before_wait:
                        result.by_other_run.append(item.name)
                else:
                    seen.add(item.sha256)
                    pending.append(item)
                    if doubt := state.doubt_about(agency, item.sha256, item.name):
                        doubts[item.name] = f"the ledger's damaged line {doubt.line} may record it as uploaded"
            if result.already:
                log.info("%s: %d already in the ledger", agency, len(result.already))
            if result.by_other_run:
                log.info("%s: %d uploaded by the other run meanwhile", agency, len(result.by_other_run))
            if pending and (cap := upload_cap(wd, agency, settings)) is not None:
                pending, capped = within_cap(pending, cap, wd.ledger, agency, now())
                if capped:
                    result.failed.update(capped)
                    log.warning("%s: %d left pending: %s", agency, len(capped), next(iter(capped.values())))
            if pending:
                ledger.check_recordable()  # read-only since the run began, say: nothing sent that it cannot record
                _AgencyRun(wd, agency, settings, ledger, opener, sleep, settle_s, result, on_file,
                           doubts).run(pending)
    except MicrostockError as exc:  # the target URL, the lock or the ledger itself
        result.stopped = exc.message
        result.not_tried = [i.name for i in items if i.name not in result.already]
        log.error("%s: stopped: %s", agency, exc.message)
    return result


class _AgencyRun:
    """The pending files of one agency, sent by ``parallel_files`` workers over their own connections."""

    def __init__(self, wd: Workdir, agency: str, settings: AgencySettings, ledger: Ledger, opener: Opener,
                 sleep: Callable[[float], None], settle_s: float, result: AgencyUpload,
                 on_file: FileListener | None, doubts: dict[str, str] | None = None) -> None:
        self.wd, self.agency, self.settings, self.ledger = wd, agency, settings, ledger
        self.opener, self.sleep, self.settle_s, self.log, self.result = opener, sleep, settle_s, log, result
        self.on_file = on_file
        #: name -> why it may be on the server already ("maybe done": a damaged ledger line names it).
        self.doubts = doubts or {}
        self.in_flight = SendsInFlight(wd.root / ".uploads-in-flight" / agency)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        #: Files in a row that failed for one cause every file meets alike (target_cause), and that cause.
        self.same_failures, self.failure_cause = 0, None

    def run(self, pending: list[UploadItem]) -> None:
        if cleared := self.in_flight.clear_temp_files():  # a killed run's half-written markers
            self.log.info("%s: removed %d temp file(s) a killed run left in %s", self.agency, cleared,
                          self.in_flight.folder)
        todo: queue.SimpleQueue[UploadItem] = queue.SimpleQueue()
        for item in pending:
            todo.put(item)
        workers = min(self.settings.parallel_files, len(pending))
        with StageProgress(f"upload-{self.agency}", len(pending)) as progress:
            if workers == 1:
                self._work(todo, progress)
            else:
                # each worker runs in a copy of this context, so its log lines belong to this (task) run
                threads = [threading.Thread(target=contextvars.copy_context().run, args=(self._work, todo, progress),
                                            daemon=True, name=f"upload-{self.agency}-{n}") for n in range(workers)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        while not todo.empty():
            self.result.not_tried.append(todo.get().name)
        if self.result.stopped:
            left = len(self.result.not_tried) + len(self.result.failed)
            self.log.error("%s: stopped: %s (%d %s left pending)", self.agency, self.result.stopped,
                           left, "file" if left == 1 else "files")

    # --- one worker: one connection --------------------------------------------------

    def _work(self, todo: "queue.SimpleQueue[UploadItem]", progress: StageProgress) -> None:
        try:
            transport = self.opener(self.agency, self.settings, self.wd)
        except ConfigError as exc:
            self._stop(exc.message)
            return
        with self.lock:
            self.result.target = transport.display
        try:
            while not self.stop.is_set():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                outcome = self._one_file_or_stop(transport, item)
                if outcome.kind == "failed":
                    self.log.warning("%s: %s left pending: %s", self.agency, item.name, outcome.detail)
                else:
                    self.log.info("%s: %s %s %s", self.agency, outcome.kind, item.name, outcome.detail)
                with self.lock:
                    if self.on_file is not None:
                        self.on_file(item, outcome)
                    progress.advance()
        finally:
            transport.close()

    def _one_file_or_stop(self, transport: Transport, item: UploadItem) -> FileOutcome:
        """One file; a stop of the whole agency is decided here and returned as this file's failure."""
        try:
            return self._one_file(transport, item)
        except StageStopped as exc:
            reason = self._explain(exc)
            with self.lock:
                self.result.not_tried.append(item.name)
                self.result.stopped_on = self.result.stopped_on or item.name
        except StoreUnavailable as exc:
            reason = (f"{exc.message}; {item.name} may be on the server unrecorded: "
                      "the next run finds it there and records it")
        except Exception as exc:  # never contagious: an unforeseen failure leaves this file pending, the rest go on
            transport.close()  # its connection may be mid-transfer: the next file starts on a fresh one
            # redacted with the agency's password, and no traceback: its frames' text is not redacted
            why = f"{type(exc).__name__}: {transport.redacted(str(exc))}"
            self.log.error("%s: %s failed unexpectedly (%s)", self.agency, item.name, why)
            return self._fail(item, f"unexpected error ({why}); left pending — "
                                    "the next run checks the server before sending it")
        self._stop(reason)
        return FileOutcome("failed", f"not sent: {self.agency} stopped — {reason}")

    def _one_file(self, transport: Transport, item: UploadItem) -> FileOutcome:
        """Reconcile, send, confirm, record one file, retrying transient failures within the budget."""
        attempts = self.settings.attempts
        try:
            local_size = item.path.stat().st_size
        except OSError as exc:
            return self._fail(item, f"upload-ready file unreadable ({exc.strerror or exc})")
        overdue: ReplyOverdue | None = None  # a send of this file whose reply did not come: maybe in transit
        doubt = self.doubts.get(item.name)  # maybe done: checked on the server, never simply sent
        sent_here = False  # until this run sends it, a partial remote copy is an earlier run's
        for attempt in range(1, attempts + 1):
            connecting = not transport.connected
            try:
                if connecting:
                    self._connect(transport)
                connecting = False
                remote = transport.remote_size(item.name)
                if doubt is not None and remote is None:
                    where = "the server cannot be listed" if not transport.can_list else "it is not on the server now"
                    return self._fail(item, f"{doubt}, and {where}: not sent — check the agency's site; if it "
                                            "arrived, `microstock ledger done`, else fix or delete that line and "
                                            "the next run sends it")
                if overdue is not None and not transport.can_list:
                    return self._fail(item, f"{overdue.message}; the server cannot be listed, so it is not sent "
                                            "again: check the agency's site — if it arrived, `microstock ledger "
                                            "done`, else the next run sends it")
                if remote is not None and remote < local_size:
                    settled = self._settle(transport, item, remote, local_size, overdue, earlier_run=not sent_here)
                    if settled.growing:
                        return self._fail(item, f"still arriving on the server after {settled.watched_s:.0f} s "
                                                f"of watching ({settled.size} of {local_size} bytes); not sent "
                                                "again — the next run looks at it first")
                    remote = settled.size
                if remote is None and overdue is not None:
                    return self._fail(item, f"{overdue.message}; it is not on the server now (taken by the agency, "
                                            "or dropped) and is not sent again this run: check the agency's site — "
                                            "if it arrived, `microstock ledger done`, else the next run sends it")
                if remote == local_size:
                    entry = self.ledger.record(self.agency, item.name, item.sha256, transport.remote_path(item.name))
                    self.in_flight.end(item.name)
                    if overdue is not None:  # sent once, this run: it arrived after all
                        return self._note("uploaded", item, f"→ {entry.remote_path} ({local_size} bytes; the "
                                                            "server's reply was late, its copy is whole)")
                    return self._note("reconciled", item, f"already on the server whole ({remote} bytes): "
                                                          f"recorded without sending → {entry.remote_path}")
                if remote is not None and remote > local_size:
                    raise PermanentError(f"{transport.remote_path(item.name)}: a different, larger file "
                                         f"({remote} bytes, this one {local_size}) is already there; "
                                         "not overwritten — check it on the agency's side", kind="remote_differs")
                started = time.monotonic()
                sent_here = True
                self.in_flight.begin(item.name)  # kept until recorded: a later run knows when this send began
                remote_path = transport.put(item.path, item.name)
                self.ledger.record(self.agency, item.name, item.sha256, remote_path)
                self.in_flight.end(item.name)
                return self._note("uploaded", item, f"→ {remote_path} ({local_size} bytes, "
                                                    f"{time.monotonic() - started:.1f} s)")
            except TransientError as exc:
                transport.close()  # the next attempt starts on a fresh connection
                if isinstance(exc, ReplyOverdue):
                    overdue = exc
                if attempt == attempts and connecting:  # the server, not this file: spare the others the wait
                    raise StageStopped(f"cannot connect after {attempts} attempts: {exc.message}",
                                       kind="target", code=exc.error_class) from exc
                if attempt == attempts:
                    return self._fail(item, f"gave up after {attempts} attempts: {exc.message}", exc.target_cause)
                delay = delay_before_retry(self.settings.retry_delay_s, attempt, exc)
                self.log.warning("%s: %s attempt %d/%d failed (%s); retrying in %.1f s",
                                 self.agency, item.name, attempt, attempts, exc.message, delay)
                self.sleep(delay)
            except PermanentError as exc:
                return self._fail(item, exc.message, exc.target_cause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _settle(self, transport: Transport, item: UploadItem, size: int, expected: int,
                overdue: ReplyOverdue | None, earlier_run: bool) -> Settled:
        """Watch a partial remote file until it is whole, gone, or settled (tasks.transports.transit):
        paced by this run's overdue send, else (``earlier_run``: before this run's first send of it)
        by an earlier run's marker, its quiet window capped at 4 × ``timeout_s``."""
        if overdue is not None:
            sent_at, cap = overdue.started, None
        elif earlier_run:
            sent_at, cap = self.in_flight.began(item.name), 4 * self.settings.timeout_s
        else:
            sent_at, cap = None, None

        def growing(before: int | None, after: int | None) -> None:
            self.log.info("%s: %s is still arriving on the server (%s → %s bytes); waiting",
                          self.agency, item.name, before, after)

        return watch(lambda: transport.remote_size(item.name), expected, size,
                     sent_at=sent_at, floor_s=self.settle_s, sleep=self.sleep, on_growth=growing, cap_s=cap)

    def _connect(self, transport: Transport) -> None:
        """Connect; a permanent refusal here (no such folder, ...) stops the agency."""
        try:
            transport.connect()
        except PermanentError as exc:
            # exc.message starts with the target already: say it once
            raise StageStopped(f"target unusable — {exc.message}", kind="target", code=exc.error_class) from exc

    # --- bookkeeping -----------------------------------------------------------------

    def _note(self, what: str, item: UploadItem, detail: str) -> FileOutcome:
        with self.lock:
            getattr(self.result, what).append(item.name)
            self.same_failures, self.failure_cause = 0, None
        return FileOutcome(what, detail)

    def _fail(self, item: UploadItem, reason: str, cause: str | None = None) -> FileOutcome:
        """Leave ``item`` pending; stop the agency once ``stop_after_same_failures`` files in a row
        failed for the same ``cause`` (one that every file meets alike)."""
        limit = self.settings.stop_after_same_failures
        with self.lock:
            self.result.failed[item.name] = reason
            self.same_failures = self.same_failures + 1 if cause and cause == self.failure_cause else int(bool(cause))
            self.failure_cause = cause
            alike = self.same_failures if cause and limit and self.same_failures >= limit else 0
        if alike:
            self._stop(f"{alike} files in a row failed the same way — {cause}; the rest would too, so this "
                       f"agency stops for this run. The last: {reason}")
        return FileOutcome("failed", reason)

    def _stop(self, reason: str) -> None:
        with self.lock:
            if self.result.stopped is None:
                self.result.stopped = reason
        self.stop.set()

    def _explain(self, exc: StageStopped) -> str:
        if isinstance(exc, AuthenticationFailed):
            return (f"{exc.message} — check {password_env_var(self.agency)} or the Prefect Secret block "
                    f"{password_block_name(self.agency)} (and the user in the target URL or key_file)")
        return exc.message
