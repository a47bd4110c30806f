"""Which dead-letter store a run uses: :func:`open_store`, from settings its opener made (:func:`store_settings`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter import DeadLetterStore

#: Override the settings' ``dead_letter_url`` and ``account`` (set per deployment by
#: ``microstock accounts deploy``).
DEAD_LETTER_URL_ENV = "MICROSTOCK_DEAD_LETTER_URL"
ACCOUNT_ENV = "MICROSTOCK_ACCOUNT"


def store_settings(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """``settings`` with the store the environment ``environ`` names: $MICROSTOCK_DEAD_LETTER_URL over its
    ``dead_letter_url``, $MICROSTOCK_ACCOUNT over its ``account`` (a deployment's, set by ``microstock accounts
    deploy``). The opener of a run or a command calls it once, with ``os.environ``; nothing below reads them."""
    update = {key: environ[name] for key, name in (("dead_letter_url", DEAD_LETTER_URL_ENV), ("account", ACCOUNT_ENV))
              if environ.get(name)}
    return settings.model_copy(update=update) if update else settings


def open_store(wd: Workdir, settings: Settings, clock: Callable[[], float] = time.time) -> DeadLetterStore:
    """The dead-letter store of ``settings`` (the run's, from its config file and :func:`store_settings`: never read
    again here, nor the environment): SQLite at ``<workdir>/dead_letter.db`` (created on first use), unless a
    ``dead_letter_url`` is set: then the view of the shared PostgreSQL store of its ``account``.

    ``clock``: Unix seconds for what the store records. ConfigError for an unusable URL or a missing account,
    StoreUnavailable when the store cannot be used.
    """
    # Imported here: SQLAlchemy is ~0.8 s of CPU, and a command that opens no store (`microstock review list`)
    # imports this module through the run context.
    from tasks.stores.dead_letter_sql import PostgresDeadLetterStore, SQLiteDeadLetterStore

    if settings.dead_letter_url:
        return PostgresDeadLetterStore(settings.dead_letter_url, settings.account, clock=clock)
    return SQLiteDeadLetterStore(wd.dead_letter_db, clock=clock)
