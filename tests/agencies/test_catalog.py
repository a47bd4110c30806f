"""Which agencies exist: the shipped specs plus the workdir's own, a broken spec stopping the run in one line."""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

import pytest

from tasks.agencies.catalog import agency_names, catalog, enabled_agencies
from tasks.core.errors import ConfigError
from tasks.core.settings import AgencySettings, Settings
from tasks.stores.ledger import Ledger
from tests.fakes.ledger import ledger_entries

SHIPPED = Path(__file__).parents[2] / "tasks" / "agencies"
SHA = "ab" * 32


def own_spec(wd, name: str, text: str) -> Path:
    wd.agencies.mkdir(exist_ok=True)
    path = wd.agencies / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def shipped(name: str) -> str:
    return (SHIPPED / f"{name}.toml").read_text(encoding="utf-8")


def test_the_workdirs_own_spec_is_an_agency_and_one_with_a_shipped_name_replaces_it(workdir):
    own_spec(workdir, "mystock", shipped("vecteezy"))
    own_spec(workdir, "adobe", shipped("adobe").replace('display_name = "Adobe Stock"', 'display_name = "My Adobe"'))
    known = catalog(workdir)
    assert "mystock" in known.names and "mystock" not in agency_names()  # the shipped list is untouched
    assert known.spec("mystock").header_row() == ["Filename", "Title", "Description", "Keywords"]
    assert known.spec("adobe").display_name == "My Adobe" and catalog().spec("adobe").display_name == "Adobe Stock"
    assert known.notes == ["agencies/adobe.toml in the workdir replaces the shipped adobe spec"]
    assert catalog().notes == []


def test_an_edited_spec_is_read_again(workdir):
    path = own_spec(workdir, "mystock", shipped("vecteezy"))
    assert catalog(workdir).spec("mystock").display_name == "Vecteezy"
    path.write_text(shipped("vecteezy").replace('"Vecteezy"', '"Mine, edited"'), encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert catalog(workdir).spec("mystock").display_name == "Mine, edited"


BROKEN = {
    # what the contributor got wrong → the key the one-line error names
    "unknown key": (shipped("vecteezy").replace("rank = 2", "rank = 2\ncolour = 3"), "colour: unknown key"),
    "missing header": ("\n".join(line for line in shipped("vecteezy").splitlines() if not line.startswith("header =")),
                       "header"),
    "a header the columns do not spell": (shipped("vecteezy").replace("Filename,Title,", "Filename,Name,"),
                                          "do not spell the header"),
    "a column rule with no table": (shipped("shutterstock").split("[categories]")[0]
                                    + "[transport]\nprotocol = \"web\"\n", "needs a [categories] table"),
    "a table no column uses": (shipped("adobe").replace('[[columns]]\nname = "Category"\nsource = "category"\n'
                                                        'index = 1\n', "")
                               .replace("Keywords,Category,Releases", "Keywords,Releases"),
                               "no column has source 'category'"),
    "a limit of the wrong type": (shipped("vecteezy").replace("max_chars = 200", 'max_chars = "two hundred"'),
                                  "title.max_chars"),
    "a flag default the dialect cannot spell": (shipped("shutterstock").replace('default = "No"', 'default = "0"', 1),
                                                "neither csv.flag_yes nor csv.flag_no"),
    "a name key": ('name = "x"\n' + shipped("vecteezy"), "name: not a key"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_spec_is_one_line_naming_the_file_and_the_key(workdir, case):
    text, key = BROKEN[case]
    own_spec(workdir, "mine", text)
    with pytest.raises(ConfigError) as caught:
        catalog(workdir)
    message = caught.value.message
    assert "\n" not in message and message.startswith("agencies/mine.toml in ") and key in message, message


def test_an_agency_name_must_fit_a_file_a_variable_and_a_block_name(workdir):
    own_spec(workdir, "My-Stock", shipped("vecteezy"))
    with pytest.raises(ConfigError, match="lower-case letters or digits.*'My-Stock'"):
        catalog(workdir)


def test_a_broken_spec_stops_microstock_run_before_anything_is_written(run_microstock, tmp_path):
    root = tmp_path / "work"
    (root / "agencies").mkdir(parents=True)
    (root / "agencies" / "mine.toml").write_text(BROKEN["unknown key"][0], encoding="utf-8")
    result = run_microstock("run", "--count", "1", "--workdir", str(root))
    assert result.exit_code == 2
    assert "agencies/mine.toml in" in result.output and "colour: unknown key" in result.output
    assert sorted(p.name for p in root.iterdir()) == ["agencies"]  # no assets/, csv/, ledger …


def test_agencies_disabled_by_default_run_when_named_or_enabled(workdir):
    assert enabled_agencies(Settings(), wd=workdir) == ["adobe", "vecteezy", "dreamstime"]
    assert enabled_agencies(Settings(), ["shutterstock", "alamy"], workdir) == ["shutterstock", "alamy"]
    on = Settings(agencies={"pond5": AgencySettings(enabled=True), "adobe": AgencySettings(enabled=False)})
    assert enabled_agencies(on, wd=workdir) == ["vecteezy", "dreamstime", "pond5"]
    assert enabled_agencies(on, ["adobe", "pond5"], workdir) == ["pond5"]  # switched off in the config: stays off
    with pytest.raises(ConfigError, match="unknown agency 'mystock'"):
        enabled_agencies(Settings(), ["mystock"], workdir)
    own_spec(workdir, "mystock", shipped("pond5"))  # ships disabled: a copy is disabled too until named
    assert "mystock" not in enabled_agencies(Settings(), wd=workdir)
    assert enabled_agencies(Settings(), ["mystock"], workdir) == ["mystock"]


def test_the_ledger_knows_the_agencies_of_its_workdir(workdir):
    line = f"2026-11-30T00:00:00Z\tmystock\ta.jpg\t{SHA}\t/a.jpg\n"
    workdir.ledger.write_text(line)
    before = Ledger(workdir.ledger).read()  # no spec yet: an unknown agency, reported, not counted
    assert before.problems and "unknown agency 'mystock'" in before.problems[0][1]
    own_spec(workdir, "mystock", shipped("vecteezy"))
    after = Ledger(workdir.ledger).read()
    assert after.problems == [] and after.is_done("mystock", SHA)
    Ledger(workdir.ledger).record("mystock", "b.jpg", "cd" * 32, "/b.jpg")
    assert [e.filename for e in ledger_entries(workdir.ledger)] == ["a.jpg", "b.jpg"]


def test_a_copied_spec_runs_as_a_new_agency_with_no_code_change(prefect_harness, run_microstock, tmp_path):
    """The issue's "done when": copy a shipped spec under a new name, run it, see its CSV, outbox and ledger."""
    root = tmp_path / "work"
    (root / "agencies").mkdir(parents=True)
    shutil.copy(SHIPPED / "dreamstime.toml", root / "agencies" / "mystock.toml")
    shutil.copy(SHIPPED / "adobe.toml", root / "agencies" / "adobe.toml")  # replaces the shipped one: said so

    def microstock(*args: str):
        return run_microstock(*args, "--workdir", str(root))

    run = microstock("run", "--count", "2", "--agency", "mystock")
    assert run.exit_code == 0, run.output[-3000:]
    assert "agencies/adobe.toml in the workdir replaces the shipped adobe spec" in run.stdout
    rows = list(csv.reader(io.StringIO((root / "csv" / "mystock.csv").read_text(encoding="utf-8"), newline="")))
    assert ",".join(rows[0]) == ("Filename,Image Name,Description,Category 1,Category 2,Category 3,keywords,"
                                 "Free,W-EL,P-EL,SR-EL,SR-Price,Editorial,MR doc Ids,Pr Docs")
    assert len(rows) == 3
    sent = sorted(p.name for p in (root / "outbox" / "mystock").iterdir())
    assert sent == sorted(row[0] for row in rows[1:])
    assert not (root / "csv" / "dreamstime.csv").exists()  # only the agency named
    assert {e.agency for e in ledger_entries(root / "uploads.ledger")} == {"mystock"}
    status = microstock("ledger", "status")
    assert status.exit_code == 0, status.output
    (line,) = [line for line in status.stdout.splitlines() if "mystock" in line]
    assert [cell.strip() for cell in line.split("│")[1:5]] == ["mystock", "2", "0", "0"], status.stdout


def test_upscaling_for_an_unknown_agency_is_refused_before_anything_runs():
    settings = Settings.model_validate({"pack": {"upscale_to_minimum": ["dreamstime", "istock"]}})
    with pytest.raises(ConfigError, match=r"pack.upscale_to_minimum: unknown agency 'istock'"):
        enabled_agencies(settings)
    assert settings.pack.upscales("dreamstime") and not settings.pack.upscales("adobe")
    assert Settings.model_validate({"pack": {"upscale_to_minimum": True}}).pack.upscales("adobe")
    assert not Settings().pack.upscales("adobe")
