"""Title, description and keywords embedded in a JPEG (XMP and IPTC), with exiv2.

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

IPTC 1:90 ``CodedCharacterSet`` is set to UTF-8 (``ESC % G``). IPTC values
longer than the IIM standard's byte limits are shortened at a word boundary
(never inside a UTF-8 character); XMP has no limits and carries the full
values. Earlier values of these fields (other languages, old keywords) are
replaced. The result is deterministic: exiv2 adds no timestamp, so the same
input bytes and metadata give the same output bytes.

Every other XMP and IPTC field already in ``jpeg`` (the contributor's creator,
rights, credit, location … that :func:`tasks.images.ready.ready_jpeg` carried
over) is left as it is, and so is a digital source type when none is given.
EXIF is kept in step with what is written (the Metadata Working Group's
guidelines): ``ImageDescription`` becomes the description, and the Windows
``XPTitle``, ``XPSubject`` and ``XPKeywords`` are removed (they would contradict it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyexiv2

from tasks.agencies.text import clean_cell, shorten
from tasks.core.errors import BadInput

#: IPTC IIM 4.2 maximum lengths in bytes.
IPTC_OBJECT_NAME_BYTES = 64
IPTC_CAPTION_BYTES = 2000
IPTC_KEYWORD_BYTES = 64
#: IPTC 1:90 value announcing UTF-8.
IPTC_UTF8 = "\x1b%G"

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


def embed_metadata(jpeg: bytes, title: str, description: str, keywords: Sequence[str], *, name: str = "image",
                   digital_source_type: str | None = None) -> bytes:
    """A copy of ``jpeg`` carrying ``title``, ``description`` and ``keywords`` (order kept) in XMP and IPTC.

    The caller chooses the values (e.g. :func:`tasks.agencies.rows.embedded_fields`);
    they are only made safe here with :func:`~tasks.agencies.text.clean_cell`
    (one line, no control characters, which XML cannot carry; clean values are
    unchanged), empty keywords are dropped, and the IPTC copies are shortened to
    the IIM limits. Raises BadInput naming ``name`` when exiv2 cannot read or
    write the bytes as a JPEG.
    """
    title, description = clean_cell(title), clean_cell(description)
    keywords = [k for k in (clean_cell(k) for k in keywords) if k]
    # None deletes the field, so an empty value leaves no empty dataset or container behind.
    iptc = {
        "Iptc.Envelope.CharacterSet": IPTC_UTF8,
        "Iptc.Application2.ObjectName": fit_bytes(title, IPTC_OBJECT_NAME_BYTES) or None,
        "Iptc.Application2.Caption": fit_bytes(description, IPTC_CAPTION_BYTES) or None,
        "Iptc.Application2.Keywords": [fit_bytes(k, IPTC_KEYWORD_BYTES) for k in keywords] or None,
    }
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
            img.modify_iptc(iptc)
            img.modify_xmp(xmp)
            img.modify_exif(exif)
            # pyexiv2 writes every XMP array as rdf:Seq; dc:subject is an rdf:Bag in the
            # Dublin Core schema. exiv2 escapes item text, so the container tags are unambiguous.
            packet = img.read_raw_xmp()
            fixed = _SUBJECT_SEQ.sub(r"\1<rdf:Bag>\2</rdf:Bag>\3", packet, count=1)
            if fixed != packet:
                img.modify_raw_xmp(fixed)
            return img.get_bytes()
    except RuntimeError as exc:
        raise BadInput(name, f"cannot embed metadata ({exc})") from exc
