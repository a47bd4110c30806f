"""Embedded XMP/IPTC, read back with an independent reader (Pillow + defusedxml), not exiv2."""

from __future__ import annotations

import io
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, IptcImagePlugin

from tasks.agencies.text import clean_cell
from tasks.core.errors import BadInput
from tasks.images.embed import IPTC_OBJECT_NAME_BYTES, embed_metadata, fit_bytes


def jpeg(size=(32, 24), colour=(200, 120, 40)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def read_back(data: bytes) -> dict:
    """Title, description and keywords as Pillow sees them in XMP and in IPTC."""
    with Image.open(io.BytesIO(data)) as im:
        desc = im.getxmp()["xmpmeta"]["RDF"]["Description"]
        iptc = IptcImagePlugin.getiptcinfo(im)
    return {
        "xmp_title": desc["title"]["Alt"]["li"]["text"],
        "xmp_description": desc["description"]["Alt"]["li"]["text"],
        "xmp_keywords": as_list(desc["subject"]["Bag"]["li"]),
        "iptc_charset": iptc[(1, 90)],
        "iptc_title": iptc[(2, 5)].decode("utf-8"),
        "iptc_description": iptc[(2, 120)].decode("utf-8"),
        "iptc_keywords": [k.decode("utf-8") for k in as_list(iptc[(2, 25)])],
    }


def test_title_description_keywords_in_xmp_and_iptc_in_order():
    data = embed_metadata(jpeg(), "Sunset over a calm sea", 'A sun, "quoted" & <tagged>', ["sunset", "sea", "ocean"])
    got = read_back(data)
    assert got == {
        "xmp_title": "Sunset over a calm sea",
        "xmp_description": 'A sun, "quoted" & <tagged>',
        "xmp_keywords": ["sunset", "sea", "ocean"],
        "iptc_charset": b"\x1b%G",
        "iptc_title": "Sunset over a calm sea",
        "iptc_description": 'A sun, "quoted" & <tagged>',
        "iptc_keywords": ["sunset", "sea", "ocean"],
    }


def test_japanese_round_trips_in_utf8():
    data = embed_metadata(jpeg(), "海に沈む夕日", "静かな海に沈む夕日の風景。", ["夕日", "海", "風景"])
    got = read_back(data)
    assert (got["xmp_title"], got["iptc_title"]) == ("海に沈む夕日", "海に沈む夕日")
    assert got["xmp_keywords"] == got["iptc_keywords"] == ["夕日", "海", "風景"]
    assert got["iptc_description"] == "静かな海に沈む夕日の風景。"


def dates_of_today() -> set[bytes]:
    """Today's date, in UTC and local time, in each form a JPEG's metadata writes a date: EXIF ``YYYY:MM:DD``,
    XMP ``YYYY-MM-DD``, IPTC ``YYYYMMDD``."""
    now = time.time()
    return {time.strftime(form, day).encode() for day in (time.gmtime(now), time.localtime(now))
            for form in ("%Y:%m:%d", "%Y-%m-%d", "%Y%m%d")}


def test_same_input_same_bytes_and_no_timestamp():
    """The same input gives the same bytes, and nothing in them comes from the clock: a timestamp (exiv2's, the
    only clock this could reach, is C++'s own, which no injected Python clock replaces) would be today's date in
    one of the forms metadata writes one. None is there, so a second or a year later the bytes are the same,
    with no wait for the clock to move."""
    today = dates_of_today()
    first = embed_metadata(jpeg(), "Title", "Description", ["a", "b"])
    assert embed_metadata(jpeg(), "Title", "Description", ["a", "b"]) == first
    today |= dates_of_today()  # the day may have turned meanwhile
    assert [date for date in sorted(today) if date in first] == []


def test_pixels_unchanged_and_input_bytes_untouched():
    original = jpeg()
    copy = bytes(original)
    data = embed_metadata(original, "Title", "Description", ["a"])
    assert original == copy and data != original
    with Image.open(io.BytesIO(original)) as a, Image.open(io.BytesIO(data)) as b:
        assert a.tobytes() == b.tobytes()


def test_embedding_again_replaces_earlier_values():
    once = embed_metadata(jpeg(), "Old title", "Old description", ["old", "stale"])
    again = read_back(embed_metadata(once, "New title", "New description", ["new"]))
    assert again["xmp_title"] == again["iptc_title"] == "New title"
    assert again["xmp_keywords"] == again["iptc_keywords"] == ["new"]


def test_iptc_respects_iim_byte_limits_xmp_keeps_the_full_text():
    title = "Sunset over the calm sea " * 5
    keyword = "夕日" * 40
    got = read_back(embed_metadata(jpeg(), title, "d", [keyword]))
    assert got["xmp_title"] == clean_cell(title) and got["xmp_keywords"] == [keyword]
    assert len(got["iptc_title"].encode()) <= IPTC_OBJECT_NAME_BYTES
    assert got["iptc_title"] == "Sunset over the calm sea Sunset over the calm sea Sunset over"  # word boundary
    assert got["iptc_keywords"] == ["夕日" * 10 + "夕"]  # 63 bytes: whole characters only


def test_fit_bytes_never_splits_a_utf8_character():
    assert fit_bytes("夕日夕日", 7) == "夕日"  # 6 bytes; the third character would need 9
    assert fit_bytes("abc", 3) == "abc"


def test_values_are_made_xml_safe():
    got = read_back(embed_metadata(jpeg(), "Line\nbreak\x00", "tab\there", ["a\x07", "", "b"]))
    assert (got["xmp_title"], got["xmp_description"], got["xmp_keywords"]) == ("Line break", "tab here", ["a", "b"])


def test_not_a_jpeg_is_bad_input_naming_the_file():
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PNG")
    with pytest.raises(BadInput, match="x.png: cannot embed metadata: not a JPEG"):
        embed_metadata(buf.getvalue(), "t", "d", [], name="x.png")
    with pytest.raises(BadInput, match="x.jpg: cannot embed metadata"):
        embed_metadata(b"\xff\xd8 truncated", "t", "d", [], name="x.jpg")


words = st.text(min_size=1, max_size=40).map(clean_cell).filter(bool)


@settings(max_examples=60, deadline=None)
@given(title=words, description=words, keywords=st.lists(words, min_size=1, max_size=8, unique_by=str.casefold))
def test_any_clean_text_round_trips_through_xmp(title, description, keywords):
    got = read_back(embed_metadata(jpeg((8, 8)), title, description, keywords))
    assert got["xmp_title"] == title and got["xmp_description"] == description
    assert got["xmp_keywords"] == keywords
