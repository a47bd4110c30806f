"""The error kinds a caller branches on are named constants of ``tasks/core/errors.py``, used where they are raised
too (a kind misspelt where it is raised would pass every comparison by); their strings, part of the ``error_class``
stored in the dead-letter store, never change."""

from __future__ import annotations

import re
from pathlib import Path

from tasks.core import errors
from tasks.core.errors import StageStopped, TransientError, unreachable

ROOT = Path(__file__).resolve().parents[2]
NAMED = {"NETWORK": "network", "TIMEOUT": "timeout", "MODEL": "model", "REQUEST_SHAPE": "request_shape"}


def test_the_named_kinds_keep_their_stored_strings():
    assert {name: getattr(errors, name) for name in NAMED} == NAMED
    assert errors.FILE_GONE == "file_gone"
    assert TransientError("x", kind=errors.NETWORK, code="tls").error_class == "network:tls"
    assert StageStopped("x", kind=errors.REQUEST_SHAPE).error_class == "request_shape"
    assert unreachable(TransientError("x", kind="network")) and unreachable(TransientError("x", kind="timeout"))


def test_a_named_kind_is_raised_and_compared_by_its_name_never_spelt_out():
    kinds = "|".join(NAMED.values())
    spelt = re.compile(rf"""\b(kind|default_kind)\s*=\s*["']({kinds})["']|\.kind\b.*["']({kinds})["']"""
                       r"""|\bcode\s*=\s*["']file_gone["']|\.code\b.*["']file_gone["']""")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in ("tasks", "flows") for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if spelt.search(line)]
    assert found == []
