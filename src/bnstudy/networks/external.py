"""A user's own normalizer, named by a study config without forking the package.

A config's ``normalizers:`` section names each one and where it comes from::

    normalizers:
      rmsnorm:
        from: my_norms.py:rms_norm        # a file (relative to the working directory) : attribute
        claims_as: batchnorm              # optional: the ledger reads BN's claims on it too
      scalenorm: {from: mypkg.norms:ScaleNorm}  # an importable module : attribute
      fancy: {from: fancy}                # an installed package's entry point (group
                                          # bnstudy.normalizers) of that name

The attribute is a :class:`bnstudy.networks.norms.registry.Normalizer` (its name is replaced by
the config's) or a function ``build(num_features, kind, **options)`` returning the layer (a
Normalizer with the default traits is made of it). Either way it is registered through
:func:`bnstudy.networks.norms.registry.register`, so it passes the conventions every built-in
passes (both input kinds, float32 statistics under autocast, a per-unit weight) and fails, like a
built-in, with a one-line error naming the entry, before any job. Jobs find it again from the run
spec (:class:`bnstudy.train.spec.RunSpec` carries ``normalizer_from``), and its file's content is
part of its runs' code version (:func:`source_digest`), so editing it reruns its runs only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

GROUPS = ("bnstudy.normalizers", "bnstudy.models", "bnstudy.datasets")
_TARGET = re.compile(r"^(?P<mod>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_.]*)$")
LOADED: dict[str, str] = {}  # normalizer name -> the target it was registered from


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


def register_normalizer(name: str, target: str):
    """Register the normalizer ``target`` names under ``name`` (once: a second call with the same
    target returns it; another target under a registered name is refused)."""
    from bnstudy.networks import normalizers  # noqa: F401 (the built-ins, registered first)
    from bnstudy.networks.norms import registry

    if name in registry.REGISTRY:
        if LOADED.get(name) == target:
            return registry.REGISTRY[name]
        raise ValueError(f"normalizer {name!r} is already registered (by "
                         f"{registry.SOURCES.get(name, '?')}); give {target!r} another name")
    obj = resolve(target, "bnstudy.normalizers")
    if isinstance(obj, registry.Normalizer):
        norm = dataclasses.replace(obj, name=name)
    elif callable(obj) and not isinstance(obj, type):
        norm = registry.Normalizer(name, obj, description=f"from {target}")
    else:
        raise ValueError(f"normalizer {name!r} from {target!r} is a {type(obj).__name__}, not "
                         "a bnstudy Normalizer nor a function build(num_features, kind) "
                         "returning the layer (EXTENDING.md, 'A normalizer')")
    try:
        registry.conventions(norm)
    except ValueError as e:
        raise ValueError(f"{e} (from {target!r})") from None
    registry.REGISTRY[name] = norm
    registry.SOURCES[name] = target
    LOADED[name] = target
    return norm


def register_config(cfg: dict) -> dict[str, str]:
    """Register every entry of a config's ``normalizers:`` section; ``{name: target}``. A
    failure is a ValueError ``normalizers.<name>: ...``."""
    out = {}
    for name, entry in (cfg.get("normalizers") or {}).items():
        try:
            register_normalizer(name, entry["from"])
        except ValueError as e:
            raise ValueError(f"normalizers.{name}: {e}") from None
        out[name] = entry["from"]
    return out


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
