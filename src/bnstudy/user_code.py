"""A user's own object named by import path, without forking the package: ``file.py:attr`` (a
file relative to the working directory), ``module:attr`` (an importable module) or the name of an
installed package's entry point in a group (:data:`GROUPS`). :func:`resolve` loads it with a
one-line error naming the target; :func:`source_digest` gives its file's content as a code
version. A leaf of the package: the user's normalizers (:mod:`bnstudy.networks.external`), models
(:mod:`bnstudy.networks.user_models`) and datasets (:mod:`bnstudy.data.user`) use it, without
importing each other.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

GROUPS = ("bnstudy.normalizers", "bnstudy.models", "bnstudy.datasets")
_TARGET = re.compile(r"^(?P<mod>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_.]*)$")


def _fail(target: str, why: str) -> ValueError:
    return ValueError(f"cannot load {target!r}: {why}; allowed: 'module:attribute', "
                      "'path/to/file.py:attribute' or an entry point's name")


def _module(spec: str, target: str):
    if spec.endswith(".py"):
        path = Path(spec)
        if not path.is_file():
            raise _fail(target, f"no file {path} (relative to {Path.cwd()})")
        name = "bnstudy_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        loader = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        try:
            loader.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 (the user's file: any error, named in one line)
            del sys.modules[name]
            raise _fail(target, f"{path} raised {type(e).__name__}: {e}") from None
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise _fail(target, f"no module {spec!r} ({e})") from None


def resolve(target: str, group: str):
    """The object ``target`` names: ``module:attribute``, ``file.py:attribute`` or an entry
    point's name in ``group``; a ValueError of one line says why it cannot be loaded."""
    if group not in GROUPS:
        raise ValueError(f"unknown entry-point group {group!r}; valid: {', '.join(GROUPS)}")
    if not isinstance(target, str) or not target.strip():
        raise _fail(str(target), "not a non-empty string")
    m = _TARGET.match(target)
    if m is None:
        found = [ep for ep in metadata.entry_points(group=group) if ep.name == target]
        if not found:
            names = sorted(ep.name for ep in metadata.entry_points(group=group)) or ["none"]
            raise _fail(target, f"no ':' and no installed entry point of that name in group "
                                f"{group} (installed: {', '.join(names)})")
        try:
            return found[0].load()
        except Exception as e:  # noqa: BLE001
            raise _fail(target, f"entry point raised {type(e).__name__}: {e}") from None
    obj = _module(m["mod"], target)
    for part in m["attr"].split("."):
        if not hasattr(obj, part):
            raise _fail(target, f"{m['mod']} has no attribute {m['attr']!r}")
        obj = getattr(obj, part)
    return obj


def source_digest(target: str) -> str:
    """A digest of the source file ``target`` loads from (its file, or its module's file found
    without importing it; the target itself for an entry point): its runs' code version."""
    m = _TARGET.match(target)
    path = None
    if m and m["mod"].endswith(".py"):
        path = Path(m["mod"])
    elif m:
        try:
            found = importlib.util.find_spec(m["mod"])
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and found.origin.endswith(".py"):
            path = Path(found.origin)
    h = hashlib.sha256(target.encode())
    if path is not None and path.is_file():
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def config_digests(cfg) -> list[str]:
    """:func:`source_digest` of every user's normalizer and model a study config names (the
    ``from`` of its ``normalizers`` and ``models`` entries), in order."""
    sections = [cfg.get(s) for s in ("normalizers", "models")] if isinstance(cfg, dict) else []
    return [source_digest(e["from"]) for sec in sections if isinstance(sec, dict)
            for e in sec.values() if isinstance(e, dict) and isinstance(e.get("from"), str)]
