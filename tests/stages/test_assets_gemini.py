"""Generation at a size agencies take: a model and size no agency takes refused before anything runs (the whole
run through the real SDK against the test Gemini server: tests/flows/test_stock_batch_gemini_images.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.core.errors import ConfigError
from tasks.core.settings import Settings
from tasks.gemini.models import check_generation
from tests.fakes.gemini import FAKE_KEY, answer_image, fake_gemini, image_or_metadata  # noqa: F401  (fixture)

FAST = "[gemini]\nrequests_per_minute = 6000\nrequests_per_day = 0\n"


def test_a_model_and_size_no_agency_takes_is_refused_before_anything_runs(tmp_path, monkeypatch, fake_gemini):
    lite = Settings.model_validate({"gemini": {"image_model": "gemini-3.1-flash-lite-image"}})
    with pytest.raises(ConfigError, match=r"generate.image_size = '2K': gemini-3.1-flash-lite-image makes only 1K"):
        check_generation(lite, ["adobe"])
    small = Settings.model_validate({"generate": {"image_size": "1K"}})
    with pytest.raises(ConfigError, match=r"choose generate.image_size = '2K'"):
        check_generation(small, ["adobe", "dreamstime"])
    check_generation(Settings.model_validate({"generate": {"image_size": "1K"}, "pack": {"upscale_to_minimum": True}}),
                     ["adobe"])  # upscaling chosen: not refused
    named = Settings.model_validate({"generate": {"image_size": "1K"}, "pack": {"upscale_to_minimum": ["vecteezy"]}})
    check_generation(named, ["adobe", "vecteezy"])  # enlarged for vecteezy: some agency of the run takes it
    with pytest.raises(ConfigError, match=r"choose generate.image_size = '2K'"):
        check_generation(named, ["adobe", "dreamstime"])  # upscaling names no agency of this run
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "microstock.toml").write_text('[gemini]\nimage_model = "gemini-3.1-flash-lite-image"\n')
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    result = CliRunner().invoke(app, ["run", "--count", "1", "--workdir", str(wd)])
    assert result.exit_code == 2 and "gemini-3.1-flash-lite-image makes only 1K" in result.output
    assert not (wd / "assets").exists()  # nothing ran
    # a prompt naming a protected name (issue 39): refused, named, and no call reaches the test Gemini server
    (wd / "microstock.toml").write_text('[generate]\nprompts = ["Sunflowers in a vase in the style of Van Gogh"]\n')
    result = CliRunner().invoke(app, ["run", "--count", "1", "--workdir", str(wd)])
    assert result.exit_code == 2 and "names 'van Gogh' (artist)" in result.output
    assert fake_gemini.requests == [] and not (wd / "assets").exists()
