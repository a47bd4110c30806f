"""The ``batch-assets`` table: one row per asset, with the right cell at describe and at each agency."""

from __future__ import annotations

import calendar
from pathlib import Path

from tasks.core.records import Asset, Metadata, write_sidecar
from tasks.core.reports import AgencyCsv, AgencyUpload, CsvReport, DescribeReport, Gathered, PackReport, Problem
from tasks.core.workdir import Workdir
from tasks.observe.artifacts import dead_letter_rows
from tasks.observe.batch_assets import MAX_ASSET_ROWS, add_removed_column, asset_rows, assets_description
from tasks.stores.dead_letter import ParkedJob

#: 2026-11-29 06:51:00 UTC
PARKED_AT = calendar.timegm((2026, 11, 29, 6, 51, 0))


def asset(name: str) -> Asset:
    return Asset(name=name, asset_id=name[0] * 64, path=Path("/w/assets") / name)


def job(name: str, error_class: str) -> ParkedJob:
    return ParkedJob(job_id=name[0] * 64, payload={"asset": name}, model="gemini-2.5-flash", error_class=error_class,
                     error_message="the model refused", attempts=1, first_seen=PARKED_AT, last_seen=PARKED_AT + 60,
                     status="parked", asset_name=name)


def batch():
    """A batch where each asset meets a different fate, for Adobe and Dreamstime."""
    gathered = Gathered(assets=[asset(n) for n in ("beach.png", "cat.jpg", "dune.jpg", "elk.jpg", "fog.jpg")],
                        rejected={"broken.jpg": "not an image (cannot identify image file)"})
    described = DescribeReport(described=["beach.png", "elk.jpg"], already=["cat.jpg"],
                               parked={"dune.jpg": "blocked:SAFETY"}, pending=["fog.jpg"])
    csvs = CsvReport(
        agencies={"adobe": AgencyCsv(agency="adobe", display_name="Adobe Stock", rows=2, files=["/w/csv/adobe.csv"],
                                     accepted=["beach.png", "cat.jpg"]),
                  "dreamstime": AgencyCsv(agency="dreamstime", display_name="Dreamstime", rows=2,
                                          files=["/w/csv/dreamstime.csv"], accepted=["beach.png", "elk.jpg"],
                                          csv_upload="ftp")},
        problems=[Problem(agency="adobe", asset="elk.jpg", rule="keywords.min_count", message="4 keywords, at least 5"),
                  Problem(agency="dreamstime", asset="cat.jpg", rule="image", message="smaller than 3 MP")])
    packed = PackReport(zip_path=Path("/w/packs/batch-2026-11-30.zip"))
    uploads = {"adobe": AgencyUpload(uploaded=["beach.jpg"], already=["cat.jpg"]),
               "dreamstime": AgencyUpload(failed={"beach.jpg": "timeout after 3 attempt(s)"}, uploaded=["elk.jpg"])}
    return gathered, described, csvs, packed, uploads


def test_one_row_per_asset_with_its_describe_result_and_each_agency():
    gathered, described, csvs, packed, uploads = batch()
    rows = {r["asset"]: r for r in asset_rows(gathered, described, csvs, packed, uploads,
                                              [job("dune.jpg", "blocked:SAFETY")])}
    assert list(rows) == ["beach.png", "cat.jpg", "dune.jpg", "elk.jpg", "fog.jpg", "broken.jpg"]
    assert rows["beach.png"] == {"asset": "beach.png", "describe": "described", "adobe": "uploaded",
                                 "dreamstime": "failed, left pending: timeout after 3 attempt(s)"}
    assert rows["cat.jpg"] == {"asset": "cat.jpg", "describe": "described (earlier run)", "adobe": "already there",
                               "dreamstime": "held back (image): smaller than 3 MP"}
    assert rows["dune.jpg"] == {"asset": "dune.jpg", "describe": "parked: blocked:SAFETY since 2026-11-29 06:51 UTC",
                                "adobe": "not tried: not described (parked)",
                                "dreamstime": "not tried: not described (parked)"}
    assert rows["elk.jpg"]["adobe"] == "held back (keywords.min_count): 4 keywords, at least 5"
    assert rows["elk.jpg"]["dreamstime"] == "uploaded"
    assert rows["fog.jpg"] == {"asset": "fog.jpg", "describe": "pending",
                               "adobe": "not tried: not described yet (pending)",
                               "dreamstime": "not tried: not described yet (pending)"}
    assert rows["broken.jpg"]["adobe"] == "not tried: rejected"
    assert rows["broken.jpg"]["describe"] == "rejected: not an image (cannot identify image file)"


def test_review_decisions_show_in_the_describe_cell_and_hold_the_asset_back():
    gathered, described, csvs, packed, uploads = batch()
    csvs.problems.append(Problem(agency="adobe", asset="elk.jpg", rule="review", message="waiting for review"))
    rows = {r["asset"]: r for r in asset_rows(gathered, described, csvs, packed, uploads, [],
                                              {"beach.png": "rejected in review (2026-11-30T02:10:00+00:00)",
                                               "elk.jpg": "waiting for review"})}
    assert rows["beach.png"]["describe"] == "rejected in review (2026-11-30T02:10:00+00:00)"
    assert rows["elk.jpg"]["describe"] == "waiting for review"
    assert rows["elk.jpg"]["adobe"].startswith("held back (keywords.min_count)")  # the first problem found wins
    assert rows["cat.jpg"]["describe"] == "described (earlier run)"


def test_an_agency_without_a_csv_holds_back_every_described_asset():
    gathered, described, csvs, packed, uploads = batch()
    csvs.problems.append(Problem(agency="adobe", asset="", rule="csv_defaults", message="settings invalid"))
    rows = {r["asset"]: r for r in asset_rows(gathered, described, csvs, packed, uploads, [])}
    assert rows["beach.png"]["adobe"] == "held back (csv_defaults): settings invalid"
    assert rows["dune.jpg"]["describe"] == "parked: blocked:SAFETY", "without the store, the class the stage saw"


def test_the_description_gives_the_zip_the_portal_steps_and_both_ways_to_replay():
    gathered, described, csvs, packed, uploads = batch()
    parked = [job("dune.jpg", "blocked:SAFETY"), job("gull.jpg", "exhausted:503")]
    text = assets_description("2 described · 1 parked · 2 uploaded", 6, csvs, packed, parked, deployed=True)
    assert "`/w/packs/batch-2026-11-30.zip`" in text
    assert "Adobe Stock: upload /w/csv/adobe.csv in the contributor portal" in text
    assert "Dreamstime" not in text, "its CSV goes by FTP: nothing to do by hand"
    assert "`replay-dead-letters` deployment" in text and "`microstock replay --apply`" in text
    assert "1 of them (`blocked:SAFETY`) will fail again if replayed unchanged" in text
    own = assets_description("h", 6, csvs, packed, parked, deployed=False)  # the workdir's own server: no deployments
    assert "`microstock replay --apply`" in own and "Custom run" not in own, "no UI path that leads nowhere"
    unknown = assets_description("h", 6, csvs, packed, parked)
    assert "`microstock replay --apply`; or, on a server under `microstock serve`, from the UI: " in unknown
    assert "first" not in assets_description("h", MAX_ASSET_ROWS, csvs, packed, [])
    assert f"The first {MAX_ASSET_ROWS} of 5000 assets" in assets_description("h", 5000, csvs, packed, [])


def test_parked_jobs_show_when_they_were_parked_not_for_how_long():
    (row,) = dead_letter_rows([job("dune.jpg", "permanent:400")])
    assert row["parked since"] == "2026-11-29 06:51 UTC" and row["last seen"] == "2026-11-29 06:52 UTC"
    assert row["replay"] == "fails again unless changed first"
    assert dead_letter_rows([job("gull.jpg", "exhausted:503")])[0]["replay"] == "may recover"


def test_a_stopped_agency_says_in_each_cell_why_and_the_next_steps_fix_it_first():
    """Regression (issue 26): every cell of a stopped agency said a bare "not tried", and the next steps still said
    to upload its CSV "once the images have arrived"."""
    gathered, described, csvs, packed, _ = batch()
    uploads = {"adobe": AgencyUpload(not_tried=["beach.jpg"], already=["cat.jpg"],
                                     stopped="cannot connect after 3 attempts: connection refused"),
               "dreamstime": AgencyUpload(uploaded=["elk.jpg"])}
    rows = {r["asset"]: r for r in asset_rows(gathered, described, csvs, packed, uploads, [],
                                              {"elk.jpg": "waiting for review"})}
    assert rows["beach.png"]["adobe"] == "left pending: adobe stopped (cannot connect after 3 attempts: connection " \
                                        "refused)"
    assert rows["beach.png"]["dreamstime"] == "not tried: not in dreamstime's uploads this run"
    assert rows["elk.jpg"]["adobe"].startswith("held back (keywords.min_count)")
    no_dreamstime = {r["asset"]: r for r in asset_rows(gathered, described, csvs, packed, {"adobe": uploads["adobe"]},
                                                       [])}
    assert no_dreamstime["elk.jpg"]["dreamstime"] == "not tried: nothing was sent to dreamstime this run"
    assert all(not cell.endswith("not tried") for row in rows.values() for cell in row.values())
    text = assets_description("h", 6, csvs, packed, [], {"adobe": "cannot connect after 3 attempts: refused"})
    steps = text.split("Next steps:")[1]
    assert steps.index("Fix first — adobe stopped: cannot connect") < steps.index("Adobe Stock: upload")
    assert "once the images have arrived" not in text
    assert "only after the run that sends its images" in text


def test_the_dead_letter_table_has_a_key_per_workdir_and_says_nothing_parked_plainly(tmp_path):
    import re

    from tasks.core.workdir import Workdir
    from tasks.observe.artifacts import dead_letter_key, dead_letters_description

    one, two = Workdir(tmp_path / "a" / "Micro Stock_Data"), Workdir(tmp_path / "b" / "Micro Stock_Data")
    assert dead_letter_key(one) != dead_letter_key(two)
    assert re.fullmatch(r"dead-letter-jobs-micro-stock-data-[0-9a-f]{8}", dead_letter_key(one))
    assert dead_letters_description([], one) == f"Nothing parked in `{one.root}`."
    assert "replay with" in dead_letters_description([job("dune.jpg", "exhausted:503")], one)


def test_keywords_the_rules_removed_get_a_column_only_once_some_asset_lost_one(tmp_path):
    wd = Workdir(tmp_path).prepare()
    write_sidecar(wd.sidecar("cat.jpg"), asset("cat.jpg"), Metadata(title="t", description="d", keywords=["cat"]))
    rows = [{"asset": "cat.jpg", "describe": "described"}, {"asset": "fog.jpg", "describe": "pending"}]
    add_removed_column(rows, wd, ["cat.jpg", "fog.jpg"])
    assert all("removed keywords" not in r for r in rows)  # nothing removed: the table keeps its columns
    write_sidecar(wd.sidecar("beach.png"), asset("beach.png"), Metadata(
        title="t", description="d", keywords=["shoes"],
        removed_keywords={"nike": "protected name 'Nike' (brand)", "stock": "excluded"}))
    rows.insert(0, {"asset": "beach.png", "describe": "described"})
    add_removed_column(rows, wd, ["beach.png", "cat.jpg", "fog.jpg"])
    assert [r["removed keywords"] for r in rows] == ["nike: protected name 'Nike' (brand); stock: excluded", "", ""]
