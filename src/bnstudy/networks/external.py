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

from bnstudy.user_code import GROUPS, resolve, source_digest  # noqa: F401 (re-exported)

LOADED: dict[str, str] = {}  # normalizer name -> the target it was registered from


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
