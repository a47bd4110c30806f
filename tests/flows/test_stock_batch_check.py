"""The check before a run, inside the stock-batch flow (issue 33): a deployment or worker run, with no CLI before
it, is refused before any paid call exactly as ``microstock run`` is."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.stores.dead_letter_open import open_store
from tests.fakes.gemini import fake_gemini  # noqa: F401  (fake_gemini is a fixture)
from tests.stages.test_describe import gemini_key, make_assets  # noqa: F401  (gemini_key is a fixture)


def test_a_flow_run_with_retired_models_is_refused_before_any_call_as_the_cli_run_is(
        prefect_harness, fake_gemini, gemini_key, tmp_path):
    """Issue 13's "done when", as issue 33 made it: the stock-batch flow called as a deployment or a worker calls it
    (no CLI before it), with a retired image and describe model, is refused by the check before a run — nothing
    sent to Gemini, nothing generated, nothing parked — exactly as ``microstock run`` is (exit 2). Before issue 33
    only the CLI checked; such a run went on to stop its stages and end Incomplete."""
    from flows.stock_batch import stock_batch

    wd = Workdir(tmp_path / "w").prepare()
    make_assets(wd, ["mine_1.jpg", "mine_2.jpg", "mine_3.jpg"])  # the contributor's own files, already in assets/
    wd.config_file.write_text('[gemini]\nmodel = "gemini-2.5-flash"\nimage_model = "gemini-2.5-flash-image"\n'
                              "requests_per_minute = 6000\nconcurrency = 1\n")
    state = stock_batch(workdir=str(wd.root), count=2, return_state=True)
    assert state.is_failed() and state.name == "Failed", state
    refused = state.result(raise_on_failure=False)
    assert isinstance(refused, ConfigError) and "nothing was sent to Gemini" in refused.message
    assert "`gemini.model = gemini-2.5-flash` is retired" in refused.message
    assert fake_gemini.requests == []
    assert sorted(p.name for p in wd.assets.iterdir()) == ["mine_1.jpg", "mine_2.jpg", "mine_3.jpg"], "none made"
    assert not any(wd.sidecar(n).exists() for n in ["mine_1.jpg", "mine_2.jpg", "mine_3.jpg"])
    assert open_store(wd, Settings()).list() == []
