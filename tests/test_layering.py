"""The house's layering, checked: what each folder may import (docs/ARCHITECTURE.md, "What may import what").

Every import in flows/, tasks/ and harness/ counts, late ones inside functions too (a late import hides a
dependency; it does not remove it). Read with ``ast``: nothing here imports the project.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each folder and the folders it may import from, lowest first (its own folder is always allowed).
LAYERS: dict[str, set[str]] = {
    "tasks": set(),  # the package's own __init__
    "tasks.core": set(),
    "tasks.agencies": {"tasks.core"},
    "tasks.images": {"tasks.core", "tasks.agencies"},
    "tasks.gemini": {"tasks.core", "tasks.agencies", "tasks.images"},
    "tasks.transports": {"tasks.core", "tasks.agencies", "tasks.images"},
    "tasks.stores": {"tasks.core", "tasks.agencies", "tasks.images"},
    # the OpenAI-compatible boundary asks what the Gemini describer asks (its prompt, its answer's schema, its limiter)
    "tasks.openai_compat": {"tasks.core", "tasks.agencies", "tasks.images", "tasks.gemini"},
}
LAYERS["tasks.observe"] = set(LAYERS) | {"tasks.gemini", "tasks.transports", "tasks.stores", "tasks.openai_compat"}
LAYERS["tasks.stages"] = LAYERS["tasks.observe"] | {"tasks.observe"}
LAYERS["tasks.orchestration"] = LAYERS["tasks.stages"] | {"tasks.stages"}
LAYERS["harness"] = LAYERS["tasks.orchestration"] | {"tasks.orchestration"}
LAYERS["flows"] = LAYERS["harness"] | {"harness"}

#: Folders whose modules may import Prefect: where Prefect's side lives, and what shows runs to people.
PREFECT_ALLOWED = ("tasks.orchestration", "tasks.observe", "flows", "harness")
#: The one module below them that may: a Secret block is read lazily, only when no environment variable is set.
PREFECT_EXCEPTIONS = {"tasks.core.secrets"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("flows", "tasks", "harness"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module name ``name`` imports, absolute, relative imports resolved."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _project_module(imported: str) -> str | None:
    while imported:
        if imported in MODULES:
            return imported
        imported = imported.rpartition(".")[0]
    return None


def _folder(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "tasks" else parts[0]


GRAPH = {m: {t for i in _imports(m, p) if (t := _project_module(i)) and t != m} for m, p in MODULES.items()}


def test_every_folder_imports_only_the_folders_below_it():
    wrong = []
    for module, targets in GRAPH.items():
        folder = _folder(module)
        allowed = LAYERS.get(folder)
        assert allowed is not None, f"{module}: folder {folder} has no place in LAYERS (add it, lowest first)"
        wrong += [f"{module} imports {t}" for t in sorted(targets)
                  if _folder(t) != folder and _folder(t) not in allowed]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_prefect_is_imported_only_where_its_side_lives():
    wrong = [module for module, path in MODULES.items()
             if not module.startswith(PREFECT_ALLOWED) and module not in PREFECT_EXCEPTIONS
             and any(i == "prefect" or i.startswith("prefect.") for i in _imports(module, path))]
    assert not wrong, f"Prefect imported below tasks/orchestration and tasks/observe: {wrong}"


def test_no_import_cycle():
    cycles, done = [], set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            cycles.append(" -> ".join(trail[trail.index(module):] + [module]))
            return
        if module in done:
            return
        for target in sorted(GRAPH[module]):
            # A package's __init__ and its own modules are one unit, as Python imports them.
            if not target.startswith(module + ".") and not module.startswith(target + "."):
                visit(target, trail + [module])
        done.add(module)

    for module in sorted(GRAPH):
        visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_the_layering_names_only_folders_that_exist(folder):
    assert any(_folder(m) == folder for m in MODULES), f"{folder} has no module"


def test_importing_the_stages_loads_no_prefect():
    """What the stages import, all the way down, leaves Prefect unloaded (a module may import it late, where a run
    is in progress; none below orchestration and observe loads it just by being imported)."""
    import subprocess
    import sys

    stages = sorted(m for m in MODULES if _folder(m) == "tasks.stages" and m != "tasks.stages")
    script = f"import sys\nfor m in {stages!r}: __import__(m)\nprint(sorted(m for m in sys.modules if m == 'prefect'))"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", "importing the stages loaded Prefect"
