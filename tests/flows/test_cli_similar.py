"""`microstock similar list|release`, run in-process with typer's runner on a packed workdir."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from tasks.core.workdir import Workdir
from tasks.stores.similar_risks import released
from tests.stages.test_pack_motifs import pack_and_upload
from tests.stages.test_similarity import add_renders

runner = CliRunner()


def microstock(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_release_keeps_the_decision_an_unknown_name_changes_nothing_and_list_shows_the_risk(tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 5))
    pack_and_upload(wd)  # the fourth version is held back for Adobe
    listed = microstock("similar", "list", "--workdir", str(wd.root))
    assert listed.exit_code == 0 and "held back" in listed.output and renders[3] in listed.output

    missing = microstock("similar", "release", "nope.jpg", "--workdir", str(wd.root))
    assert missing.exit_code == 1 and "no described asset nope.jpg" in missing.output and released(wd) == set()

    ok = microstock("similar", "release", renders[3], "--workdir", str(wd.root))
    assert ok.exit_code == 0 and f"{renders[3]}: released for adobe" in ok.output
    assert {a for a, _ in released(wd)} == {"adobe"}
    again = microstock("similar", "release", renders[3], "--workdir", str(wd.root))
    assert "nothing to release" in again.output
