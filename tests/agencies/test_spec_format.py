"""What a spec can say that no shipped agency uses yet: a contributor's spec may, so each is tested here."""

from __future__ import annotations

from tasks.agencies.rows import build_row
from tasks.agencies.spec import parse_spec
from tasks.core.records import Metadata
from tasks.stages.csv import split_files

MINE = """
display_name = "Mine"
header = "file|title|kw|ai|cat"

[[columns]]
name = "file"
source = "filename"

[[columns]]
name = "title"
source = "title"

[[columns]]
name = "kw"
source = "keywords"

[[columns]]
name = "ai"
source = "ai_generated"
kind = "flag"
default = "N"

[[columns]]
name = "cat"
source = "category"

[keywords]
separator = " "

[csv]
delimiter = "|"
line_ending = "lf"
encoding = "ascii"
flag_yes = "Y"
flag_no = "N"

[categories]
count = 1
write = "name"
source = "made up for this test"
table = { 7 = "Sea & Sky" }
hints = { sea = 7 }

[image]
min_megapixels = 1
min_side = 1500

[transport]
protocol = "web"
"""

SEA = Metadata(title="Calm sea", description="A calm sea.", keywords=["sea", "calm"], category_hints=["sea"])


def test_a_contributors_dialect_flags_and_category_names_reach_the_file():
    spec = parse_spec(MINE, "mine.toml", "mine")
    plain, ai = build_row(spec, SEA, "a.jpg"), build_row(spec, SEA.model_copy(update={"ai_generated": True}), "b.jpg")
    assert plain.cells == ("a.jpg", "Calm sea", "sea calm", "N", "Sea & Sky")
    assert ai.cells == ("b.jpg", "Calm sea", "sea calm", "Y", "Sea & Sky")
    (data,) = split_files(spec, spec.header_row(), [plain.cells, ai.cells])
    assert data == b"file|title|kw|ai|cat\na.jpg|Calm sea|sea calm|N|Sea & Sky\nb.jpg|Calm sea|sea calm|Y|Sea & Sky\n"


def test_an_ascii_csv_refuses_a_row_it_cannot_encode():
    spec = parse_spec(MINE, "mine.toml", "mine")
    result = build_row(spec, SEA.model_copy(update={"title": "Café by the sea"}), "a.jpg")
    assert not result.ok and [p.rule for p in result.problems] == ["csv.encoding"]
    assert "'é'" in result.problems[0].message


def test_the_minimum_side_raises_the_pixel_minimum():
    spec = parse_spec(MINE, "mine.toml", "mine")
    assert spec.image.min_pixels == 1500 * 1500  # above the 1 MP of min_megapixels
    assert parse_spec(MINE.replace("min_side = 1500", "min_side = 900"), "m.toml", "m").image.min_pixels == 1_000_000


def test_an_agency_without_a_csv_still_checks_the_embedded_fields():
    text = 'display_name = "Embedded"\ntakes_csv = false\n[keywords]\nmin = 3\n[transport]\nprotocol = "web"\n'
    spec = parse_spec(text, "e.toml", "e")
    assert build_row(spec, SEA, "a.jpg").problems[0].rule == "keywords.min"
    assert build_row(spec, SEA.model_copy(update={"keywords": ["a", "b", "c"]}), "a.jpg").cells == ()
