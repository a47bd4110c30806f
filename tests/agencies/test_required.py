"""No row an agency will refuse (issue 25, point 5): required columns hold an asset back when empty, and Adobe's
title rule ("without commas or special characters") is applied to the CSV and to the embedded title alike."""

from __future__ import annotations

from tasks.agencies.catalog import all_specs
from tasks.agencies.embedded import embedded_fields
from tasks.agencies.rows import build_row
from tasks.agencies.spec import load_spec
from tasks.core.records import Metadata

KEYWORDS = ["harbour", "boat", "sea", "fishing", "port", "water", "travel", "coast"]


def md(**kw) -> Metadata:
    return Metadata(**{**dict(title="Fishing boats in the harbour", description="Boats moored in a harbour",
                              keywords=KEYWORDS), **kw})


def test_shutterstock_holds_back_a_row_without_categories():
    """Regression: the row was written with an empty Categories cell (article 10617486: columns A–D required)
    and counted as accepted."""
    result = build_row(load_spec("shutterstock"), md(), "boats.jpg")
    assert result.cells is None
    [problem] = [p for p in result.problems if p.rule == "column.required"]
    assert "Categories is empty" in problem.message and "Shutterstock" in problem.message
    assert build_row(load_spec("shutterstock"), md(category_hints=["transport"]), "boats.jpg").cells is not None


def test_the_specs_say_which_columns_are_required():
    required = {s.name: [c.name for c in s.columns if c.required] for s in all_specs().values()}
    assert required["shutterstock"] == ["Filename", "Description", "Keywords", "Categories"]
    assert required["adobe"] == ["Filename", "Title", "Keywords"]


def test_adobe_titles_lose_commas_and_special_characters():
    """Regression: the CSV stripped commas but kept « » — and quotes."""
    meta = md(title='«Old» boats — the "harbour", at dawn & dusk', category_hints=["transport"])
    result = build_row(load_spec("adobe"), meta, "boats.jpg")
    title = result.cells[load_spec("adobe").header_row().index("Title")]
    assert title == "Old boats the harbour at dawn dusk"
    assert build_row(load_spec("adobe"), md(title="Fisherman's half-timbered hut"), "hut.jpg").cells[1] == \
        "Fisherman's half-timbered hut"


def test_the_embedded_title_is_never_looser_than_the_strictest_agency():
    """Regression: the embedded title kept the commas (and symbols) the Adobe CSV removed."""
    fields = embedded_fields(md(title='Boats, nets & "gulls" — Porto'), all_specs().values())
    assert fields.title == "Boats nets gulls Porto"
    adobe_cell = build_row(load_spec("adobe"), md(title='Boats, nets & "gulls" — Porto'), "b.jpg").cells[1]
    assert fields.title == adobe_cell
    accents = embedded_fields(md(title="Café crème, Paris"), all_specs().values())
    assert accents.title == "Café crème Paris"
