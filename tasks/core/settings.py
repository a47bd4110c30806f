"""Settings from ``microstock.toml`` (validated with pydantic) and the environment.

An unknown key or a wrong type is a :class:`~tasks.core.errors.ConfigError`
whose one-line message names the key. Secrets never live here: they are read
from the environment or Prefect Secret blocks when needed (``tasks.core.secrets``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from tasks.core.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GeminiSettings(_Strict):
    #: Defaults: generally-available models with no shutdown date announced (docs/GEMINI.md says where
    #: and when that was checked); the table of known models is ``tasks/gemini/models.toml``.
    model: str = "gemini-3.5-flash-lite"
    image_model: str = "gemini-3.1-flash-image"
    #: What makes clips for ``run --clips N`` (the Interactions API; ``tasks/gemini/models.toml``, use ``clip``).
    clip_model: str = "gemini-omni-1.2-flash"
    #: Seconds between two looks at a clip being made, and the longest one attempt waits for it (a clip not
    #: ready by then is taken up again by the next attempt or run: it is never asked for twice).
    clip_poll_s: float = Field(10, gt=0)
    clip_wait_s: float = Field(600, gt=0)
    #: The REST API version the client calls (``v1beta`` or ``v1``); docs/GEMINI.md explains the choice.
    api_version: str = Field("v1beta", pattern=r"^v1(beta)?$")
    #: Thinking effort of the describe model: a level (``minimal``, ``low`` …) or a budget in tokens
    #: (``"0"``); empty means the lowest the model allows (``tasks/gemini/models.toml``).
    thinking: str = ""
    #: Output tokens a describe answer may use; an answer cut at this limit is retried once with 4×.
    max_output_tokens: int = Field(2048, ge=64)
    #: Free-tier defaults (the lowest figures reported, docs/GEMINI.md): 5 requests a minute, 20 a day.
    requests_per_minute: int = Field(5, ge=1)
    #: Requests per model per day, counted in the workdir across runs and reset at midnight Pacific
    #: time as Google resets it; the stage stops before spending more. 0: no daily limit.
    requests_per_day: int = Field(20, ge=0)
    concurrency: int = Field(2, ge=1)
    max_attempts: int = Field(4, ge=1)
    #: Delay before the first retry of a describe call; doubles per retry, capped at 30 s, with jitter.
    retry_delay_s: float = Field(2, ge=0)
    #: Seconds a run may spend waiting on 429 answers in all; past it the stage stops (assets stay pending).
    rate_limit_wait_s: float = Field(600, ge=0)
    timeout_s: float = Field(60, gt=0)
    language: str = "en"
    #: ``sync``: one describe call per asset, answered at once. ``batch``: the pending assets go to Gemini's
    #: Batch API at half the price, answered within 24 hours; each run (and the collect-batches deployment)
    #: collects the finished jobs first (docs/GEMINI.md, "Batch mode").
    mode: Literal["sync", "batch"] = "sync"
    #: Batch mode: times an asset is submitted again after its job expired, was cancelled or failed;
    #: after that it is parked as ``batch:<state>``.
    batch_resubmits: int = Field(2, ge=0)
    #: The Google project whose per-minute quota this key uses. Set, and with a Prefect server
    #: (``PREFECT_API_URL``), every process and machine on that server takes its describe calls from one
    #: server-side rate limit per project and model (tasks/orchestration/shared_quota.py); empty: the
    #: in-process limiter, which sees only its own process.
    quota_project: str = ""
    #: Clips: how finely Gemini sees each frame it samples (``media_resolution``): ``low`` (the default: a stock
    #: title and keywords need the subject, not its fine detail, and a low frame costs a fraction of a high one's
    #: tokens), ``medium`` or ``high`` (docs/INTERFACE.md, "Video clips").
    video_media_resolution: Literal["low", "medium", "high"] = "low"
    #: Clips up to this size (MB) go inline in the describe request; larger ones through the Files API (upload,
    #: wait until ACTIVE, describe, delete). Google documents inline requests under 100 MB; base64 makes a file
    #: 4/3 larger on the wire, so at most 74 MB.
    video_inline_max_mb: float = Field(50, gt=0, le=74)
    #: Seconds an uploaded clip may stay PROCESSING before the attempt fails (and is tried again).
    video_processing_wait_s: float = Field(300, gt=0)
    #: Seconds between two looks at an uploaded clip's state while it is PROCESSING.
    video_poll_s: float = Field(2, gt=0)
    #: Clips larger than this (MB) are not uploaded to the Files API: parked ``permanent:clip_too_large`` before a
    #: byte is sent. Google's video guide: "20GB (paid) / 2GB (free)" per file; its older guide "2 GB per file"
    #: (docs/GEMINI.md): the smaller figure, raise it with a paid key.
    video_upload_max_mb: float = Field(2000, gt=0)

    @model_validator(mode="after")
    def _shared_quota_needs_three_a_minute(self) -> "GeminiSettings":
        if self.quota_project and self.requests_per_minute < 3:
            raise ValueError("quota_project needs requests_per_minute of at least 3: the shared limit keeps one "
                             "call a minute back as its margin and needs two more to pace")
        return self


class AgencySettings(_Strict):
    #: Unset: the agency spec's ``enabled_by_default`` decides (tasks.agencies.catalog).
    enabled: bool | None = None
    #: ``file:///path``, ``ftp://user@host:port/dir``, ``ftps://…``, ``sftp://…``;
    #: empty means ``<workdir>/outbox/<agency>/``.
    target: str = ""
    #: Trust an unknown server on first use: SFTP accepts its host key and adds it to
    #: known_hosts, FTPS pins its certificate's SHA-256 in the workdir; a changed key or
    #: certificate is refused either way. Off: known_hosts / the system CAs (or ca_file) are checked.
    trust_unknown_host: bool = False
    #: FTPS only: a PEM file (certificate or CA bundle) to verify this agency's server against,
    #: instead of the system CAs.
    ca_file: str = ""
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
    #: Stop the agency for this run once this many files in a row failed for a cause every file
    #: meets alike (data connection unreachable, disk full or quota, writing not permitted); 0: never.
    stop_after_same_failures: int = Field(3, ge=0)
    #: Values for agency-specific CSV columns (e.g. Dreamstime ``Free``, ``W-EL``).
    csv_defaults: dict[str, str] = Field(default_factory=dict)
    #: Files sent to this agency per ``upload_cap_per`` at most (your level's cap, counted in the ledger; the
    #: rest stay pending until the next window: docs/AGENCIES.md, "Upload caps"). Unset: the spec's, if any.
    upload_cap: int | None = Field(None, ge=0)
    #: The cap's window, in UTC: ``day``, ``week`` (from Monday) or ``month``.
    upload_cap_per: Literal["day", "week", "month"] = "month"


class GenerateSettings(_Strict):
    seed: int = 0
    #: Prompts cycled through by the generator; empty uses the built-in demo list.
    prompts: list[str] = Field(default_factory=list)
    #: What Gemini's image model is asked for: ``512``, ``1K``, ``2K`` or ``4K`` (models.toml says which model makes
    #: which); 2K is about 4.2 MP, enough for Adobe's and Vecteezy's 4 MP.
    image_size: Literal["512", "1K", "2K", "4K"] = "2K"
    #: Landscape, as stock buyers favour; any ratio the model takes (docs/GEMINI.md).
    aspect_ratio: str = "3:2"
    #: What a generated clip is asked for (``run --clips N``): 1080p, as Adobe takes clips from 1920 wide;
    #: landscape, as Adobe asks ("avoid vertical or square framing"). The values the Interactions API's
    #: ``VideoResponseFormat`` names (google-genai 3.6.1); models.toml says which model makes which.
    clip_resolution: Literal["360p", "720p", "1080p", "4k"] = "1080p"
    clip_aspect_ratio: Literal["16:9", "9:16"] = "16:9"


class PackSettings(_Strict):
    preview_px: int = Field(1000, ge=64)
    thumbnail_px: int = Field(400, ge=32)
    jpeg_quality: int = Field(92, ge=50, le=100)
    strip_location: bool = True
    #: Two images whose perceptual hashes differ in at most this many of 64 bits are versions of one
    #: motif whatever else differs (docs/AGENCIES.md, "Similar content"); 0: only identical hashes.
    similar_max_distance: int = Field(8, ge=0, le=64)
    #: Your own (ingested) files carry no AI label unless this says they are AI-generated too
    #: (then they get the IPTC Digital Source Type trainedAlgorithmicMedia, as Gemini's images do).
    label_own_files_ai: bool = False
    #: Enlarge an image below the largest minimum of the run's agencies to that minimum (LANCZOS) instead of
    #: holding it back there. Off: Adobe asks contributors not to upsample (docs/AGENCIES.md). A list of
    #: agency names (``["dreamstime", "vecteezy"]``) enlarges for those only; the enlarged copy is then
    #: never sent to the others (docs/AGENCIES.md, "Upscaling").
    upscale_to_minimum: bool | list[str] = False

    def upscales(self, agency: str) -> bool:
        """Is an image below ``agency``'s minimum enlarged for it (``true``: for every agency; a list: those named)?"""
        chosen = self.upscale_to_minimum
        return chosen is True or (isinstance(chosen, list) and agency in chosen)


class ReviewSettings(_Strict):
    #: Pause each run before its uploads until the contributor approves or rejects the new assets.
    enabled: bool = False
    #: How long a run waits for the answer.
    timeout_hours: float = Field(24, gt=0)
    #: Then: ``hold`` sends nothing of what was waiting (the next run asks again), ``approve`` sends it all.
    on_timeout: Literal["hold", "approve"] = "hold"


class KeywordSettings(_Strict):
    """The contributor's own keyword rules, applied to every describer's answer (docs/AGENCIES.md, "Your keyword
    rules"; tasks/agencies/keyword_rules.py)."""

    #: Added to every asset's keywords (after its first ten, so the describer's most relevant stay first).
    required: list[str] = Field(default_factory=list)
    #: Never kept, whatever the describer wrote (whole keyword, case-insensitive).
    excluded: list[str] = Field(default_factory=list)
    #: Preferred word -> the synonyms written as it (``{"automobile" = ["car", "auto"]}``).
    vocabulary: dict[str, list[str]] = Field(default_factory=dict)
    #: Names of your own to treat as protected, beside the shipped list (tasks/agencies/names/protected.toml).
    protected_names: list[str] = Field(default_factory=list)
    #: Names of the shipped list you may use (your own brand, a place name the list holds as a trademark).
    allowed_names: list[str] = Field(default_factory=list)


def no_password_in_url(url: str) -> str:
    """``url`` unchanged; ValueError when it holds a password (files that name a database never hold one)."""
    if url and urlsplit(url).password is not None:
        raise ValueError("holds a password: keep it in ~/.pgpass or $PGPASSFILE of each machine that connects, "
                         "never in this file")
    return url


#: A database URL in a settings or accounts file: the password is for libpq's password file, not the URL.
UrlWithoutPassword = Annotated[str, AfterValidator(no_password_in_url)]


class DescriberSettings(_Strict):
    """``[describer]``: which describer writes the metadata (docs/INTERFACE.md, "Describers")."""

    #: ``gemini`` (the default: with a Gemini key; without one, offline), ``openai`` (any OpenAI-compatible
    #: Chat Completions endpoint: Ollama, LM Studio, vLLM, llama.cpp's server, OpenRouter, Gemini's own), ``offline``.
    provider: Literal["gemini", "openai", "offline"] = "gemini"
    #: The endpoint's base URL (``…/v1``); its key is ``OPENAI_API_KEY`` (none for a local server).
    base_url: str = "http://127.0.0.1:11434/v1"
    #: The model as the endpoint lists it (``GET /models``), checked before any call.
    model: str = ""
    #: The endpoint's quota: call starts per minute and calls at once (a local server: what it can take).
    requests_per_minute: int = Field(60, ge=1)
    concurrency: int = Field(1, ge=1)
    timeout_s: float = Field(120, gt=0)
    #: USD per million prompt and output tokens; empty: a local server's zero when the base URL is the machine's
    #: own (127.0.0.1, localhost), else unknown.
    usd_per_million_input: float | None = Field(None, ge=0)
    usd_per_million_output: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _openai_needs_model(self) -> "DescriberSettings":
        if self.provider == "openai" and not self.model.strip():
            raise ValueError('provider = "openai" needs model = "<a model the endpoint lists>"')
        return self


class Settings(_Strict):
    gemini: GeminiSettings = GeminiSettings()
    describer: DescriberSettings = DescriberSettings()
    agencies: dict[str, AgencySettings] = Field(default_factory=dict)
    generate: GenerateSettings = GenerateSettings()
    pack: PackSettings = PackSettings()
    review: ReviewSettings = ReviewSettings()
    keywords: KeywordSettings = KeywordSettings()
    #: Empty: the dead-letter store is ``<workdir>/dead_letter.db`` (SQLite). Else a studio's shared
    #: store, ``postgresql+psycopg://user@host:port/db``, without the password (libpq reads it from
    #: ~/.pgpass, $PGPASSFILE or $PGPASSWORD). ``$MICROSTOCK_DEAD_LETTER_URL`` overrides it.
    dead_letter_url: UrlWithoutPassword = ""
    #: The contributor account this workdir belongs to: its name in the shared dead-letter store.
    #: ``$MICROSTOCK_ACCOUNT`` overrides it.
    account: str = ""

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
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, exc) from exc


def invalid(origin: object, exc: ValidationError) -> ConfigError:
    """The one-line ConfigError for a file that does not validate: ``<origin>: <key>: <what is wrong>``."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    return ConfigError(f"{origin}: {key}: {msg}")
