"""Title, description and keywords embedded in a JPEG (XMP and IPTC): XMP and EXIF with exiv2, IPTC here.

Agencies (Adobe Stock first) read embedded metadata on upload, so the
upload-ready copy carries the same words as the CSV. This module works on
bytes only: it never opens, let alone changes, the contributor's original.

Written fields:

=====================  ===============================  ==========================
field                  XMP (UTF-8)                      IPTC IIM (UTF-8)
=====================  ===============================  ==========================
title                  ``dc:title`` (x-default)         2:05 ``ObjectName`` (≤ 64 bytes)
description            ``dc:description`` (x-default)   2:120 ``Caption-Abstract`` (≤ 2000 bytes)
keywords, in order     ``dc:subject`` (``rdf:Bag``)     2:25 ``Keywords`` (each ≤ 64 bytes)
digital source type    ``Iptc4xmpExt:DigitalSourceType``  —
=====================  ===============================  ==========================

The digital source type (an IPTC NewsCodes URI, :mod:`tasks.images.provenance`)
is written only when given: it tells agencies and buyers an image was made by
a model.

IPTC 1:90 ``CodedCharacterSet`` is set to UTF-8 (``ESC % G``). The IIM is
written here, not by exiv2 (which would give a TimeCreated a time zone it
never had), in the Photoshop block the file already has. IPTC values
longer than the IIM standard's byte limits are shortened at a word boundary
(never inside a UTF-8 character); XMP has no limits and carries the full
values. Earlier values of these fields (other languages, old keywords) are
replaced. The result is deterministic: exiv2 adds no timestamp, so the same
input bytes and metadata give the same output bytes.

Every other XMP and IPTC field already in ``jpeg`` (the contributor's creator,
rights, credit, location … that :func:`tasks.images.ready.ready_jpeg` carried
over) is left as it is, and so is a digital source type when none is given;
an extended XMP carried over loses the fields written here (its other
properties stay, under a new GUID: :mod:`tasks.images.xmp_extension`).
EXIF is kept in step with what is written (the Metadata Working Group's
guidelines): ``ImageDescription`` becomes the description, and the Windows
``XPTitle``, ``XPSubject`` and ``XPKeywords`` are removed (they would contradict it).
So are the other tools' copies of the keywords in XMP (:data:`KEYWORD_COPIES`)
and the supplemental categories in XMP and IIM 2:20: they would contradict the
keywords written, and may hold one the contributor's rules removed (a protected
name: Lightroom's ``Brands|Nike``, a category ``Nike``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import pyexiv2

from tasks.agencies.protected import ProtectedNames
from tasks.agencies.text import clean_cell, shorten
from tasks.core.errors import BadInput
from tasks.core.printable import printable
from tasks.images import iim
from tasks.images.jpeg_segments import app_segment, metadata_segments, with_segments
from tasks.images.xmp_extension import edit_carried, xmp_property

#: IPTC IIM 4.2 maximum lengths in bytes.
IPTC_OBJECT_NAME_BYTES = 64
IPTC_CAPTION_BYTES = 2000
IPTC_KEYWORD_BYTES = 64
_APP13 = 0xED

#: The fields written here, as the contributor's extended XMP may hold them: they go from it, or readers
#: would merge them over the new ones (Adobe's XMP toolkit lets the extension's properties win).
_OWNED_XMP = [xmp_property(name) for name in (rb"dc:title", rb"dc:description", rb"dc:subject")]
_SOURCE_TYPE_XMP = xmp_property(rb"Iptc4xmpExt:DigitalSourceType")

#: Other tools' copies of the keywords in XMP, removed with their items (exiftool's tag names,
#: https://exiftool.org/TagNames/XMP.html and MWG.html, read 2026-12-03: lr:hierarchicalSubject (Lightroom),
#: digiKam:TagsList, mediapro:CatalogSets, acdsee:categories, mwg-kw:Keywords; Windows writes
#: MicrosoftPhoto:LastKeywordXMP/LastKeywordIPTC with dc:subject, learn.microsoft.com/windows/win32/wic/
#: -wic-photoprop-system-keywords, read 2026-12-03); and Photoshop's SupplementalCategories, free words beside the
#: keywords (IPTC Core lists IIM 2:20 as deprecated; it goes from the IIM too: :data:`_IIM_COPIES`).
KEYWORD_COPIES = ("Xmp.lr.hierarchicalSubject", "Xmp.digiKam.TagsList", "Xmp.mediapro.CatalogSets",
                  "Xmp.acdsee.categories", "Xmp.mwg-kw.Keywords", "Xmp.MicrosoftPhoto.LastKeywordXMP",
                  "Xmp.MicrosoftPhoto.LastKeywordIPTC", "Xmp.photoshop.SupplementalCategories")
#: The same copies as the contributor's extended XMP may hold them (Lightroom puts its hierarchy there).
_COPIES_XMP = [xmp_property(key.split(".", 1)[1].replace(".", ":", 1).encode()) for key in KEYWORD_COPIES]

#: The IIM's copy: 2:20 SupplementalCategories (the IIM's own copy of the keywords, 2:25, is rewritten).
_IIM_COPIES = {(2, 20): []}

log = logging.getLogger(__name__)

_SUBJECT_SEQ = re.compile(r"(<dc:subject>\s*)<rdf:Seq>(.*?)</rdf:Seq>(\s*</dc:subject>)", re.DOTALL)


def fit_bytes(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes: cut at a word boundary when one fits, else at a character."""
    if len(text.encode("utf-8")) <= limit:
        return text
    chars = 0
    size = 0
    for ch in text:
        size += len(ch.encode("utf-8"))
        if size > limit:
            break
        chars += 1
    return shorten(text, chars) or text[:chars]


def _names_made(names: ProtectedNames | None, given: str, written: Sequence[str]) -> str:
    """The protected names the ``written`` forms of a value hold that the value as ``given`` does not (made by
    cleaning or by a cut inside a word), in words; "" when none."""
    if names is None:
        return ""
    had = {str(n) for n in names.found_in(given)}
    return ", ".join(dict.fromkeys(str(n) for form in written for n in names.found_in(form) if str(n) not in had))


def embed_metadata(jpeg: bytes, title: str, description: str, keywords: Sequence[str], *, name: str = "image",
                   digital_source_type: str | None = None, names: ProtectedNames | None = None) -> bytes:
    """A copy of ``jpeg`` carrying ``title``, ``description`` and ``keywords`` (order kept) in XMP and IPTC.

    The caller chooses the values (e.g. :func:`tasks.agencies.embedded.embedded_fields`);
    they are only made safe here with :func:`~tasks.agencies.text.clean_cell`
    (one line, no control characters, which XML cannot carry; clean values are
    unchanged), empty keywords are dropped, and the IPTC copies are shortened to
    the IIM limits. With ``names`` (the run's protected names), the last guard on the exact strings written:
    a keyword that this cleaning or cut makes name a protected name is left out (and logged), and a title or
    description it would make name one raises BadInput (the asset is not packed) — a name the values already
    held is the caller's to judge (an editorial asset keeps its brands). Raises BadInput naming ``name`` when
    exiv2 cannot read or write the bytes as a JPEG.
    """
    kept = []
    for given in keywords:
        keyword = clean_cell(given)
        if made := _names_made(names, given, [keyword, fit_bytes(keyword, IPTC_KEYWORD_BYTES)]):
            log.warning("%s: keyword %r left out of the embedded metadata: as written it would name %s",
                        printable(name), keyword, made)
        elif keyword:
            kept.append(keyword)
    keywords = kept
    fields = {"title": (title, clean_cell(title), IPTC_OBJECT_NAME_BYTES),
              "description": (description, clean_cell(description), IPTC_CAPTION_BYTES)}
    for field, (given, clean, limit) in fields.items():
        if made := _names_made(names, given, [clean, fit_bytes(clean, limit)]):
            raise BadInput(name, f"the {field} as embedded ({fit_bytes(clean, limit)!r}: IPTC keeps {limit} bytes) "
                                 f"would name {made}; shorten the {field} (`microstock review edit`)")
    title, description = fields["title"][1], fields["description"][1]
    # An empty list removes the dataset, so an empty value leaves no empty dataset behind.
    iptc = {
        (2, 5): [fit_bytes(title, IPTC_OBJECT_NAME_BYTES)] if title else [],
        (2, 120): [fit_bytes(description, IPTC_CAPTION_BYTES)] if description else [],
        (2, 25): [fit_bytes(k, IPTC_KEYWORD_BYTES) for k in keywords],
        **_IIM_COPIES,
    }
    # None deletes the field, so an empty value leaves no empty container behind.
    xmp = {
        "Xmp.dc.title": {'lang="x-default"': title} if title else None,
        "Xmp.dc.description": {'lang="x-default"': description} if description else None,
        "Xmp.dc.subject": list(keywords) or None,
    }
    if digital_source_type:
        xmp["Xmp.iptcExt.DigitalSourceType"] = digital_source_type
    exif = {"Exif.Image.ImageDescription": description or None,
            "Exif.Image.XPTitle": None, "Exif.Image.XPSubject": None, "Exif.Image.XPKeywords": None}
    try:
        with pyexiv2.ImageData(jpeg) as img:
            if img.get_mime_type() != "image/jpeg":
                raise BadInput(name, f"cannot embed metadata: not a JPEG ({img.get_mime_type()})")
            copies = [k for k in img.read_xmp() if k.split("/", 1)[0].split("[", 1)[0] in KEYWORD_COPIES]
            img.modify_xmp({**xmp, **dict.fromkeys(copies)})
            img.modify_exif(exif)
            # pyexiv2 writes every XMP array as rdf:Seq; dc:subject is an rdf:Bag in the
            # Dublin Core schema. exiv2 escapes item text, so the container tags are unambiguous.
            packet = img.read_raw_xmp()
            fixed = _SUBJECT_SEQ.sub(r"\1<rdf:Bag>\2</rdf:Bag>\3", packet, count=1)
            if fixed != packet:
                img.modify_raw_xmp(fixed)
            written = img.get_bytes()
    except RuntimeError as exc:
        raise BadInput(name, f"cannot embed metadata ({exc})") from exc
    owned = _OWNED_XMP + _COPIES_XMP + ([_SOURCE_TYPE_XMP] if digital_source_type else [])
    written = edit_carried(written, lambda packet: _without(packet, owned))
    return with_segments(written, _APP13, _iim_segments(jpeg, iptc))


def _without(packet: bytes, properties: list[re.Pattern[bytes]]) -> bytes:
    for prop in properties:
        packet = prop.sub(b"", packet)
    return packet


def _iim_segments(jpeg: bytes, fields: dict[tuple[int, int], list[str]]) -> list[bytes]:
    """The APP13 segments of ``jpeg``'s Photoshop block with ``fields`` in its IIM (every other resource and
    dataset byte for byte; exiv2 would rewrite a TimeCreated ``132723`` as ``132723+0000``, a zone it never had)."""
    block = iim.photoshop_block([payload for marker, payload in metadata_segments(jpeg) if marker == _APP13])
    found = iim.resources(block)
    old = next((r for r in found if r.id == iim.IIM_RESOURCE), None)
    new = iim.Resource(iim.IIM_RESOURCE, old.name if old else b"",
                       iim.encode_datasets(iim.with_fields(iim.datasets(old.data) if old else [], fields)))
    kept = [new if r.id == iim.IIM_RESOURCE else r for r in found if r.id != iim.IIM_DIGEST]
    if old is None:
        kept.append(new)
    return [app_segment(_APP13, payload) for payload in iim.app13_payloads(kept)]
