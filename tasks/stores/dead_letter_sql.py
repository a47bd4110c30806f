"""The dead-letter store on SQLAlchemy Core: one SQLite file per workdir, or one PostgreSQL for a studio.

The table ``dead_letter`` (:data:`TABLE`) is the same in both: the columns of
the original design, plus ``asset_name``, ``task_run_id``, ``claimed_by`` /
``claimed_at``, and ``account`` (a job is ``(account, job_id)``, so the same
image in two accounts is two jobs). The SQLite file's rows all have the
account ``''``. Every statement is written once, here, for both databases;
what differs is how each is reached:

- **SQLite** (:class:`SQLiteDeadLetterStore`, ``<workdir>/dead_letter.db``,
  the default): WAL mode and a busy timeout set as each connection opens;
  every write is one transaction that takes the write lock up front
  (``BEGIN IMMEDIATE``, emitted by SQLAlchemy's ``begin`` event as its pysqlite
  notes describe), so concurrent writers queue instead of failing halfway and
  a claim is atomic. A file written before the table had ``account`` (or
  before ``asset_name`` and the claim columns) gains the columns it lacks
  when it is opened.
- **PostgreSQL** (:class:`PostgresDeadLetterStore`, a ``dead_letter_url`` of
  ``postgresql+psycopg://user@host:port/db``): the password is not in the
  URL (libpq reads it from ``~/.pgpass``, ``$PGPASSFILE`` or ``$PGPASSWORD``)
  and never in a message. Claims lock the rows they pick with ``FOR UPDATE
  SKIP LOCKED``, so replays on any number of machines never share a job.
  :meth:`DeadLetterDatabase.summaries` reads every account's.

One short connection per call (no pool) keeps a store safe across threads
and forked processes. A database error becomes StoreUnavailable naming the
store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    URL,
    BigInteger,
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    event,
    func,
    inspect,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import NullPool
from sqlalchemy.schema import CreateColumn

from tasks.core.errors import ConfigError, StoreUnavailable
from tasks.core.secrets import redact
from tasks.stores.dead_letter import CLAIM_TIMEOUT_S, DeadLetterStore, ParkedJob, Summary

METADATA = MetaData()
TABLE = Table(
    "dead_letter", METADATA,
    Column("account", Text, primary_key=True, server_default=""),
    Column("job_id", Text, primary_key=True),
    Column("payload_json", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("error_class", Text, nullable=False),
    Column("error_message", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("first_seen", BigInteger, nullable=False),
    Column("last_seen", BigInteger, nullable=False),
    Column("status", Text, nullable=False, server_default="parked"),
    Column("asset_name", Text, nullable=False, server_default=""),
    Column("task_run_id", Text),
    Column("claimed_by", Text),
    Column("claimed_at", BigInteger),
    Index("dead_letter_status", "account", "status", "last_seen"),
)
#: Every column a :class:`ParkedJob` has (all but ``account``).
_JOB_COLUMNS = [c for c in TABLE.c if c.name != "account"]
#: Serialises PostgreSQL's schema creation: two processes creating the table at once would race in the catalog.
_SCHEMA_LOCK = 0x6D73_646C  # "msdl"
#: The execution option that makes SQLite's transaction ``BEGIN IMMEDIATE`` (see ``_sqlite_engine``).
_IMMEDIATE = "microstock_begin_immediate"


def _create_or_update(con: Connection) -> None:
    """Create the table, or add the columns an older store's table lacks (the rows keep their values)."""
    METADATA.create_all(con)
    have = {c["name"] for c in inspect(con).get_columns(TABLE.name)}
    missing = [c for c in TABLE.c if c.name not in have]
    for column in missing:
        con.execute(text(f"ALTER TABLE {TABLE.name} ADD COLUMN {CreateColumn(column).compile(dialect=con.dialect)}"))
    if TABLE.c.account in missing:  # the table's key was job_id alone: a unique (account, job_id) for the upsert
        con.execute(text(f"CREATE UNIQUE INDEX IF NOT EXISTS dead_letter_job ON {TABLE.name} (account, job_id)"))
        con.execute(text("DROP INDEX IF EXISTS dead_letter_status"))
        next(i for i in TABLE.indexes if i.name == "dead_letter_status").create(con)


def _sqlite_engine(path: Path, busy_timeout_s: float) -> Engine:
    """An engine on the file: WAL and the busy timeout on every connection, ``BEGIN IMMEDIATE`` for writes."""
    engine = create_engine(URL.create("sqlite+pysqlite", database=str(path)), poolclass=NullPool,
                           connect_args={"timeout": busy_timeout_s})

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN, below, not the sqlite3 module
        if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            dbapi_connection.execute("PRAGMA journal_mode=WAL")

    @event.listens_for(engine, "begin")
    def _begin(con: Connection) -> None:
        con.exec_driver_sql("BEGIN IMMEDIATE" if con.get_execution_options().get(_IMMEDIATE) else "BEGIN")

    return engine


def parse_url(url: str | URL) -> URL:
    """The URL as SQLAlchemy's; ConfigError unless it is ``postgresql+psycopg://…`` (the driver this store uses)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError("dead_letter_url: not a database URL "
                          "(expected postgresql+psycopg://user@host:port/db)") from None
    if parsed.drivername != "postgresql+psycopg":
        raise ConfigError(f"dead_letter_url: {parsed.drivername!r} is not supported "
                          "(expected postgresql+psycopg://user@host:port/db)")
    return parsed


class DeadLetterDatabase:
    """The table in one database with every account's rows: transactions, error mapping, summaries.

    Made by :meth:`sqlite` or :meth:`postgres`, which create the table (or
    bring an older one up to date) before returning.
    """

    def __init__(self, engine: Engine, name: str, insert: Callable[[Table], Any], *,
                 busy_timeout_s: float | None = None, password: str | None = None) -> None:
        self._engine = engine
        #: The database's URL (its password included: never shown; ``name`` is what messages say).
        self.url = engine.url
        #: The dialect's ``insert``, which has ``on_conflict_do_update`` (the same in SQLite and PostgreSQL).
        self.insert = insert
        #: What messages call the store: the file, or the URL without its password (and the account).
        self.name = name
        self._busy_timeout_s = busy_timeout_s
        self._password = password
        with self.write() as con:
            if con.dialect.name == "postgresql":
                con.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
            _create_or_update(con)

    @classmethod
    def sqlite(cls, path: Path, *, busy_timeout_s: float = 10.0) -> DeadLetterDatabase:
        """The SQLite file at ``path`` (created on first use); StoreUnavailable when it is locked or no database."""
        return cls(_sqlite_engine(path, busy_timeout_s), str(path), sqlite_insert, busy_timeout_s=busy_timeout_s)

    @classmethod
    def postgres(cls, url: str | URL, *, account: str | None = None, connect_timeout_s: int = 10) -> DeadLetterDatabase:
        """The shared PostgreSQL database at ``url`` (``account`` only names it in messages).

        ConfigError for an unusable URL or a missing driver (``pip install
        'prefect-microstock[cluster]'``), StoreUnavailable when the server
        cannot be reached or refuses the login.
        """
        from sqlalchemy.dialects.postgresql import insert  # here: SQLite's path never loads it (≈ 75 ms)

        parsed = parse_url(url)
        try:
            engine = create_engine(parsed, poolclass=NullPool, connect_args={"connect_timeout": connect_timeout_s})
        except (ImportError, NoSuchModuleError):
            raise ConfigError("dead_letter_url needs the psycopg driver: "
                              "pip install 'prefect-microstock[cluster]'") from None
        where = parsed.render_as_string(hide_password=True)
        return cls(engine, where if account is None else f"{where} (account {account})", insert,
                   password=parsed.password)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reading."""
        try:
            with self._engine.connect() as con:
                yield con
        except DBAPIError as exc:
            raise self._unavailable(exc) from None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction holding the write lock (SQLite: ``BEGIN IMMEDIATE``), committed when the block ends
        without an exception."""
        try:
            with self._engine.connect() as con:
                con.execution_options(**{_IMMEDIATE: True})
                with con.begin():
                    yield con
        except DBAPIError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: DBAPIError) -> StoreUnavailable:
        lines = str(exc.orig).strip().splitlines()
        reason = lines[0] if lines else type(exc.orig).__name__
        if self._password:
            reason = reason.replace(self._password, "***")
        if self._busy_timeout_s is not None and ("locked" in reason or "busy" in reason):
            return StoreUnavailable(
                f"{self.name}: the dead-letter store is locked by another process "
                f"(waited {self._busy_timeout_s:g} s); the affected jobs stay pending for the next run")
        return StoreUnavailable(f"{self.name}: cannot use the dead-letter store: {redact(reason)}")

    def summaries(self, account: str | None = None) -> dict[str, Summary]:
        """Parked jobs per account (only ``account`` when given), by name; accounts with none are left out."""
        n = func.count().label("n")
        query = (select(TABLE.c.account, TABLE.c.error_class, n, func.min(TABLE.c.first_seen))
                 .where(TABLE.c.status == "parked")
                 .group_by(TABLE.c.account, TABLE.c.error_class)
                 .order_by(TABLE.c.account, n.desc(), TABLE.c.error_class))
        if account is not None:
            query = query.where(TABLE.c.account == account)
        with self.connect() as con:
            rows = con.execute(query).all()
        out: dict[str, Summary] = {}
        for name, error_class, count, oldest in rows:
            before = out.get(name, Summary())
            first = oldest if before.oldest_first_seen is None else min(before.oldest_first_seen, oldest)
            out[name] = Summary(by_class=[*before.by_class, (error_class, count)], oldest_first_seen=first)
        return out


class SQLDeadLetterStore(DeadLetterStore):
    """One account's jobs in a :class:`DeadLetterDatabase`; ``clock`` gives the time in Unix seconds."""

    def __init__(self, db: DeadLetterDatabase, account: str, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.account = account
        self.clock = clock

    def _now(self) -> int:
        return int(self.clock())

    def _mine(self, job_id: str | None = None):
        """The WHERE clause of this account's rows (and one job)."""
        mine = TABLE.c.account == self.account
        return mine if job_id is None else mine & (TABLE.c.job_id == job_id)

    @staticmethod
    def _job(row: Any) -> ParkedJob:
        values = dict(row._mapping)
        return ParkedJob(payload=json.loads(values.pop("payload_json")), **values)

    # --- the interface ------------------------------------------------------------

    def park(self, job_id, *, payload, model, error_class, error_message, attempts, asset_name="", task_run_id=None):
        now = self._now()
        replaced = {"payload_json": redact(json.dumps(payload, sort_keys=True, ensure_ascii=False)), "model": model,
                    "error_class": error_class, "error_message": redact(error_message), "last_seen": now,
                    "status": "parked", "asset_name": asset_name, "task_run_id": task_run_id}
        with self.db.write() as con:
            insert = self.db.insert(TABLE).values(account=self.account, job_id=job_id, attempts=attempts,
                                               first_seen=now, **replaced)
            con.execute(insert.on_conflict_do_update(
                index_elements=[TABLE.c.account, TABLE.c.job_id],
                set_={**{name: insert.excluded[name] for name in replaced},
                      "attempts": TABLE.c.attempts + insert.excluded.attempts}))
            row = con.execute(select(*_JOB_COLUMNS).where(self._mine(job_id))).one()
        return self._job(row)

    def get(self, job_id):
        with self.db.connect() as con:
            row = con.execute(select(*_JOB_COLUMNS).where(self._mine(job_id))).first()
        return self._job(row) if row else None

    def _select(self, status: str | None, error_class: str | None):
        query = select(*_JOB_COLUMNS).where(self._mine())
        if status is not None:
            query = query.where(TABLE.c.status == status)
        if error_class:
            query = query.where(TABLE.c.error_class.startswith(error_class, autoescape=True))
        return query.order_by(TABLE.c.last_seen, TABLE.c.job_id)

    def list(self, *, status=None, error_class=None, limit=None):
        with self.db.connect() as con:
            return [self._job(r) for r in con.execute(self._select(status, error_class).limit(limit))]

    def claim(self, claimant, *, limit, error_class=None):
        now = self._now()
        free = (self._select("parked", error_class)
                .where(TABLE.c.claimed_by.is_(None) | (TABLE.c.claimed_at < now - CLAIM_TIMEOUT_S))
                .limit(limit).with_for_update(skip_locked=True))  # SQLite: the write lock already excludes others
        with self.db.write() as con:
            ids = [r.job_id for r in con.execute(free)]
            if not ids:
                return []
            con.execute(update(TABLE).where(self._mine() & TABLE.c.job_id.in_(ids))
                        .values(claimed_by=claimant, claimed_at=now))
            rows = con.execute(select(*_JOB_COLUMNS).where(self._mine() & TABLE.c.job_id.in_(ids))
                               .order_by(TABLE.c.last_seen, TABLE.c.job_id)).all()
        return [self._job(r) for r in rows]

    def _settle(self, job_id: str, claimant: str, **changes) -> bool:
        """Drop ``claimant``'s claim on the job and apply ``changes``; False when it does not hold the job."""
        with self.db.write() as con:
            result = con.execute(update(TABLE).where(self._mine(job_id) & (TABLE.c.claimed_by == claimant))
                                 .values(claimed_by=None, claimed_at=None, **changes))
        return result.rowcount == 1

    def mark_recovered(self, job_id, claimant):
        return self._settle(job_id, claimant, status="recovered", last_seen=self._now())

    def release(self, job_id, claimant, *, error_message=None):
        if error_message is None:
            return self._settle(job_id, claimant)
        return self._settle(job_id, claimant, error_message=redact(error_message), last_seen=self._now())

    def summary(self):
        return self.db.summaries(self.account).get(self.account, Summary())


class SQLiteDeadLetterStore(SQLDeadLetterStore):
    """The store in one SQLite file (the default: ``<workdir>/dead_letter.db``), account ``''``."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        super().__init__(DeadLetterDatabase.sqlite(self.path, busy_timeout_s=busy_timeout_s), "", clock=clock)


class PostgresDeadLetterStore(SQLDeadLetterStore):
    """One account's view of the studio's shared store on PostgreSQL."""

    def __init__(self, url: str | URL, account: str, *, connect_timeout_s: int = 10,
                 clock: Callable[[], float] = time.time) -> None:
        if not account:
            raise ConfigError("the PostgreSQL dead-letter store needs an account name (setting `account` "
                              "or $MICROSTOCK_ACCOUNT)")
        super().__init__(DeadLetterDatabase.postgres(url, account=account, connect_timeout_s=connect_timeout_s),
                         account, clock=clock)

    @property
    def url(self) -> URL:
        """The database's URL as parsed once, by :meth:`DeadLetterDatabase.postgres`."""
        return self.db.url
