"""The agencies are the spec files found: listed in their rank order, checked against the settings."""

from __future__ import annotations

import pytest

from tasks.agencies.catalog import agency_names, enabled_agencies
from tasks.agencies.spec import load_spec, shipped_spec_names
from tasks.core.errors import ConfigError
from tasks.core.settings import AgencySettings, Settings


def test_every_spec_file_is_an_agency_in_rank_order():
    names = agency_names()
    assert set(names) == shipped_spec_names()
    assert [load_spec(n).rank for n in names] == sorted(load_spec(n).rank for n in names)


def test_enabled_agencies_follow_the_settings_and_the_choice():
    settings = Settings(agencies={"vecteezy": AgencySettings(enabled=False)})
    assert "vecteezy" not in enabled_agencies(settings)
    assert enabled_agencies(settings, ["adobe"]) == ["adobe"]


def test_an_agency_without_a_spec_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="agencies.istock: unknown agency"):
        enabled_agencies(Settings(agencies={"istock": AgencySettings()}))
    with pytest.raises(ConfigError, match="unknown agency 'istock'"):
        enabled_agencies(Settings(), ["istock"])
