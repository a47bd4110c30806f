"""Reading a ledger back in tests: every entry, through the production line parser."""

from __future__ import annotations

from pathlib import Path

from tasks.stores.ledger import Ledger, LedgerState
from tasks.stores.ledger_lines import Entry, parse_line, tail_key


def ledger_entries(path: Path) -> list[Entry]:
    """The well-formed entries of the file in order, and a cut-off last line that names its key."""
    if not path.exists():
        return []
    known = Ledger(path).agencies  # the agencies of the ledger's workdir, as the ledger reads them
    found = []
    with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
        for line in fh:
            if line.endswith("\n"):
                if line.strip() and not line.lstrip().startswith("#"):
                    try:
                        found.append(parse_line(line[:-1], known))
                    except ValueError:
                        pass
            elif tail_key(line, known):
                found.append(parse_line("\t".join(line.split("\t")[:5]), known))
    return found


def done_keys(state: LedgerState) -> set[tuple[str, str]]:
    """Every (agency, sha256) key a read of the ledger counts as uploaded."""
    return {(agency, sha) for agency, shas in state.done.items() for sha in shas}
