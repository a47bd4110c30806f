"""Prefect's settings that decide where a home's data lives, pinned in the environment, and the starting folder's
settings files, trusted only when they are the contributor's.

Prefect 3.9.1 reads each setting from the environment first, then from ``.env``, ``prefect.toml`` and
``pyproject.toml`` (its ``[tool.prefect]`` table) in the current folder, then from the profile
(``prefect/settings/base.py``, ``settings_customise_sources``); ``.env``, ``prefect.toml`` and ``pyproject.toml``
can also name another profiles file. So a file in the folder a command starts from could move the database:
a ``prefect.toml`` holding only ``[server.database] connection_url`` put the contributor's database, with
the Secret blocks' encryption key, where another local user could read it (issue 50). Two defences:

- :func:`pin`: every setting that says where Prefect's data lives is set in the environment of the command
  and of the server it starts (:func:`home_settings`), so no file changes it; the server also starts in its
  home (:class:`~tasks.orchestration.local_server.LocalServer`), where nobody else can put a file.
- :func:`refuse_foreign_settings`: a settings file of the starting folder that another user owns or may
  write (its other settings: the API's address when the command runs its own ephemeral server, logging)
  is refused with one line before anything starts.

Nothing here imports Prefect: the environment must be set before Prefect is imported.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import MutableMapping
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.ownership import changeable_by_others

#: The database's address, under the two names Prefect 3.9.1 reads (``server.database.connection_url``).
DATABASE_URL_NAMES = ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL")


def home_settings(home: Path) -> dict[str, str]:
    """Each setting that decides where Prefect keeps data, at its place in ``home`` (Prefect's own defaults for
    that home, but for the UI's files): its home, its profiles file (which could set the rest), the database,
    task results, the block-registration memo, the logging configuration (a file that could run any code), and
    the UI's files, which the server copies out of the installed package on its first start: a copy of its own
    in the home, so that the install is never written (made 0700 by a keeper's umask, other users' servers
    could not read it)."""
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_PROFILES_PATH": str(home / "profiles.toml"),
        DATABASE_URL_NAMES[0]: f"sqlite+aiosqlite:///{home}/prefect.db",
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "storage"),
        "PREFECT_SERVER_MEMO_STORE_PATH": str(home / "memo_store.toml"),
        "PREFECT_LOGGING_CONFIG_PATH": str(home / "logging.yml"),
        "PREFECT_SERVER_UI_STATIC_DIRECTORY": str(home / "ui"),
    }


def pin(env: MutableMapping[str, str], home: Path) -> MutableMapping[str, str]:
    """Set :func:`home_settings` in ``env`` (a process's environment, or one for a process to start) and return
    it. ``PREFECT_HOME`` is always ``home``; another setting the environment already holds is the contributor's
    choice and is kept (a PostgreSQL database under either of :data:`DATABASE_URL_NAMES`: the cluster, the
    benchmarks). Only a file can no longer choose."""
    for name, value in home_settings(home).items():
        if name == "PREFECT_HOME":
            env[name] = value
        elif name in DATABASE_URL_NAMES:
            if not any(env.get(n) for n in DATABASE_URL_NAMES):
                env[name] = value
        elif not env.get(name):
            env[name] = value
    return env


#: The files of the current folder Prefect reads settings from (``pyproject.toml`` only its ``[tool.prefect]``).
SETTINGS_FILES = (".env", "prefect.toml", "pyproject.toml")


def _holds_prefect_settings(path: Path) -> bool:
    """True when ``path`` (one of :data:`SETTINGS_FILES`) holds something Prefect reads: for ``.env`` a
    ``PREFECT_`` line (any case, as Prefect reads it), for ``pyproject.toml`` a ``[tool.prefect]`` table, for
    ``prefect.toml`` anything. A file that cannot be read or parsed counts (Prefect may read it otherwise)."""
    if path.name == "prefect.toml":
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    if path.name == ".env":
        return re.search(r"(?im)^\s*(export\s+)?prefect_", text) is not None
    try:
        return "prefect" in tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError:
        return True


def refuse_foreign_settings(folder: Path) -> None:
    """ConfigError naming the first of ``folder``'s Prefect settings files (:data:`SETTINGS_FILES`) that is not
    the contributor's alone (:func:`tasks.core.ownership.changeable_by_others`: another user owns it, or a
    folder or symlink on the way to it, or may write it) and holds settings Prefect would read; nothing when
    there is none."""
    for name in SETTINGS_FILES:
        path = folder / name
        found = changeable_by_others(path) if path.exists() or path.is_symlink() else None
        if found and _holds_prefect_settings(path):
            given, what_is, mode, _ = found
            mode_said = f" (mode {mode:04o})" if mode is not None else ""
            raise ConfigError(f"{given} {what_is}{mode_said}: Prefect would read its settings from it (the folder "
                              "this command starts in); run the command from another folder, or remove the file")
