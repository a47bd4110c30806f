"""``microstock models`` and the model check of ``microstock run`` (issue 29), against the test Gemini server:
both end before Prefect starts, so these are plain CLI calls."""

from __future__ import annotations

import pytest

from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fixture)
from tests.fakes.gemini_models import model_resource


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    from flows.cli_common import console

    monkeypatch.setattr(console, "width", 300)  # the console was made when flows.cli_common was first imported


@pytest.fixture
def keyed(monkeypatch, fake_gemini):
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    return fake_gemini


def test_models_shows_the_table_beside_what_gemini_lists(run_microstock, keyed, workdir):
    keyed.models.listed["gemini-4-flash"] = model_resource("gemini-4-flash")
    del keyed.models.listed["gemini-3.6-flash"]
    result = run_microstock("models", "--workdir", str(workdir.root))
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
            for line in result.stdout.splitlines() if line.startswith("│")}
    assert rows["gemini-3.5-flash-lite (gemini.model)"][:4] == ["describe", "ga", "", "yes"]
    assert rows["gemini-3.5-flash-lite (gemini.model)"][5] == "1048576 / 65536"
    assert rows["gemini-3.6-flash"][3] == "no"
    assert rows["gemini-2.5-flash-image"][:4] == ["image", "retired", "gemini-3.1-flash-image", "no"]
    assert rows["gemini-4-flash"][1:4] == ["not in the table", "", "yes"]
    assert "gemini-embedding-001" not in rows  # lists no generateContent
    assert "Gemini's list of" in result.stdout and "asked now" in result.stdout
    assert "models.toml says gemini-3.6-flash can be used, but Gemini does not list it today" in result.stdout
    assert workdir.gemini_models.is_file()
    again = run_microstock("models", "--workdir", str(workdir.root))
    assert "kept in gemini-models.json" in again.stdout and len(keyed.models.calls) == 1


def test_models_without_a_key_shows_the_table_and_asks_nothing(run_microstock, fake_gemini, workdir):
    result = run_microstock("models", "--workdir", str(workdir.root))
    assert result.exit_code == 0 and "Gemini was not asked" in result.stdout
    assert fake_gemini.requests == [] and not workdir.gemini_models.exists()


@pytest.mark.parametrize("config, says", [
    ('[gemini]\nimage_model = "gemini-2.5-flash-image"\n',
     "`gemini.image_model = gemini-2.5-flash-image` is retired (tasks/gemini/models.toml): its replacement is "
     "gemini-3.1-flash-image"),
    ('[gemini]\nmodel = "gemini-3.9-flash-lite"\n',
     "`gemini.model = gemini-3.9-flash-lite` is not among the models Gemini lists for generateContent today"),
], ids=["retired in the table", "not listed"])
def test_run_refuses_a_retired_or_unlisted_model_before_any_paid_call(run_microstock, keyed, workdir, config, says):
    workdir.config_file.write_text(config)
    result = run_microstock("run", "--count", "2", "--workdir", str(workdir.root))
    assert result.exit_code == 2 and says in result.output and "nothing was sent to Gemini" in result.output
    assert [r for r in keyed.requests if r.method == "POST"] == []  # no generateContent, no batch
    assert list(workdir.assets.iterdir()) == []  # nothing ran
