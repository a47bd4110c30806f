"""How the suite shares its xdist workers under `make test` (``-n 3 --dist loadgroup``), loaded by tests/conftest.py.

A test using a module-scoped fixture runs on the worker that runs its module's other such tests (an
``xdist_group`` mark of its own wins), so the fixture is made once, not again on each worker that takes one of them
(test_server.py's servers: ~35 s each time, under work stealing). The tests that start real servers (marked
``server``) and those that mostly wait by design (``waits``: a throttled FTP server) are handed out first: they are
the longest, and taken last they were the suite's tail (the throttled ones, asleep ~2 min on one worker while the
others had finished: docs/BENCHMARKS.md, stop 51).
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Group each test that uses a module-scoped fixture by its module, unless it has a group; put the ``server``
    and ``waits`` tests first, each module's tests in their order; then, on an xdist worker under --dist loadgroup,
    make sure each grouped test's id names its group."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        if any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # stable: each module keeps its order
    items.sort(key=lambda item: not (item.get_closest_marker("server") or item.get_closest_marker("waits")))
    yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _name_each_tests_group(items)


def _name_each_tests_group(items) -> None:
    """Give each grouped test's id the ``@group`` suffix xdist's scheduler reads its group from. Workaround:
    xdist 3.8.0 writes it to ``item._nodeid``, which pytest 9.2 no longer reads (its ids are ``item._id``), so the
    groups were silently ignored (pytest-dev/pytest-xdist#1386, open); nothing is done where xdist's own worked."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId  # pytest 9.2's (a pytest where xdist's suffix works has none)

            item._id = NodeId.parse(item.nodeid + suffix)
