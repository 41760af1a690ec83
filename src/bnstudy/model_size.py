"""What one sample costs a model, counted on the meta device: the inputs of the cluster estimate.

:mod:`bnstudy.planning.resources` sizes each job's request from the work it does, and a job's work
is
counted in sample passes through its model. What a pass costs follows from the model's shape,
not its weights, so :func:`size` builds the model on the meta device (shapes only, nothing
allocated: milliseconds, as :func:`bnstudy.config.model_checks.plan`), without normalizers and
dropout,
and runs one input through it with a hook on every leaf module:

- ``params``: the parameter count (weights, optimizer state and checkpoints scale with it);
- ``macs``: multiply-accumulates of one forward sample: each leaf's weight matrix times the
  positions it is applied at (a conv: its output's height x width; a linear map: 1). This, not
  the parameter count, is what a convolution costs: a ResNet9 on 32x32 images has 6.6 M
  parameters and 379 M MACs;
- ``activations`` and ``largest``: floats of every leaf's output together (what a pass with
  gradients keeps) and of the largest one (the peak of a pass without them);
- ``layers``: hidden blocks (a normalizer's layers) plus the head.

Importing this module does not import torch; :func:`size` and :func:`refresh` do (the workflow
has imported it already to check the config).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Size:
    params: int
    macs: int
    activations: int
    largest: int
    inputs: int  # floats of one input sample
    layers: int


def size(model_entry: dict, input_shape, out_dim: int) -> Size:
    """The :class:`Size` of a config's model entry on inputs of ``input_shape``: counted once
    per entry, input shape, package source and torch (:mod:`bnstudy.keyed_cache`), read back
    in later Snakemake starts without importing torch."""
    from bnstudy import keyed_cache

    counted = keyed_cache.remember(
        "model-size", [model_entry, list(input_shape), out_dim],
        lambda: asdict(_count(model_entry, input_shape, out_dim)),
        lambda v: isinstance(v, dict) and set(v) == set(Size.__dataclass_fields__)
        and all(type(x) is int for x in v.values()))
    return Size(**counted)


def _count(model_entry: dict, input_shape, out_dim: int) -> Size:
    import torch

    from bnstudy.networks import meta, models
    from bnstudy.networks.blocks import blocks

    macs, outs = [0], []

    def count(module, _inputs, out):
        if isinstance(out, torch.Tensor):
            outs.append(out.numel())
            w = getattr(module, "weight", None)
            if isinstance(w, torch.Tensor) and w.dim() >= 2 and out.dim() >= 2:
                macs[0] += w.numel() * (out.numel() // out.shape[1])

    net = meta.build(models.ModelConfig.from_dict(model_entry), input_shape, out_dim)
    # one sample through it on the CPU, its weights zero-stride zeros of their shapes (nothing
    # allocated): torch's meta kernels of linear maps and convolutions are Python
    # decompositions whose first call imports torch._dynamo (about 2 s of CPU per start)
    meta.materialize(net)
    hooks = [m.register_forward_hook(count) for m in net.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            net.eval()(torch.zeros(1, *input_shape))
    finally:
        for h in hooks:
            h.remove()
    inputs = 1
    for d in input_shape:
        inputs *= int(d)
    return Size(params=sum(p.numel() for p in net.parameters()), macs=macs[0],
                activations=sum(outs), largest=max(outs, default=0), inputs=inputs,
                layers=len(blocks(net)) + 1)


def refresh(model_entry: dict, norm: str) -> tuple[int, int] | None:
    """``(samples, every)``: a normalizer that re-estimates its statistics from ``samples``
    training inputs every ``every`` steps (population normalization), from its configured
    options over its defaults; None for the others. Cached as :func:`size` is."""
    from bnstudy import keyed_cache

    stored = keyed_cache.remember(  # [] for None
        "norm-refresh", [norm, model_entry.get("norm_options", {}).get(norm)],
        lambda: list(_refresh(model_entry, norm) or ()),
        lambda v: isinstance(v, list) and len(v) in (0, 2) and all(type(x) is int for x in v))
    return tuple(stored) or None


def _refresh(model_entry: dict, norm: str) -> tuple[int, int] | None:
    from bnstudy.networks import normalizers

    entry = normalizers.REGISTRY.get(norm)
    if entry is None:
        return None
    opts = entry.with_options(model_entry.get("norm_options", {}).get(norm)).options
    if "n_samples" in opts and "refresh_every" in opts:
        return int(opts["n_samples"]), int(opts["refresh_every"])
    return None
