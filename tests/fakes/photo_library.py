"""A contributor's photo library as cameras, Lightroom, macOS and older keywording tools leave it, written by the
tests (Pillow + hand-built segments, no downloads): odd names, links and non-files, legacy IIM, a corrupt EXIF
block, the contributor's creator/rights/credit/location, twins and a duplicate.

:func:`write_library` writes it and returns what should become of every entry (:class:`Expected`). The
segment builders are used on their own by the image tests.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from xml.sax.saxutils import escape

from PIL import Image

#: Big enough for every default agency (Adobe's 4 MP is the largest minimum of the three).
SIZE = (2400, 1800)


def picture(seed: int, size: tuple[int, int] = SIZE) -> Image.Image:
    """A distinct picture per ``seed`` (gradients at different angles: different perceptual hashes)."""
    ramp = Image.linear_gradient("L").resize(size)
    channels = [ramp.rotate((seed * 47 + k * 120) % 360) for k in range(3)]
    return Image.merge("RGB", channels)


def segment(marker: int, payload: bytes) -> bytes:
    return bytes((0xFF, marker)) + (len(payload) + 2).to_bytes(2, "big") + payload


def jpeg(seed: int, *segments: bytes, exif: bytes = b"", size: tuple[int, int] = SIZE) -> bytes:
    """A JPEG of :func:`picture` with ``segments`` right after its start (and Pillow's ``exif``)."""
    buf = BytesIO()
    picture(seed, size).save(buf, "JPEG", quality=80, exif=exif)
    data = buf.getvalue()
    return data[:2] + b"".join(segments) + data[2:]


def png(seed: int, size: tuple[int, int] = SIZE) -> bytes:
    buf = BytesIO()
    picture(seed, size).save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def xmp_segment(*, title: str = "", description: str = "", keywords: tuple[str, ...] = (), creator: str = "",
                rights: str = "", credit: str = "", source: str = "", city: str = "", instructions: str = "",
                gps: tuple[str, str] | None = None) -> bytes:
    """An XMP APP1 segment as Lightroom writes one (dc, photoshop, Iptc4xmpCore, exif namespaces)."""
    def alt(tag: str, text: str) -> str:
        return (f"<{tag}><rdf:Alt><rdf:li xml:lang='x-default'>{escape(text)}</rdf:li></rdf:Alt></{tag}>"
                if text else "")

    props = [alt("dc:title", title), alt("dc:description", description), alt("dc:rights", rights)]
    if keywords:
        props.append("<dc:subject><rdf:Bag>" + "".join(f"<rdf:li>{escape(k)}</rdf:li>" for k in keywords)
                     + "</rdf:Bag></dc:subject>")
    if creator:
        props.append(f"<dc:creator><rdf:Seq><rdf:li>{escape(creator)}</rdf:li></rdf:Seq></dc:creator>")
    for tag, text in (("photoshop:Credit", credit), ("photoshop:Source", source), ("photoshop:City", city),
                      ("photoshop:Instructions", instructions)):
        if text:
            props.append(f"<{tag}>{escape(text)}</{tag}>")
    if city:
        props.append(f"<Iptc4xmpCore:Location>{escape(city)} harbour</Iptc4xmpCore:Location>")
    if gps:
        props.append(f"<exif:GPSLatitude>{gps[0]}</exif:GPSLatitude><exif:GPSLongitude>{gps[1]}</exif:GPSLongitude>")
    packet = ("<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?>"
              "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>"
              "<rdf:Description rdf:about='' xmlns:dc='http://purl.org/dc/elements/1.1/'"
              " xmlns:photoshop='http://ns.adobe.com/photoshop/1.0/'"
              " xmlns:Iptc4xmpCore='http://iptc.org/std/Iptc4xmpCore/1.0/xmlns/'"
              " xmlns:exif='http://ns.adobe.com/exif/1.0/'>"
              + "".join(props) + "</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end='w'?>")
    return segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00" + packet.encode("utf-8"))


def iim_segment(datasets: list[tuple[int, int, str]], encoding: str = "utf-8", declare: bool = True) -> bytes:
    """An APP13 Photoshop segment with IIM ``datasets`` (record, dataset, text) encoded in ``encoding``;
    1:90 says UTF-8 only when ``declare`` (older tools wrote Latin-1 without it)."""
    items = ([(1, 90, b"\x1b%G")] if declare else []) + [(2, 0, b"\x00\x04")]
    items += [(r, d, text.encode(encoding)) for r, d, text in datasets]
    block = b"".join(struct.pack(">BBBH", 0x1C, r, d, len(v)) + v for r, d, v in items)
    resource = b"8BIM" + (0x0404).to_bytes(2, "big") + b"\x00\x00" + len(block).to_bytes(4, "big") + block
    return segment(0xED, b"Photoshop 3.0\x00" + resource + b"\x00" * (len(block) % 2))


def exif_with(description: str = "", xp_title: str = "", xp_keywords: str = "") -> bytes:
    """Pillow EXIF bytes with ImageDescription and the Windows XPTitle / XPKeywords (UCS-2)."""
    exif = Image.Exif()
    if description:
        exif[0x010E] = description
    if xp_title:
        exif[0x9C9B] = xp_title.encode("utf-16-le") + b"\x00\x00"
    if xp_keywords:
        exif[0x9C9E] = xp_keywords.encode("utf-16-le") + b"\x00\x00"
    return exif.tobytes()


def corrupt_exif_segment() -> bytes:
    """An EXIF APP1 whose first IFD says it has 65 535 entries (exiv2 refuses the whole file)."""
    return segment(0xE1, b"Exif\x00\x00II\x2a\x00\x08\x00\x00\x00\xff\xff" + b"\x01" * 40)


@dataclass(frozen=True)
class Expected:
    """What should become of one entry of the library."""

    #: ``asset`` (ingested, described, uploaded), or ``named`` (in the summary's rejected list).
    outcome: str
    #: For an asset: its name in ``assets/``; for a named entry: a word its reason contains.
    detail: str
    #: For an asset: it embeds a title or keywords a person wrote. Without them (the photos about names), no
    #: describer sees it offline and no agency gets it (issue 52).
    embedded: bool = True


LIGHTHOUSE_XMP = dict(title="Old lighthouse at dusk", description="A white lighthouse on a rocky coast at dusk",
                      keywords=("lighthouse", "coast", "dusk", "sea", "rocks", "beacon", "maritime", "travel"),
                      creator="Ana Fotógrafa", rights="© 2026 Ana Fotógrafa, all rights reserved",
                      credit="Ana Fotógrafa / Studio Norte", source="Studio Norte archive", city="Porto",
                      instructions="No use in political campaigns", gps=("41,9.0N", "8,37.0W"))
LIGHTHOUSE_IIM = [(2, 80, "Ana Fotógrafa"), (2, 116, "© 2026 Ana Fotógrafa"), (2, 110, "Studio Norte"),
                  (2, 115, "Studio Norte archive"), (2, 5, "Old lighthouse at dusk")]
#: Latin-1 IIM without a charset record, as older keywording tools wrote it.
LEGACY_IIM = [(2, 5, "Café crème on a zinc bar"), (2, 120, "A café crème on the zinc bar of a Paris bistro"),
              (2, 80, "Jürgen Müller"), (2, 116, "© Jürgen Müller"),
              *((2, 25, k) for k in ("café", "crème", "coffee", "bistro", "paris", "zinc", "bar", "cup"))]
LONG_STEM = "Sunset over the harbour of Porto with fishing boats and the old town " * 4


def write_library(folder: Path) -> dict[str, Expected]:
    """Write the library into ``folder``; entry name (as the summary shows it) -> what should become of it."""
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, Expected] = {}

    def put(name: str, data: bytes, outcome: Expected) -> None:
        (folder / name).write_bytes(data)
        expected[os.fsencode(name).decode("utf-8", "backslashreplace")] = outcome

    lighthouse = jpeg(1, xmp_segment(**LIGHTHOUSE_XMP), iim_segment(LIGHTHOUSE_IIM),
                      exif=exif_with("8k, --ar 4:3 --v 6", xp_title="lighthouse raw", xp_keywords="raw;tags"))
    put("lighthouse.jpg", lighthouse, Expected("asset", "lighthouse.jpg"))
    put("lighthouse_copy.jpg", lighthouse, Expected("named", "same picture"))
    nfd = unicodedata.normalize("NFD", "Café crème.jpg")
    put(nfd, jpeg(2, iim_segment(LEGACY_IIM, encoding="latin-1", declare=False)), Expected("asset", "Café crème.jpg"))
    put("corrupt exif.jpg", jpeg(3, corrupt_exif_segment(), xmp_segment(title="Red fishing boat in the harbour",
                                                                         keywords=("boat", "harbour", "red"))),
        Expected("asset", "corrupt exif.jpg"))
    put("twin.jpg", jpeg(4), Expected("asset", "twin.jpg", embedded=False))
    put("twin.png", png(5), Expected("asset", "twin_", embedded=False))
    put("Sea.jpg", jpeg(6), Expected("asset", "Sea.jpg", embedded=False))
    put("sea.jpg", jpeg(7), Expected("asset", "sea_", embedded=False))
    long_name = LONG_STEM.replace(" ", "_")[:250 - 4] + ".jpg"
    put(long_name, jpeg(8), Expected("asset", long_name, embedded=False))
    put(os.fsdecode("pr\xe8s du port.jpg".encode("latin-1")), jpeg(9),
        Expected("asset", "près du port.jpg", embedded=False))

    (folder / "album.jpg").mkdir()
    expected["album.jpg"] = Expected("named", "folder")
    os.symlink(folder.parent, folder / "old shoots")
    expected["old shoots"] = Expected("named", "folder")
    os.symlink(folder / "gone.jpg", folder / "dangling.jpg")
    expected["dangling.jpg"] = Expected("named", "to nothing")
    os.symlink(folder / "loop.jpg", folder / "loop.jpg")
    expected["loop.jpg"] = Expected("named", "loops")
    os.mkfifo(folder / "pipe.jpg")
    expected["pipe.jpg"] = Expected("named", "FIFO")
    return expected
