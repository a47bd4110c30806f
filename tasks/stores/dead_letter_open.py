"""Which dead-letter store a run uses: :func:`open_store`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter import DeadLetterStore
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore, SQLiteDeadLetterStore

#: Override the settings' ``dead_letter_url`` and ``account`` (set per deployment by
#: ``microstock accounts deploy``).
DEAD_LETTER_URL_ENV = "MICROSTOCK_DEAD_LETTER_URL"
ACCOUNT_ENV = "MICROSTOCK_ACCOUNT"


def open_store(wd: Workdir, settings: Settings, clock: Callable[[], float] = time.time) -> DeadLetterStore:
    """The dead-letter store of ``settings`` (the run's, from its config file: never read again here): SQLite at
    ``<workdir>/dead_letter.db`` (created on first use), unless a ``dead_letter_url`` is set
    ($MICROSTOCK_DEAD_LETTER_URL, else the settings'): then the account's view of the shared PostgreSQL store
    ($MICROSTOCK_ACCOUNT, else the ``account`` setting).

    ``clock``: Unix seconds for what the store records. ConfigError for an unusable URL or a missing account,
    StoreUnavailable when the store cannot be used.
    """
    url = os.environ.get(DEAD_LETTER_URL_ENV) or settings.dead_letter_url
    if url:
        return PostgresDeadLetterStore(url, os.environ.get(ACCOUNT_ENV) or settings.account, clock=clock)
    return SQLiteDeadLetterStore(wd.dead_letter_db, clock=clock)
