"""Agency CSV files: golden output, splitting at row and byte limits, regeneration, the report.

Golden files live in tests/stages/golden/ (``<agency>.csv`` from GOLDEN_ASSETS,
``hostile/<agency>.csv`` from HOSTILE_ASSETS); after a deliberate change,
regenerate them with ``UPDATE_GOLDEN=1 pytest tests/stages/test_csv.py`` and
review the diff.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from rich.console import Console

from tasks.agencies.catalog import all_specs
from tasks.agencies.spec import load_spec
from tasks.core.records import Asset, Metadata, described_sidecars, write_sidecar
from tasks.core.reports import CsvReport, PackReport
from tasks.core.settings import AgencySettings, Settings
from tasks.core.workdir import Workdir
from tasks.observe.markdown import validation_markdown
from tasks.observe.terminal import validation_table
from tasks.stages.csv import split_files, write_agency_csvs
from tasks.stages.pack import finish_batch
from tasks.stores.pending import held_back

GOLDEN = Path(__file__).parent / "golden"
AGENCIES = ["adobe", "vecteezy", "dreamstime"]
#: Every shipped agency that takes a CSV (Alamy reads only the embedded metadata).
CSV_AGENCIES = ["adobe", "vecteezy", "dreamstime", "shutterstock", "freepik", "123rf", "depositphotos", "pond5"]


def describe(wd: Workdir, name: str, metadata: Metadata, asset_id: str | None = None) -> None:
    """An asset in assets/ (a tiny real JPEG) with its sidecar, as the describe stage leaves it."""
    path = wd.assets / name
    Image.new("RGB", (8, 8), (len(name) * 7 % 255, 90, 160)).save(path, "JPEG")
    write_sidecar(wd.sidecar(name), Asset(name=name, asset_id=asset_id or name.encode().hex(), path=path), metadata)


def parse(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


GOLDEN_ASSETS = {
    "sunset_sea_000.jpg": Metadata(
        title="Sunset over a calm sea with a glowing sun",
        description="Sunset over a calm sea with a glowing sun. Demo image drawn by the offline generator.",
        keywords=["sunset", "sea", "sun", "horizon", "ocean", "evening", "calm", "orange sky", "water", "dusk"],
        adobe_category=11, dreamstime_categories=[23, 19], category_hints=["landscape", "nature"]),
    "hostile_001.jpg": Metadata(
        title='=HYPERLINK("http://x","click"), a "quoted" title\nwith a line break and, commas',
        description='@SUM(1+1) description; with "quotes", commas\r\nand\ttabs\x00',
        keywords=["Sea", "sea", "orange sky", "=cmd", "", "  ", "sky,blue", "wave", "foam", "tide"],
        adobe_category=99, dreamstime_categories=[999], category_hints=["seascapes", "sunsets"],
        releases=["Model A", "model a"], editorial=True),
    "yuuhi_002.jpg": Metadata(
        title="海に沈む夕日", description="静かな海に沈む夕日の風景。",
        keywords=["夕日", "海", "風景", "日本", "自然"], adobe_category=11, category_hints=["landscape"],
        language="ja"),
    "a_very_long_ingested_file_name_2024.jpg": Metadata(
        title="Mountain range at dawn", description="Snowy mountain range at dawn.",
        keywords=["mountains", "snow", "dawn", "peak", "range"], adobe_category=11, dreamstime_categories=[15]),
}


@pytest.fixture
def golden_wd(workdir):
    for name, metadata in GOLDEN_ASSETS.items():
        describe(workdir, name, metadata)
    return workdir


def assert_golden(got: bytes, golden: Path) -> None:
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_bytes(got)
    assert got == golden.read_bytes()


@pytest.mark.parametrize("agency", CSV_AGENCIES)
def test_golden_csv(golden_wd, agency):
    write_agency_csvs(golden_wd, list(all_specs()), Settings())
    assert_golden((golden_wd.csv / f"{agency}.csv").read_bytes(), GOLDEN / f"{agency}.csv")


HOSTILE_ASSETS = {
    **GOLDEN_ASSETS,
    "coast_003.jpg": Metadata(  # the delimiters of every agency (comma and semicolon) inside the title
        title='Rocky coast; cliffs, waves and "spray" at noon', description="Cliffs; waves, spray.",
        keywords=["coast", "cliffs", "waves", "spray", "rocks", "sea", "noon", "shore"],
        category_hints=["seascapes"], dreamstime_categories=[19]),
    "wheat_004.jpg": Metadata(  # a 300-character title and description
        title=("Golden wheat field under a wide summer sky " * 7)[:300],
        description=("Ripe golden wheat moves in the wind below a wide blue summer sky. " * 5)[:300],
        keywords=["wheat", "field", "summer", "sky", "golden", "harvest", "farm", "rural"],
        adobe_category=11, category_hints=["landscape"]),
    "dupes_005.jpg": Metadata(  # 80 duplicate keywords around seven distinct ones
        title="Barley field at dusk", description="A barley field at dusk.",
        keywords=["barley", "Barley", "BARLEY ", " barley", "field"] * 16 + ["dusk", "grain", "crop", "farm", "rural"],
        adobe_category=11, category_hints=["nature"]),
    "ai_art_006.jpg": Metadata(  # AI-generated: refused by Shutterstock, Depositphotos, Pond5, Alamy
        title="Futuristic glass city at sunrise", description="A futuristic glass city at sunrise.",
        keywords=["city", "future", "glass", "sunrise", "skyline", "towers", "architecture"],
        adobe_category=2, category_hints=["city"], ai_generated=True),
}


@pytest.fixture
def hostile_wd(workdir):
    for name, metadata in HOSTILE_ASSETS.items():
        describe(workdir, name, metadata)
    return workdir


def test_golden_hostile_csvs_of_every_agency(hostile_wd):
    cfg = Settings(agencies={"freepik": AgencySettings(csv_defaults={"Model": "Midjourney 5"})})
    report = write_agency_csvs(hostile_wd, list(all_specs()), cfg)
    for agency in CSV_AGENCIES:
        assert_golden((hostile_wd.csv / f"{agency}.csv").read_bytes(), GOLDEN / "hostile" / f"{agency}.csv")
    assert not list(hostile_wd.csv.glob("alamy*")) and report.agencies["alamy"].files == []
    refusing = {"shutterstock", "depositphotos", "pond5", "alamy"}
    assert {p.agency for p in report.problems if p.rule == "ai.refused"} == refusing
    assert all(p.asset == "ai_art_006.jpg" for p in report.problems if p.rule == "ai.refused")
    for agency in set(CSV_AGENCIES) - refusing:
        assert report.accepted(agency, "ai_art_006.jpg"), agency
    freepik = {row[0]: row for row in parse_as(hostile_wd.csv / "freepik.csv", ";")[1:]}
    assert freepik["ai_art_006.jpg"][2].startswith("_ai_generated,city,")
    assert freepik["ai_art_006.jpg"][3:] == ["A futuristic glass city at sunrise.", "Midjourney 5"]
    dreamstime = {row[0]: row for row in parse(hostile_wd.csv / "dreamstime.csv")[1:]}  # Dreamstime's AI rules
    assert "AI-generated" in dreamstime["ai_art_006.jpg"][2] and "212" in dreamstime["ai_art_006.jpg"][3:6]
    assert "AI-generated" not in dreamstime["coast_003.jpg"][2] and "212" not in dreamstime["coast_003.jpg"][3:6]
    assert freepik["coast_003.jpg"][1:] == ['Rocky coast; cliffs, waves and "spray" at noon',
                                            "coast,cliffs,waves,spray,rocks,sea,noon,shore", "", ""]
    # Alamy's rows are checked although no file is written: the tag minimum holds an asset back there
    assert report.accepted("alamy", "dupes_005.jpg") and report.accepted("alamy", "hostile_001.jpg")
    assert not report.accepted("alamy", "ai_art_006.jpg")


def test_dialects_quote_every_cell_where_the_agency_wants_it(hostile_wd):
    write_agency_csvs(hostile_wd, ["123rf", "depositphotos", "shutterstock"], Settings())
    for agency in ("123rf", "depositphotos"):
        lines = (hostile_wd.csv / f"{agency}.csv").read_bytes().split(b"\r\n")
        assert all(line.startswith(b'"') and line.endswith(b'"') for line in lines if line), agency
    shutterstock = parse(hostile_wd.csv / "shutterstock.csv")
    assert shutterstock[0] == ["Filename", "Description", "Keywords", "Categories", "Editorial"]
    rows = {r[0]: r for r in shutterstock[1:]}
    assert rows["hostile_001.jpg"][4] == "Yes" and rows["sunset_sea_000.jpg"][4] == "No"
    assert rows["coast_003.jpg"][3] == "Nature"  # "seascapes" → Nature, written by name
    assert "yuuhi_002.jpg" not in rows  # Japanese: Shutterstock takes English without special letters


def parse_as(path: Path, delimiter: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline=""), delimiter=delimiter))


def test_golden_rows_are_the_expected_assets_and_problems_are_named(golden_wd):
    report = write_agency_csvs(golden_wd, AGENCIES, Settings())
    names = {a: [row[0] for row in parse(golden_wd.csv / f"{a}.csv")[1:]] for a in AGENCIES}
    # sorted by asset name; the long ingested name is skipped for Adobe only, Japanese for Vecteezy only
    assert names["adobe"] == ["hostile_001.jpg", "sunset_sea_000.jpg", "yuuhi_002.jpg"]
    assert names["vecteezy"] == ["a_very_long_ingested_file_name_2024.jpg", "hostile_001.jpg", "sunset_sea_000.jpg"]
    assert names["dreamstime"] == sorted(GOLDEN_ASSETS)
    assert {(p.agency, p.asset, p.rule) for p in report.problems} == {
        ("adobe", "a_very_long_ingested_file_name_2024.jpg", "filename.max_chars"),
        ("vecteezy", "yuuhi_002.jpg", "language"),
        ("vecteezy", "yuuhi_002.jpg", "title.latin_only"),
        ("vecteezy", "yuuhi_002.jpg", "description.latin_only"),
        ("vecteezy", "yuuhi_002.jpg", "keywords.latin_only"),
    }
    assert report.rows == {"adobe": 3, "vecteezy": 3, "dreamstime": 4}
    assert report.accepted("dreamstime", "yuuhi_002.jpg") and not report.accepted("vecteezy", "yuuhi_002.jpg")


def test_csv_has_no_bom_and_japanese_round_trips(golden_wd):
    write_agency_csvs(golden_wd, AGENCIES, Settings())
    for agency in AGENCIES:
        assert (golden_wd.csv / f"{agency}.csv").read_bytes().startswith(b"Filename,")
    adobe = {row[0]: row for row in parse(golden_wd.csv / "adobe.csv")[1:]}
    assert adobe["yuuhi_002.jpg"][1:3] == ["海に沈む夕日", "夕日,海,風景,日本,自然"]


def test_each_described_asset_once_sorted_and_regenerated_each_run(workdir):
    describe(workdir, "b.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"])
    describe(workdir, "a.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"])
    (workdir.assets / "c.jpg").write_bytes((workdir.assets / "a.jpg").read_bytes())  # not described yet
    write_agency_csvs(workdir, ["adobe"], Settings())
    write_agency_csvs(workdir, ["adobe"], Settings())
    assert [r[0] for r in parse(workdir.csv / "adobe.csv")[1:]] == ["a.jpg", "b.jpg"]
    (workdir.assets / "b.jpg").unlink()  # an asset removed by hand leaves the CSV on the next run
    write_agency_csvs(workdir, ["adobe"], Settings())
    assert [r[0] for r in parse(workdir.csv / "adobe.csv")[1:]] == ["a.jpg"]


def test_same_image_or_same_upload_name_is_written_once(workdir):
    describe(workdir, "a.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"], asset_id="1" * 64)
    describe(workdir, "b.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"], asset_id="1" * 64)
    report = write_agency_csvs(workdir, ["adobe"], Settings())
    assert report.rows["adobe"] == 1
    assert [(p.asset, p.rule) for p in report.problems] == [("b.jpg", "row.duplicate")]


def test_a_png_and_a_jpeg_with_one_stem_share_the_sidecar_of_the_one_it_names(workdir):
    describe(workdir, "a.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"])
    Image.new("RGB", (8, 8)).save(workdir.assets / "a.png")
    assert [s.name for s in described_sidecars(workdir)] == ["a.jpg"]


# --- splitting ---------------------------------------------------------------------------


def many(workdir: Workdir, n: int) -> list[str]:
    names = [f"img_{i:03d}.jpg" for i in range(n)]
    for name in names:
        describe(workdir, name, GOLDEN_ASSETS["sunset_sea_000.jpg"])
    return names


def csv_files(wd: Workdir, agency: str) -> list[str]:
    return sorted(p.name for p in wd.csv.glob(f"{agency}*.csv"))


def test_split_at_the_row_limit(workdir):
    names = many(workdir, 5)
    specs = {"adobe": load_spec("adobe").with_limits(max_rows=2)}
    report = write_agency_csvs(workdir, ["adobe"], Settings(), specs=specs)
    assert csv_files(workdir, "adobe") == ["adobe-2.csv", "adobe-3.csv", "adobe.csv"]
    assert [Path(f).name for f in report.files["adobe"]] == ["adobe.csv", "adobe-2.csv", "adobe-3.csv"]
    parts = [parse(Path(f)) for f in report.files["adobe"]]
    assert all(p[0] == load_spec("adobe").header_row() for p in parts)
    assert [len(p) - 1 for p in parts] == [2, 2, 1]
    assert [row[0] for p in parts for row in p[1:]] == names


def test_split_at_the_byte_limit_packs_each_file_full(workdir):
    many(workdir, 7)
    write_agency_csvs(workdir, ["dreamstime"], Settings())
    whole = (workdir.csv / "dreamstime.csv").read_bytes()
    lines = whole.splitlines(keepends=True)
    header_and_two_rows = len(lines[0]) + len(lines[1]) + len(lines[2])
    specs = {"dreamstime": load_spec("dreamstime").with_limits(max_bytes=header_and_two_rows + 5)}
    report = write_agency_csvs(workdir, ["dreamstime"], Settings(), specs=specs)
    sizes = [Path(f).stat().st_size for f in report.files["dreamstime"]]
    assert len(sizes) == 4 and all(s <= header_and_two_rows + 5 for s in sizes)
    assert [len(parse(Path(f))) - 1 for f in report.files["dreamstime"]] == [2, 2, 2, 1]
    assert b"".join(Path(f).read_bytes()[len(lines[0]):] for f in report.files["dreamstime"]) == b"".join(lines[1:])


def test_a_row_too_big_for_any_file_is_a_problem_not_a_file_over_the_limit(workdir):
    describe(workdir, "big.jpg", GOLDEN_ASSETS["sunset_sea_000.jpg"].model_copy(update={"title": "word " * 5000}))
    many(workdir, 1)
    specs = {"dreamstime": load_spec("dreamstime").with_limits(max_bytes=2000)}
    report = write_agency_csvs(workdir, ["dreamstime"], Settings(), specs=specs)
    assert [(p.asset, p.rule) for p in report.problems] == [("big.jpg", "row.max_bytes")]
    assert report.rows["dreamstime"] == 1 and (workdir.csv / "dreamstime.csv").stat().st_size <= 2000


def test_stale_continuation_files_from_a_larger_run_are_removed(workdir):
    many(workdir, 4)
    small = {"adobe": load_spec("adobe").with_limits(max_rows=1)}
    write_agency_csvs(workdir, ["adobe"], Settings(), specs=small)
    assert len(csv_files(workdir, "adobe")) == 4
    (workdir.csv / "adobe-notes.csv").write_text("mine")  # not a continuation file: kept
    write_agency_csvs(workdir, ["adobe"], Settings())
    assert csv_files(workdir, "adobe") == ["adobe-notes.csv", "adobe.csv"]
    assert len(parse(workdir.csv / "adobe.csv")) == 5


def test_unlisted_agencies_keep_their_files_and_no_assets_gives_a_header_only_file(workdir):
    (workdir.csv / "vecteezy.csv").write_text("keep")
    report = write_agency_csvs(workdir, ["adobe"], Settings())
    assert (workdir.csv / "vecteezy.csv").read_text() == "keep"
    assert parse(workdir.csv / "adobe.csv") == [load_spec("adobe").header_row()]
    assert report.rows == {"adobe": 0}


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), max_size=30),
    max_rows=st.one_of(st.none(), st.integers(1, 6)),
    max_bytes=st.one_of(st.none(), st.integers(130, 400)),
)
def test_split_files_keeps_every_row_once_in_order_within_both_limits(sizes, max_rows, max_bytes):
    spec = load_spec("vecteezy").with_limits(max_rows=max_rows, max_bytes=max_bytes)
    header = spec.header_row()
    rows = [(f"f{i}.jpg", "T" * n, 'q"u,o\nte', "a,b") for i, n in enumerate(sizes)]
    files = split_files(spec, header, rows)
    parsed = [list(csv.reader(io.StringIO(f.decode("utf-8"), newline=""))) for f in files]
    assert all(p[0] == header for p in parsed)
    assert [tuple(r) for p in parsed for r in p[1:]] == rows
    for i, (data, p) in enumerate(zip(files, parsed, strict=True)):
        assert max_rows is None or len(p) - 1 <= max_rows
        single = len(p) == 2  # one row alone may not fit: build_row reports those before splitting
        assert max_bytes is None or len(data) <= max_bytes or single
        if i + 1 < len(files):  # a file is closed only when the next row would break a limit
            next_row = parse_line(files[i + 1])
            assert (max_rows is not None and len(p) - 1 == max_rows) or (
                max_bytes is not None and len(data) + len(next_row) > max_bytes)


def parse_line(data: bytes) -> bytes:
    """The first data line of a file (header skipped), as written."""
    text = data.decode("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(rows[1])
    return out.getvalue().encode("utf-8")


# --- settings, acceptance, the report ---------------------------------------------------------


def test_invalid_csv_defaults_skip_only_that_agency(golden_wd):
    (golden_wd.csv / "dreamstime.csv").write_text("previous")
    cfg = Settings(agencies={"dreamstime": AgencySettings(csv_defaults={"W-EL": "yes"})})
    report = write_agency_csvs(golden_wd, AGENCIES, cfg)
    assert not report.agencies["dreamstime"].written and report.rows["adobe"] == 3
    assert [(p.agency, p.asset, p.rule) for p in report.problems if p.agency == "dreamstime"] == [
        ("dreamstime", "", "config.W-EL")]
    assert (golden_wd.csv / "dreamstime.csv").read_text() == "previous"


def test_configured_values_reach_the_csv(golden_wd):
    cfg = Settings(agencies={"dreamstime": AgencySettings(csv_defaults={"Free": "1", "SR-Price": "100"}),
                             "vecteezy": AgencySettings(csv_defaults={"License": "pro"})})
    write_agency_csvs(golden_wd, AGENCIES, cfg)
    dreamstime = parse(golden_wd.csv / "dreamstime.csv")
    header = dreamstime[0]
    assert {(r[header.index("Free")], r[header.index("SR-Price")]) for r in dreamstime[1:]} == {("1", "100")}
    vecteezy = parse(golden_wd.csv / "vecteezy.csv")
    assert vecteezy[0][-1] == "License" and {r[-1] for r in vecteezy[1:]} == {"pro"}


def test_an_asset_without_a_valid_row_is_held_back_from_that_agencys_upload(golden_wd):
    report = write_agency_csvs(golden_wd, AGENCIES, Settings())
    assert report.accepted("adobe", "sunset_sea_000.jpg")
    assert not report.accepted("adobe", "a_very_long_ingested_file_name_2024.jpg")
    finish_batch(golden_wd, PackReport(), report)  # the run records where each file goes
    held = held_back(golden_wd)  # what `ledger status` reads back from the workdir
    assert "sunset_sea_000.jpg" not in held.get("adobe", {})
    assert "30" in held["adobe"]["a_very_long_ingested_file_name_2024.jpg"]  # the filename rule's message
    assert "a_very_long_ingested_file_name_2024.jpg" not in held.get("vecteezy", {})


def test_report_saved_as_json_and_rendered(golden_wd):
    report = write_agency_csvs(golden_wd, AGENCIES, Settings())
    saved = CsvReport.model_validate_json((golden_wd.reports / "validation.json").read_text())
    assert saved == report

    md = validation_markdown(report)
    assert "| Adobe Stock | 3 |" in md
    assert "| a\\_very\\_long\\_ingested\\_file\\_name\\_2024.jpg | adobe | `filename.max_chars` |" in md  # `_` escaped
    assert "Adobe Stock: upload" in md and "contributor portal" in md

    console = Console(record=True, width=200)
    console.print(validation_table(report))
    text = console.export_text()
    assert "yuuhi_002.jpg" in text and "title.latin_only" in text and "Dreamstime" in text


def test_markdown_escapes_table_breaking_text():
    from tasks.core.reports import AgencyCsv, Problem

    report = CsvReport(agencies={"adobe": AgencyCsv(agency="adobe", display_name="Adobe Stock")},
                       problems=[Problem(agency="adobe", asset="a|b.jpg", rule="x", message="pipe | and\nnewline")])
    line = [text for text in validation_markdown(report).splitlines() if "a\\|b.jpg" in text][0]
    assert line.count(" | ") == 3 and "pipe \\| and newline" in line
