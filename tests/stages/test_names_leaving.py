"""Protected names written around the list (issue 50 item 4) are checked on what leaves: Adobe's CSV row
(``csv/adobe.csv``) and the upload-ready JPEG's XMP/IPTC, read back with exiftool. A title naming one holds the
asset back at Adobe (rule ``names.protected``); a keyword naming one is in neither the row nor the JPEG."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.agencies.protected import ProtectedNames
from tasks.core.records import Asset, Metadata, described_sidecars, ready_name, write_sidecar
from tasks.core.reports import CsvReport, PackReport
from tasks.core.settings import KeywordSettings, PackSettings, Settings
from tasks.core.workdir import Workdir
from tasks.images.inspect import ImageRules
from tasks.stages.csv import write_agency_csvs
from tasks.stages.pack import pack_assets
from tests.fakes import pack_samples as s

NAMES = ProtectedNames.of(KeywordSettings())
RULES = {"adobe": ImageRules("adobe", 2000, 1_000, 1_000_000)}  # small images: the real minimum is tested elsewhere
PLAIN = ["sneaker", "shoe", "red", "bench", "park", "street", "fashion", "sport"]
#: title as described -> the name Adobe's row is held back for (the cleaning made the name: issue 50)
TITLES = {
    "N\u200bike sneakers on a bench": "Nike",
    "Spider\u00adMan mask": "Spider-Man",
    "Spider_Man figure": "Spider-Man",
}
#: keyword as described -> the name it is removed for
KEYWORDS = {
    "Nikes": "Nike",
    "N\u0456ke": "Nike",  # a Cyrillic і
    "spider_man": "Spider-Man",
    "Picassos": "Picasso",
    "batman2": "Batman",
    "Coca_Cola": "Coca-Cola",
    "Coca-Colas": "Coca-Cola",
}
#: words that hold a name only as a part, or look like one: kept everywhere
NEGATIVES = ["monetary", "pepsin", "nikel", "legocity", "batmobile", "superb", "Disneyland", "ironing"]
#: an AI-generated asset: Adobe's "generative AI" removed from its title leaves "Spider Man"
AI_TITLE = "Spider generative AI Man costume"
#: a word longer than IPTC's 64 bytes, cut inside it: the cut would read "…-Nike"
LONG = "a" * 59 + "-Nikeland"


def _exiftool(*args: str) -> str:
    if shutil.which("exiftool") is None:
        pytest.fail("exiftool is not installed: `make test` installs it (Debian's libimage-exiftool-perl)")
    return subprocess.run(["exiftool", *args], capture_output=True, text=True, check=True).stdout


def _list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [] if value is None else [str(value)]


class Batch:
    """One workdir holding an asset per case, packed and written to Adobe's CSV."""

    def __init__(self, root: Path) -> None:
        self.wd = Workdir(root / "wd").prepare()
        self.cases: dict[str, Metadata] = {}
        for i, title in enumerate(TITLES):
            self.add(f"title_{i}.jpg", Metadata(title=title, description="On a bench", keywords=PLAIN))
        for i, keyword in enumerate(KEYWORDS):
            self.add(f"keyword_{i}.jpg", Metadata(title="Red sneakers on a bench", description="On a bench",
                                                  keywords=[*PLAIN, keyword]))
        self.add("negatives.jpg", Metadata(title="Monetary superb legocity", description="Ironing a batmobile",
                                           keywords=[*PLAIN, *NEGATIVES]))
        self.add("ai.jpg", Metadata(title=AI_TITLE, description="A costume", keywords=PLAIN, ai_generated=True))
        self.add("long_keyword.jpg", Metadata(title="Red sneakers", description="On a bench",
                                              keywords=[*PLAIN, LONG]))
        self.add("long_title.jpg", Metadata(title=LONG, description="On a bench", keywords=PLAIN))
        self.packed: PackReport = pack_assets(self.wd, PackSettings(preview_px=64, thumbnail_px=32),
                                              described_sidecars(self.wd), rules=RULES, names=NAMES)
        self.report: CsvReport = write_agency_csvs(self.wd, ["adobe"], Settings())
        rows = list(csv.reader(io.StringIO((self.wd.csv / "adobe.csv").read_bytes().decode("utf-8-sig"))))
        self.rows = {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
        files = [str(p) for p in self.packed.ready.values()]
        tags = json.loads(_exiftool("-j", "-G1", "-a", "-XMP-dc:all", "-IPTC:all", *files))
        self.tags = {Path(t["SourceFile"]).name: t for t in tags}

    def add(self, name: str, metadata: Metadata) -> None:
        s.jpeg(self.wd.assets / name, size=(80, 60), colour=(len(self.cases) * 19 % 255, 60, 200))
        write_sidecar(self.wd.sidecar(name), Asset(name=name, asset_id=f"{len(self.cases):064x}",
                                                   path=self.wd.assets / name), metadata)
        self.cases[name] = metadata

    def keywords(self, name: str) -> tuple[list[str], list[str], list[str]]:
        """The keywords of ``name`` in Adobe's row, in the JPEG's XMP and in its IPTC."""
        tags = self.tags[ready_name(name)]
        return (self.rows[ready_name(name)]["Keywords"].split(","), _list(tags.get("XMP-dc:Subject")),
                _list(tags.get("IPTC:Keywords")))


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Batch:
    return Batch(tmp_path_factory.mktemp("names"))


@pytest.mark.parametrize("index", range(len(TITLES)), ids=[repr(t) for t in TITLES])
def test_a_title_the_cleaning_makes_a_name_of_holds_the_asset_back_at_adobe(batch, index):
    name, protected = f"title_{index}.jpg", list(TITLES.values())[index]
    assert name not in batch.report.agencies["adobe"].accepted
    assert ready_name(name) not in batch.rows  # no row in csv/adobe.csv
    held = [p.message for p in batch.report.problems if p.asset == name and p.rule == "names.protected"]
    assert held and f"'{protected}'" in held[0], batch.report.problems
    # what the JPEG embeds is what made the name: it goes nowhere that refuses it
    embedded = batch.tags[ready_name(name)]["XMP-dc:Title"]
    assert [n.name for n in NAMES.found_in(embedded)] == [protected] and "\u200b" not in embedded


@pytest.mark.parametrize("keyword", list(KEYWORDS))
def test_a_keyword_written_around_a_name_is_in_neither_adobes_row_nor_the_jpeg(batch, keyword):
    name = f"keyword_{list(KEYWORDS).index(keyword)}.jpg"
    assert name in batch.report.agencies["adobe"].accepted
    row, xmp, iptc = batch.keywords(name)
    assert row == xmp == iptc == PLAIN, (keyword, row, xmp, iptc)
    assert batch.report.agencies["adobe"].fixes.get("names.protected", 0) >= len(KEYWORDS)


def test_words_that_only_hold_a_name_as_a_part_are_kept_everywhere(batch):
    assert "negatives.jpg" in batch.report.agencies["adobe"].accepted
    row, xmp, iptc = batch.keywords("negatives.jpg")
    assert row == xmp == iptc == [*PLAIN, *NEGATIVES]
    assert batch.rows["negatives.jpg"]["Title"] == batch.tags["negatives.jpg"]["XMP-dc:Title"] == (
        "Monetary superb legocity")


def test_a_title_a_removed_term_joins_into_a_name_holds_the_asset_back_at_adobe(batch):
    assert "ai.jpg" not in batch.report.agencies["adobe"].accepted
    held = [p.message for p in batch.report.problems if p.asset == "ai.jpg" and p.rule == "names.protected"]
    assert held and "'Spider-Man'" in held[0], batch.report.problems


def test_a_keyword_whose_iptc_cut_would_make_a_name_is_left_out_of_the_jpeg(batch):
    """The last guard, on the exact strings written: IPTC keeps 64 bytes of a keyword, cut inside a word when it
    has no space ("…-Nike" of "…-Nikeland"); the keyword is left out of the XMP and the IPTC alike."""
    row, xmp, iptc = batch.keywords("long_keyword.jpg")
    assert LONG in row  # the CSV cell is not cut: no name there
    assert xmp == iptc == PLAIN


def test_a_title_whose_iptc_cut_would_make_a_name_keeps_the_asset_from_being_packed(batch):
    assert "would name 'Nike' (brand)" in batch.packed.rejected["long_title.jpg"]
    assert "long_title.jpg" not in batch.packed.ready
