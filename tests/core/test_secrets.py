"""Secrets: the environment first, then Prefect Secret blocks; one redactor."""

from __future__ import annotations

import pytest

from tasks.core import secrets


def test_password_from_environment_wins_without_asking_prefect(monkeypatch):
    monkeypatch.setenv("MICROSTOCK_VECTEEZY_PASSWORD", "from-env")
    monkeypatch.setattr(secrets, "secret_block", lambda name: pytest.fail("Prefect was asked"))
    assert secrets.agency_password("vecteezy") == "from-env"


def test_secret_blocks_are_used_when_the_environment_has_none(prefect_harness, monkeypatch):
    from prefect.blocks.system import Secret

    monkeypatch.delenv("MICROSTOCK_ADOBE_PASSWORD", raising=False)
    monkeypatch.delenv("MICROSTOCK_DREAMSTIME_PASSWORD", raising=False)
    Secret(value="from-block").save("microstock-adobe-password", overwrite=True)
    Secret(value="gm-key").save("gemini-api-key", overwrite=True)
    try:
        assert secrets.agency_password("adobe") == "from-block"
        assert secrets.agency_password("dreamstime") is None  # no such block: None, no exception
        assert secrets.gemini_key() == "gm-key"
        monkeypatch.setenv("GEMINI_API_KEY", "env-key")
        assert secrets.gemini_key() == "env-key"
    finally:  # the harness is shared by the session: a Gemini key left here would switch later runs to Gemini
        Secret.delete("microstock-adobe-password")
        Secret.delete("gemini-api-key")
    assert secrets.agency_password("adobe") is None


def test_an_unreachable_prefect_api_means_no_password_and_a_warning(monkeypatch, caplog):
    import prefect.blocks.system

    def unreachable(name):
        raise ConnectionError("api down")

    monkeypatch.setattr(prefect.blocks.system.Secret, "load", unreachable)
    monkeypatch.delenv("MICROSTOCK_ADOBE_PASSWORD", raising=False)
    assert secrets.agency_password("adobe") is None
    assert "microstock-adobe-password" in caplog.text and "ConnectionError" in caplog.text


def test_redact_cuts_given_secrets_the_environment_key_and_anything_key_shaped(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "env-secret-value")
    text = "pw=hunter2 env=env-secret-value key=abc123 AIza" + "x" * 30
    cleaned = secrets.redact(text, "hunter2")
    assert "hunter2" not in cleaned and "env-secret-value" not in cleaned
    assert "abc123" not in cleaned and "AIza" not in cleaned and cleaned.count("***") == 4


def test_redact_finds_a_secret_in_any_case_and_percent_encoded(monkeypatch):
    """Regression: a server echoing the password in another case, or a URL carrying it percent-encoded,
    reached the terminal, the summary and Prefect's database (exact-case replace only)."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    secret = "DreamPW-kx27/Secret @1"
    text = ("530 Login incorrect with password dreampw-kx27/secret @1; "
            "url=ftp://me:DreamPW-kx27%2FSecret%20%401@host form=dreampw-kx27%2fsecret+%401")
    cleaned = secrets.redact(text, secret)
    assert "kx27" not in cleaned.lower(), cleaned
    assert cleaned.count("***") == 3
