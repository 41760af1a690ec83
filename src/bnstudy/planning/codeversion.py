"""Code versions: a hash of the package modules a job runs, for code-change reruns.

:func:`code_version` hashes the given entry modules (paths relative to ``src/bnstudy``) and,
transitively, every package module they import, found by reading their ``import`` statements
(anywhere in the module, so imports inside functions count). A module added behind an import
(a normalizer's layers, a measure's implementation) therefore counts without being listed.

Which module imports which depends on the source only, so each module's imports are read once
per content and kept in :mod:`bnstudy.keyed_cache`: a later Snakemake start (the rules' ``code``
params) only hashes the files, and one after an edit parses the edited module alone.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]  # src/bnstudy


def _module_file(parts) -> str | None:
    """``src/bnstudy``-relative file of the module or package ``parts``, or None."""
    base = Path(*parts) if parts else Path()
    for cand in (base.with_name(f"{base.name}.py") if parts else None, base / "__init__.py"):
        if cand is not None and (SRC / cand).is_file():
            return cand.as_posix()
    return None


@cache
def package_imports(rel: str) -> frozenset[str]:
    """Package modules that ``src/bnstudy/<rel>`` imports (static imports, at any depth of
    the module's code)."""
    graph = _graph(SRC)
    return frozenset(graph[rel]) if rel in graph else _parse(rel)


@cache
def _graph(src: Path) -> dict[str, list[str]]:
    """``{module: its package imports}`` of every module under ``src``. Each module's imports are
    kept in :mod:`bnstudy.keyed_cache` by its content (under a key of the package's module list
    and this parser's own source): a start after an edit parses the edited module only, one
    after a module was added or removed (which changes what an import resolves to) all of
    them."""
    from bnstudy import keyed_cache

    digests = {rel: d for rel, d in keyed_cache.file_digests(src).items() if rel.endswith(".py")}
    files = list(digests)
    parser = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    k = keyed_cache.key("import-graph", {"modules": files, "parser": parser}, package=False)
    stored = keyed_cache.get("import-graph", k)
    stored = stored if isinstance(stored, dict) else {}
    graph, entries = {}, {}
    for rel in files:
        old = stored.get(rel)
        if (isinstance(old, list) and len(old) == 2 and old[0] == digests[rel]
                and isinstance(old[1], list) and all(isinstance(x, str) for x in old[1])):
            graph[rel] = old[1]
        else:
            graph[rel] = sorted(_parse(rel))
        entries[rel] = [digests[rel], graph[rel]]
    if entries != stored:
        keyed_cache.put("import-graph", k, entries)
    return graph


def _parse(rel: str) -> frozenset[str]:
    here, found = list(Path(rel).parent.parts), set()
    for node in ast.walk(ast.parse((SRC / rel).read_text(), rel)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
            elif (node.module or "").split(".")[0] == "bnstudy":
                base = []
            else:
                continue
            mod = [p for p in (node.module or "").split(".") if p]
            mod = mod[1:] if not node.level else mod
            for alias in node.names:  # `from pkg import submodule` or `from mod import name`
                found.add(_module_file([*base, *mod, alias.name]) or _module_file([*base, *mod]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bnstudy":
                    found.add(_module_file(alias.name.split(".")[1:]))
    return frozenset(found - {None})


def closure(entries) -> list[str]:
    """The entry modules and every package module they import, transitively, sorted."""
    todo, seen = list(entries), set()
    while todo:
        rel = todo.pop()
        if rel not in seen:
            if not (SRC / rel).is_file():
                raise FileNotFoundError(f"code entry {rel!r} is not a module under {SRC}")
            seen.add(rel)
            todo.extend(package_imports(rel))
    return sorted(seen)


def code_version(entries) -> str:
    """Hash (16 hex digits) of the source of :func:`closure` ``(entries)``."""
    h = hashlib.sha256()
    for rel in closure(entries):
        h.update(rel.encode())
        h.update((SRC / rel).read_bytes())
    return h.hexdigest()[:16]
