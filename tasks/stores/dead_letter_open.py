"""Which dead-letter store a workdir uses: :func:`open_store`."""

from __future__ import annotations

import os

from tasks.core.settings import load_settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter import DeadLetterStore
from tasks.stores.dead_letter_sql import PostgresDeadLetterStore, SQLiteDeadLetterStore

#: Override the workdir's ``dead_letter_url`` and ``account`` settings (set per deployment by
#: ``microstock accounts deploy``).
DEAD_LETTER_URL_ENV = "MICROSTOCK_DEAD_LETTER_URL"
ACCOUNT_ENV = "MICROSTOCK_ACCOUNT"


def open_store(wd: Workdir) -> DeadLetterStore:
    """The workdir's store: SQLite at ``<workdir>/dead_letter.db`` (created on first use), unless a
    ``dead_letter_url`` is set ($MICROSTOCK_DEAD_LETTER_URL, else the workdir's microstock.toml): then the
    account's view of the shared PostgreSQL store ($MICROSTOCK_ACCOUNT, else the ``account`` setting).

    ConfigError for an unusable URL or a missing account, StoreUnavailable when the store cannot be used.
    """
    url, account = os.environ.get(DEAD_LETTER_URL_ENV, ""), os.environ.get(ACCOUNT_ENV, "")
    if not url or not account:
        settings = load_settings(wd.config_file)
        url, account = url or settings.dead_letter_url, account or settings.account
    if url:
        return PostgresDeadLetterStore(url, account)
    return SQLiteDeadLetterStore(wd.dead_letter_db)
