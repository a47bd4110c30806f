"""An agency's CSV dialect, as its spec's ``[csv]`` table says: delimiter, quoting, line ends, encoding, BOM.

Python's ``csv`` module writes every file, so a cell holding the delimiter, a
quote or (never, after cleaning) a line break is quoted by the same rules the
agencies' parsers read. Nothing else in the project spells a CSV byte.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from tasks.agencies.spec import CsvFormat

_LINE_ENDS = {"crlf": "\r\n", "lf": "\n"}
_QUOTING = {"minimal": csv.QUOTE_MINIMAL, "all": csv.QUOTE_ALL}


def csv_text(fmt: CsvFormat, rows: Iterable[Iterable[str]]) -> str:
    """Rows as CSV text in the dialect of ``fmt``."""
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=fmt.delimiter, quoting=_QUOTING[fmt.quoting],
                        lineterminator=_LINE_ENDS[fmt.line_ending])
    writer.writerows(rows)
    return buf.getvalue()


def csv_bytes(fmt: CsvFormat, rows: Iterable[Iterable[str]]) -> bytes:
    """Rows as CSV bytes in the encoding of ``fmt`` (the BOM is added by the file writer).

    Raises UnicodeEncodeError for a character outside an ``ascii`` encoding:
    :func:`unencodable` finds it first, so a row that has one is never built.
    """
    return csv_text(fmt, rows).encode(fmt.encoding)


def unencodable(fmt: CsvFormat, cells: Iterable[str]) -> str:
    """The first character of ``cells`` the encoding of ``fmt`` cannot write, or ""."""
    for cell in cells:
        try:
            cell.encode(fmt.encoding)
        except UnicodeEncodeError as exc:
            return cell[exc.start]
    return ""


def bom_bytes(fmt: CsvFormat) -> bytes:
    """The UTF-8 byte order mark when the format asks for one, else nothing."""
    return b"\xef\xbb\xbf" if fmt.bom else b""

