"""Secrets at the moment they are needed: the environment first, then a Prefect Secret block.

Nothing here logs, stores or returns a secret anywhere but to its caller.
The Prefect API is asked only when the environment has no answer, so a
contributor who sets environment variables never waits for a server.
"""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import quote, quote_plus

logger = logging.getLogger("microstock.secrets")


def password_env_var(agency: str) -> str:
    """``MICROSTOCK_<AGENCY>_PASSWORD``."""
    return f"MICROSTOCK_{agency.upper()}_PASSWORD"


#: What the workdir's Prefect server (a process that outlives the command) keeps of the command's environment,
#: each for a reason; nothing else reaches it (no agency password, no API key, no unrelated FTP_PASS):
#: ``PATH`` (it finds its programs), ``HOME`` (Prefect and Python expand ``~``), ``XDG_STATE_HOME`` (its port's
#: lock beside the user's list of servers, :mod:`tasks.orchestration.server_port`), ``LANG``/``LC_*`` (text
#: encoding), ``TZ`` (its timestamps), ``TMPDIR``/``TMP``/``TEMP`` (its temporary files), ``PYTHON*`` and
#: ``VIRTUAL_ENV`` (the same Python and modules as the command), ``LD_LIBRARY_PATH`` (a Python built against
#: libraries outside the system's), ``PREFECT_*`` (its settings: database, batching, services).
SERVER_ENV_NAMES = ("PATH", "HOME", "XDG_STATE_HOME", "LANG", "TZ", "TMPDIR", "TMP", "TEMP", "VIRTUAL_ENV",
                    "LD_LIBRARY_PATH")
SERVER_ENV_PREFIXES = ("LC_", "PYTHON", "PREFECT_")
#: Prefect's settings that a server must not inherit: a client's credentials and address (its own auth string
#: is given to it from the workdir's auth file, never taken from the command).
SERVER_ENV_DENIED = ("PREFECT_API_KEY", "PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING",
                     "PREFECT_API_URL")


def server_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` the workdir's Prefect server needs (:data:`SERVER_ENV_NAMES`, an allow-list), for a
    process that outlives the command and needs none of its secrets."""
    return {k: v for k, v in env.items() if (k in SERVER_ENV_NAMES or k.startswith(SERVER_ENV_PREFIXES))
            and k not in SERVER_ENV_DENIED}


def password_block_name(agency: str) -> str:
    """``microstock-<agency>-password``."""
    return f"microstock-{agency.lower()}-password"


def agency_password(agency: str) -> str | None:
    """The agency's password: ``$MICROSTOCK_<AGENCY>_PASSWORD``, else the Secret block, else None."""
    return os.environ.get(password_env_var(agency)) or secret_block(password_block_name(agency))


def gemini_api_key() -> str | None:
    """The Gemini key from the environment (``GOOGLE_API_KEY`` wins, as in the SDK)."""
    return os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY") or None


def openai_api_key() -> str | None:
    """The key of an OpenAI-compatible endpoint: ``OPENAI_API_KEY`` (as the ``openai`` SDK reads it); None (a local
    server needs none)."""
    return os.environ.get("OPENAI_API_KEY") or None


def gemini_key() -> str | None:
    """The Gemini API key: ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``, else the ``gemini-api-key`` block."""
    return gemini_api_key() or secret_block("gemini-api-key")


def secret_block(name: str) -> str | None:
    """The value of the Prefect Secret block ``name``; None when it does not exist or cannot be read.

    A missing block is normal (the secret may live elsewhere). Any other
    failure — no reachable Prefect API, a block of another type — is logged
    by its type only, never with the value, and also answers None.
    """
    try:
        from prefect.blocks.system import Secret

        value = Secret.load(name).get()
    except ValueError:  # Prefect: "Unable to find block document named ..."
        return None
    except Exception as exc:  # the API is down or refuses: say so, carry on without
        logger.warning("could not read Prefect Secret block %r (%s)", name, type(exc).__name__)
        return None
    return str(value) if value else None


#: Google API keys and ``key=…`` query parameters, wherever they turn up in a service's text.
KEY_SHAPED = re.compile(r"AIza[0-9A-Za-z_\-]{20,}|(?i:key=)[^&\s\"']+")


def redact(text: str, *secrets: str | None, mark: str = "***") -> str:
    """``text`` with each given secret, the Gemini key of the environment and anything key-shaped
    replaced by ``mark``.

    The one redaction of the project: messages that may reach a log, an
    exception shown to a user, an artifact or the dead-letter store pass here.
    A secret is found in any letter case (a server that echoes it upper- or
    lower-cased) and percent-encoded (``%40`` for ``@``, ``+`` for a space,
    as in a URL or a form), encoded in either hex case.
    """
    for secret in (*secrets, gemini_api_key()):
        if secret:
            text = _secret_pattern(secret).sub(mark, text)
    return KEY_SHAPED.sub(mark, text)


def _secret_pattern(secret: str) -> re.Pattern[str]:
    """A case-insensitive pattern for ``secret`` as written and in its percent-encoded forms, longest first."""
    forms = sorted({secret, quote(secret, safe=""), quote_plus(secret, safe="")}, key=len, reverse=True)
    return re.compile("|".join(re.escape(f) for f in forms), re.IGNORECASE)
