"""BN-Explained §4's "smart initialization" as a normalizer, ``bn_init``: at step 0, layer by
layer from the input, the mean ``mu`` and biased variance ``sigma^2`` of each hidden layer's
pre-activation over the *whole* training set are computed (with the earlier layers already
normalized) and BN with ``gamma = 1, beta = 0`` is frozen into the network; training then runs
without BN. With ``fold=True`` (default) the map is folded into the layer (``W <- W / sigma``,
``b <- (b - mu) / sigma``, ``sigma = sqrt(var + eps)``), so SGD trains an ordinary network from
that initialization (a map without bias, as in the dln, keeps the fixed shift ``mu / sigma`` in
its :class:`FrozenAffine`); with ``fold=False`` it stays a separate fixed map
(:class:`FrozenAffine`) after an unchanged layer, which also rescales the layer's gradients.

It needs the trainer like :mod:`bnstudy.networks.norms.population`'s normalizers: the
normalizer's ``on_init`` hook runs once after the model is built, before the step-0 checkpoint,
and stores everything in parameters and buffers, so a checkpoint restores the trained model
without rerunning it.
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.blocks import blocks
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.norms.fixed import FrozenAffine
from bnstudy.networks.norms.registry import Normalizer, check_eps, register, require


@torch.no_grad()
def fold_bn_init(model: nn.Module, ctx, options: dict, chunk: int = 4096) -> None:
    """BN-Explained §4: freeze whole-training-set BN (gamma=1, beta=0) into every hidden layer.

    One forward of the training set in chunks (:func:`bnstudy.networks.layer_stats.
    layer_by_layer`), each chunk waiting at every block until its map is fixed. Folding changes
    the block's linear/conv map, so there the chunks wait at the map's input and the map runs
    twice on each input: before the fold for the statistics, after it for the forward."""
    x, eps, fold = ctx.x, float(options["eps"]), bool(options["fold"])
    bl = blocks(model)
    if not all(isinstance(b.norm, FrozenAffine) for b in bl):
        raise ValueError("bn_init needs FrozenAffine norm layers")
    accs = [{"n": 0, "s": 0.0, "q": 0.0} for _ in bl]

    def grab(j: int, z: torch.Tensor) -> None:
        h = bl[j].linear.forward(z) if fold else z  # the norm layer's input: the pre-activation
        h = h.transpose(0, 1).reshape(h.shape[1], -1).double()
        acc = accs[j]
        acc["n"] += h.shape[1]
        acc["s"] = acc["s"] + h.sum(1)
        acc["q"] = acc["q"] + (h * h).sum(1)

    def freeze(j: int) -> None:
        acc, block = accs[j], bl[j]
        mean = acc["s"] / acc["n"]
        var = (acc["q"] / acc["n"] - mean * mean).clamp_min(0)
        sigma = torch.sqrt(var + eps)
        if fold:
            lin = block.linear
            w, b = lin.weight, lin.bias
            w.copy_(w / sigma.view(-1, *([1] * (w.dim() - 1))).to(w.dtype))
            if b is not None:
                b.copy_(((b.double() - mean) / sigma).to(b.dtype))
            else:  # a bias-free map (dln): the shift stays in the fixed map after it
                block.norm.shift.copy_((mean / sigma).to(block.norm.shift.dtype))
        else:
            block.norm.shift.copy_(mean.to(block.norm.shift.dtype))
            block.norm.scale.copy_((1 / sigma).to(block.norm.scale.dtype))

    layer_by_layer(model, x, chunk, [b.linear if fold else b.norm for b in bl], grab, freeze)


# -- the registry entry ------------------------------------------------------------------------
NORMALIZERS = ("bn_init",)


def _check_bn_init(o: dict) -> None:
    require(o, "fold", lambda v: isinstance(v, bool), "true or false")
    check_eps(o)


register(Normalizer(
    "bn_init", lambda c, kind, **_: FrozenAffine(c), options={"fold": True, "eps": 1e-5},
    check=_check_bn_init, on_init=lambda model, ctx, o: fold_bn_init(model, ctx, o),
    option_docs={"fold": "fold the frozen BN map into the layer's W, b (false: keep it a layer)",
                 "eps": "added to the whole training set's variance"},
    description="BN-Explained's smart init: whole-training-set BN frozen at step 0, no BN"))
