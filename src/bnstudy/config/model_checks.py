"""The checks of a model entry that need its architecture's plan, none of which allocates it.

- :func:`check_options`: the entry gives only options its architecture reads
  (:func:`bnstudy.networks.archs.options`), or, for a user's model (``from``), only
  :data:`bnstudy.networks.archs.FROM_OPTIONS`, and its function loads
  (:func:`bnstudy.networks.user_models.load`);
- :func:`plan`: the model built on the meta device (``torch.device("meta")``: shapes, no
  memory), without its normalizers and dropout (which add no weight matrices), to count its
  parameters against ``limits.parameters`` (default :data:`MAX_PARAMETERS`) and its hidden
  blocks, the layers a normalizer goes in: an arm with a normalizer whose model has none (a
  ``vgg`` whose ``channels`` holds only pooling, a ``dln`` of depth 1) would run as the plain
  net under the normalizer's name, so it is refused.

Errors are ValueErrors naming the bad value and what is allowed; :mod:`bnstudy.config.study`
prefixes the entry.
"""

from __future__ import annotations

from bnstudy.networks import archs, meta

MAX_PARAMETERS = 500_000_000  # the default of limits.parameters (2 GB of float32 weights)


def check_options(entry: dict) -> None:
    """A ValueError names the first option ``entry`` gives that its ``arch`` does not read."""
    if "from" in entry and "arch" not in entry:  # a user's model, loaded here: named first
        for key in entry:
            if key not in archs.FROM_OPTIONS:
                raise ValueError(f"{key}={entry[key]!r}: a user's model (from) has no option "
                                 f"{key!r} (its function's go in options); allowed: "
                                 f"{sorted(archs.FROM_OPTIONS)}")
        from bnstudy.networks import user_models

        user_models.load(entry["from"])
        return
    arch = entry.get("arch")
    if arch not in archs.ARCH_OPTIONS:
        return  # the schema and ModelConfig name an unknown arch
    allowed = archs.options(arch)
    for key in entry:
        if key not in allowed:
            raise ValueError(f"{key}={entry[key]!r}: arch {arch} has no option {key!r} (it would "
                             f"be ignored); allowed: {allowed}")


def plan(model_cfg, input_shape, out_dim: int) -> tuple[int, int]:
    """``(parameters, hidden blocks)`` of the model on inputs of ``input_shape``, counted on the
    meta device (nothing allocated, no initialization run); a ValueError names a model that
    cannot be built."""
    from bnstudy.networks.blocks import blocks

    net = meta.build(model_cfg, input_shape, out_dim)
    return sum(p.numel() for p in net.parameters()), len(blocks(net))


def check_plan(model_cfg, norms, input_shape, out_dim: int, cap: int) -> None:
    """The model has at most ``cap`` parameters and, when any of ``norms`` is a normalizer, at
    least one hidden block for it."""
    n, hidden = plan(model_cfg, input_shape, out_dim)
    if n > cap:
        raise ValueError(f"has {n:,} parameters (counted without allocating), more than "
                         f"limits.parameters = {cap:,}; allowed: a smaller model, or a larger "
                         "limits.parameters")
    arms = [m for m in norms if m != "none"]
    if arms and hidden == 0:
        what = {"vgg": f"channels {list(model_cfg.channels)} has no conv width",
                "dln": f"depth {model_cfg.depth} has no hidden map"}.get(model_cfg.arch,
                                                                          "no hidden block")
        raise ValueError(f"has no layer for the normalizer {arms[0]!r} ({what}), so the arm "
                         "would run the plain net; allowed: a model with at least one hidden "
                         "block (vgg: a conv width in channels; dln: depth >= 2), or norms: "
                         "[none]")
