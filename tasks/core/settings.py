"""Settings from ``microstock.toml`` (validated with pydantic) and the environment.

An unknown key or a wrong type is a :class:`~tasks.core.errors.ConfigError`
whose one-line message names the key. Secrets never live here: they are read
from the environment or Prefect Secret blocks when needed (``tasks.secrets``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tasks.core.errors import ConfigError

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GeminiSettings(_Strict):
    model: str = "gemini-2.5-flash"
    image_model: str = "gemini-2.5-flash-image"
    requests_per_minute: int = Field(60, ge=1)
    concurrency: int = Field(4, ge=1)
    max_attempts: int = Field(4, ge=1)
    #: Delay before the first retry of a describe call; doubles per retry, capped at 30 s, with jitter.
    retry_delay_s: float = Field(2, ge=0)
    timeout_s: float = Field(60, gt=0)
    language: str = "en"


class AgencySettings(_Strict):
    enabled: bool = True
    #: ``file:///path``, ``ftp://user@host:port/dir``, ``ftps://…``, ``sftp://…``;
    #: empty means ``<workdir>/outbox/<agency>/``.
    target: str = ""
    #: Trust the server without checking who it is: SFTP accepts an unknown host key on
    #: first use and adds it to known_hosts (a changed key is still refused); FTPS skips
    #: certificate verification. Off: known_hosts / the system CAs are checked.
    trust_unknown_host: bool = False
    #: SFTP only: private key file (password auth otherwise).
    key_file: str = ""
    #: Files sent at once to this agency (one connection each).
    parallel_files: int = Field(1, ge=1)
    #: Attempts per file for transient network errors.
    attempts: int = Field(3, ge=1)
    #: Wait before the second attempt of a file; doubles per attempt, capped at 30 s, with jitter.
    retry_delay_s: float = Field(2, ge=0)
    #: Seconds a connection may stay silent (connect, login, each send) before it counts as dropped.
    timeout_s: float = Field(30, gt=0)
    #: False when the agency moves uploaded files away at once: then the server's success
    #: reply alone confirms an upload, and nothing can be reconciled (see docs/UPLOADS.md).
    remote_keeps_files: bool = True
    #: Values for agency-specific CSV columns (e.g. Dreamstime ``Free``, ``W-EL``).
    csv_defaults: dict[str, str] = Field(default_factory=dict)


class GenerateSettings(_Strict):
    seed: int = 0
    #: Prompts cycled through by the generator; empty uses the built-in demo list.
    prompts: list[str] = Field(default_factory=list)


class PackSettings(_Strict):
    preview_px: int = Field(1000, ge=64)
    thumbnail_px: int = Field(400, ge=32)
    jpeg_quality: int = Field(92, ge=50, le=100)
    strip_location: bool = True


class Settings(_Strict):
    gemini: GeminiSettings = GeminiSettings()
    agencies: dict[str, AgencySettings] = Field(default_factory=dict)
    generate: GenerateSettings = GenerateSettings()
    pack: PackSettings = PackSettings()
    #: Empty: the dead-letter store is ``<workdir>/dead_letter.db`` (SQLite). Else a studio's shared
    #: store, ``postgresql+psycopg://user@host:port/db``, without the password (libpq reads it from
    #: ~/.pgpass, $PGPASSFILE or $PGPASSWORD). ``$MICROSTOCK_DEAD_LETTER_URL`` overrides it.
    dead_letter_url: str = ""
    #: The contributor account this workdir belongs to: its name in the shared dead-letter store.
    #: ``$MICROSTOCK_ACCOUNT`` overrides it.
    account: str = ""

    @field_validator("dead_letter_url")
    @classmethod
    def _no_password_in_url(cls, url: str) -> str:
        if url and urlsplit(url).password is not None:
            raise ValueError("holds a password: keep it in ~/.pgpass or $PGPASSFILE, never in the config file")
        return url

    def agency(self, name: str) -> AgencySettings:
        """The settings of one agency (defaults when the file does not mention it)."""
        return self.agencies.get(name, AgencySettings())  # type: ignore[call-overload]


def load_settings(path: Path | None) -> Settings:
    """Read and validate settings; a missing default file means all defaults.

    Raises ConfigError with a one-line message naming the file and the key.
    """
    if path is None or not path.exists():
        return Settings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigError(f"{path}: {key}: {msg}") from None
