"""The package's layout: no import cycles between bnstudy's modules (imports at module level and
inside functions alike), no private name of one module imported by another, and modules of about
300 lines at most. Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "bnstudy"
MAX_LINES = 350  # "about 300"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(SRC.rglob("*.py")):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> tuple[set[str], list[str]]:
    """The bnstudy modules ``name`` imports anywhere in its source, and the private names
    (``_x``) it imports from other modules."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found, private = set(), []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in MODULES else base)
                if a.name.startswith("_") and not a.name.startswith("__") and \
                        base.startswith("bnstudy"):
                    private.append(f"{name} imports {full}")
    return {m for m in found if m in MODULES and m != name}, private


GRAPH = {m: _imports(m, p)[0] for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state, stack, cycles = {}, [], []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == "open":
                cycles.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert len(MODULES) > 40 and GRAPH["bnstudy.networks.models"]  # the walk sees the package
    assert _cycles(GRAPH) == []


def test_no_private_names_across_modules():
    assert [p for m, path in MODULES.items() for p in _imports(m, path)[1]] == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def test_the_top_level_shows_the_architecture():
    """At most 12 modules at the package's top level; the rest lives in subpackages named for
    their stage (planning, the command line, data, networks, train, measures, ...)."""
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert len(top) <= 12, top


# who may import a subpackage that sits on top of the others: nothing imports the command line
# but the entry points, and only the command line and the report read the study's plan
ON_TOP = {"bnstudy.cli": ("bnstudy.__main__", "bnstudy.forkserver", "bnstudy.cli"),
          "bnstudy.planning": ("bnstudy.cli", "bnstudy.report", "bnstudy.planning")}


@pytest.mark.parametrize("package", sorted(ON_TOP))
def test_no_import_runs_back_up(package):
    up = [f"{m} -> {d}" for m, deps in GRAPH.items() for d in deps
          if (d == package or d.startswith(package + "."))
          and not any(m == a or m.startswith(a + ".") for a in ON_TOP[package])]
    assert up == []


def test_the_upward_check_sees_an_upward_import():
    GRAPH["bnstudy.config.fake"] = {"bnstudy.planning.plan"}
    try:
        with pytest.raises(AssertionError):
            test_no_import_runs_back_up("bnstudy.planning")
    finally:
        del GRAPH["bnstudy.config.fake"]


# the claims ledger's rooms, in the order a row passes through them (bnstudy/claims/__init__.py):
# a module in a room imports from its own room or an earlier one, never back up; the modules at
# the top of claims/ (the claims list, the pairing of a row, the ledger) may import any room
ROOMS = ("declare", "values", "decide", "say")


def _room(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["bnstudy", "claims"] or len(parts) < 3:
        return None
    return ROOMS.index(parts[2]) if parts[2] in ROOMS else len(ROOMS)  # the top: after all


def _claims_upward(graph: dict[str, set[str]]) -> list[str]:
    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps)
            if _room(m) is not None and _room(m) < len(ROOMS) and _room(d) is not None
            and _room(d) > _room(m)]


def test_the_claims_rooms_are_read_top_to_bottom():
    rooms = {p.name for p in (SRC / "claims").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(ROOMS)
    assert all(f"bnstudy.claims.{r}" in MODULES for r in ROOMS)
    assert len([m for m in MODULES if m.startswith("bnstudy.claims.")]) > 20  # the walk sees it
    assert _claims_upward(GRAPH) == []


def test_the_rooms_check_sees_an_arrow_back_up():
    assert _claims_upward({"bnstudy.claims.values.metrics": {"bnstudy.claims.decide.rules"}})
    assert _claims_upward({"bnstudy.claims.say.words": {"bnstudy.claims.ledger"}})
    assert not _claims_upward({"bnstudy.claims.say.words": {"bnstudy.claims.declare.claim"},
                               "bnstudy.claims.ledger": {"bnstudy.claims.say.words"}})
