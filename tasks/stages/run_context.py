"""What one run knows, built once: :class:`RunContext`.

A flow (or a command) opens it from the workdir and the chosen config file;
every stage takes it. Nothing below it reads a config file or the
environment again: the settings, the agency catalog and the agencies chosen,
the dead-letter store (opened once, from *these* settings: a shared
``dead_letter_url`` in ``--config other.toml`` is the store this run parks
into, unless the environment names a deployment's, applied by :meth:`RunContext.open`:
:func:`~tasks.stores.dead_letter_open.store_settings`), the Gemini key (resolved once: the environment,
else — in a run :meth:`RunContext.open` opened — the ``gemini-api-key`` Secret block, read at most once),
the clock, and where the run's events go (:class:`~tasks.observe.events.Events`: sent to Prefect from a run
:meth:`RunContext.open` opened, kept in memory in a context made directly, as a plain stage call's).

:meth:`RunContext.check` is the check before a run — targets, the configured
models, what the image model can make — made inside the flow, so a
deployment or worker run is refused before any paid call exactly as
``microstock run`` is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tasks.agencies.catalog import Catalog, catalog
from tasks.agencies.protected import ProtectedNames, check_prompts
from tasks.core.ownership import check_workdir
from tasks.core.secrets import gemini_api_key, gemini_key, openai_api_key
from tasks.core.settings import Settings, load_settings
from tasks.core.workdir import Workdir, default_workdir
from tasks.observe.events import Events, MemoryEvents, PrefectEvents
from tasks.stores.dead_letter import DeadLetterStore
from tasks.stores.dead_letter_open import open_store, store_settings


@dataclass
class RunContext:
    """One run's workdir, settings, agencies, dead-letter store, Gemini key, clock and events (see the module).

    Made directly in tests (``RunContext(wd, settings)``: the shipped agencies the settings enable, the key
    from the environment, the events kept in :attr:`events`: no Prefect at all); :meth:`open` in flows and
    commands.
    """

    wd: Workdir
    settings: Settings = field(default_factory=Settings)
    #: The agencies this run takes assets to (None: every agency the settings enable).
    chosen: list[str] | None = None
    #: Unix seconds, for what the run records (the dead-letter store's times).
    clock: Callable[[], float] = time.time
    #: The dead-letter store when one is handed in (a test's memory store); else opened on first use.
    given_store: DeadLetterStore | None = None
    #: Where the stages' events go: Prefect for a run :meth:`open` opened; else kept in memory (``events.sent``).
    events: Events = field(default_factory=MemoryEvents)
    #: Where the Gemini key is read, once: the environment; for a run :meth:`open` opened, the environment, else
    #: the ``gemini-api-key`` Secret block.
    key_from: Callable[[], str | None] = gemini_api_key

    @classmethod
    def open(cls, workdir: str | Path | None = None, config: str | Path | None = None,
             agencies: list[str] | None = None) -> "RunContext":
        """The context of a run of ``workdir`` (empty: $MICROSTOCK_WORKDIR, else ./microstock-data) with
        ``config`` (empty: the workdir's microstock.toml), limited to ``agencies`` when given.

        ConfigError (one line naming the file and the key) for settings that do not validate, a broken agency
        spec or an unknown agency — before anything is written; and (one line naming the path and why) for a
        workdir, config file or agency spec another user could change, before anything of it is read
        (:func:`~tasks.core.ownership.check_workdir`: a run created through the API is refused as the command is).
        """
        wd = Workdir(Path(workdir) if workdir else default_workdir())
        check_workdir(wd.root, Path(config) if config else None)
        settings = store_settings(load_settings(wd.config_path(config)), os.environ)
        return cls(wd, settings, catalog(wd).enabled(settings, agencies), events=PrefectEvents(), key_from=gemini_key)

    def __post_init__(self) -> None:
        if self.chosen is None:
            self.chosen = self.catalog.enabled(self.settings)

    def __repr__(self) -> str:  # shown by Prefect in parameter reprs: never the key
        return f"RunContext({self.wd.root}, agencies={self.agencies})"

    @property
    def agencies(self) -> list[str]:
        """The agencies of this run, in list order."""
        return list(self.chosen or [])

    @cached_property
    def catalog(self) -> Catalog:
        """The workdir's agencies: the shipped specs and its own ``agencies/*.toml``."""
        return catalog(self.wd)

    @property
    def store(self) -> DeadLetterStore:
        """The dead-letter store of these settings, opened on first use (:func:`open_store`): ConfigError or
        StoreUnavailable when it cannot be, raised again at the next use."""
        if self.given_store is None:
            self.given_store = open_store(self.wd, self.settings, self.clock)
        return self.given_store

    @cached_property
    def gemini_key(self) -> str | None:
        """The Gemini key (read once a run, :attr:`key_from`): ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``, else in a run
        :meth:`open` opened the ``gemini-api-key`` Secret block; None without one (the offline describer and
        generator)."""
        return self.key_from()

    @cached_property
    def openai_key(self) -> str | None:
        """The key of the OpenAI-compatible endpoint (``[describer] provider = "openai"``), read once a run:
        ``OPENAI_API_KEY``; None (a local server needs none)."""
        return openai_api_key()

    def check(self, generates: bool, key: str | None, clips: bool = False) -> list[str]:
        """The check before a run, before any paid call: ConfigError for a target URL that cannot be used, a local
        target folder another user could change (the outbox too: tasks/core/ownership.py), a configured model that
        is retired or not listed today, an image model and size no chosen agency takes, a generation prompt that
        names a protected name (tasks/agencies/protected.py); else the lines to show (the model list unreadable,
        the table disagreeing with it).

        ``generates``: the run makes images with Gemini (a count, no source folder), so the image model is
        checked too; ``clips``: it makes clips (``--clips``), so the clip model and resolution are. ``key``: the
        flow gives the run's (:attr:`gemini_key`); the CLI, before Prefect is set up, the environment's alone,
        so no Secret block is read there (a block's key is checked in the flow).
        Without a key only the targets and the prompts are checked: nothing is sent to Gemini.
        """
        from tasks.transports.targets import check_targets  # the transports' libraries load only for a run

        check_targets(self.settings, self.agencies, self.wd)
        if generates or clips:  # offline too: the demo image's or clip's title would be the prompt
            check_prompts(self.settings.generate.prompts, ProtectedNames.of(self.settings.keywords))
        if self.settings.describer.provider == "openai":  # its model listed by the endpoint, before any chat call
            from tasks.openai_compat.client import check_listed

            check_listed(self.settings.describer, self.openai_key)
        if not key:
            return []
        from tasks.gemini.models import check_clip_settings, check_generation
        from tasks.gemini.served import check_models

        if generates:
            check_generation(self.settings, self.agencies, self.wd)
        if clips:
            check_clip_settings(self.settings.gemini.clip_model, self.settings.generate.clip_resolution)
        uses = ("describe",) + (("image",) if generates else ()) + (("clip",) if clips else ())
        return check_models(self.wd, self.settings.gemini, key, uses).notes
