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


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the variables that hold secrets (the Gemini keys, ``MICROSTOCK_<AGENCY>_PASSWORD``): for a
    process that outlives the command and needs none of them (the workdir's Prefect server)."""
    return {k: v for k, v in env.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")
            and not (k.startswith("MICROSTOCK_") and k.endswith("_PASSWORD"))}


def password_block_name(agency: str) -> str:
    """``microstock-<agency>-password``."""
    return f"microstock-{agency.lower()}-password"


def agency_password(agency: str) -> str | None:
    """The agency's password: ``$MICROSTOCK_<AGENCY>_PASSWORD``, else the Secret block, else None."""
    return os.environ.get(password_env_var(agency)) or secret_block(password_block_name(agency))


def gemini_api_key() -> str | None:
    """The Gemini key from the environment (``GOOGLE_API_KEY`` wins, as in the SDK)."""
    return os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY") or None


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
