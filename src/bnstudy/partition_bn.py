"""Freezing BatchNorm as a fixed affine map for the partition-density measure.

``frozen_copy(model, bn_statistics, ...)`` returns an eval-mode deep copy whose BN layers
normalize with fixed statistics, so the network is one fixed function of its input:

- ``train_set``: the mean and biased variance (what BN divides by in train mode, BN-Explained
  eq. (3)) of every BN layer's input over the whole training set at the current weights, each
  layer's computed with the earlier BN layers already normalizing by their own full-set statistics,
  i.e. exactly the statistics a full-batch train-mode pass uses. One such pass when the set fits in
  ``chunk_rows`` rows, otherwise one chunked eval-mode pass per BN layer (same numbers, float64
  sums);
- ``batch``: the same over a given mini-batch (the step's recorded batch);
- ``running``: the stored running buffers as they are (plain eval mode).

The model passed in is never changed.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .normalizers import batchnorm_modules

BN_STATISTICS = ("train_set", "batch", "running")


def _moments(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dims = [d for d in range(h.dim()) if d != 1]
    h = h.double()
    return h.mean(dims), h.var(dims, unbiased=False)


@torch.no_grad()
def population_statistics(net: nn.Module, x: torch.Tensor, chunk_rows: int = 65536) -> list:
    """``[(mean, biased var)]`` of every BN layer's input over all of ``x``, each layer's with the
    earlier BN layers normalizing by their own statistics of ``x`` (what a full-batch train-mode
    pass uses). Changes ``net``'s BN buffers and mode: call it on a copy."""
    bns = batchnorm_modules(net)
    stats: dict[int, tuple] = {}
    if len(x) <= chunk_rows:  # one full-batch pass in train mode
        hooks = [bn.register_forward_pre_hook(
            lambda m, inp, j=j: stats.__setitem__(j, _moments(inp[0]))) for j, bn in enumerate(bns)]
        net.train()
        try:
            net(x)
        finally:
            for h in hooks:
                h.remove()
    else:  # layer by layer in eval mode, each layer's statistics accumulated over chunks
        net.eval()
        for j, bn in enumerate(bns):
            acc = {"n": 0, "s1": 0.0, "s2": 0.0}

            def grab(m, inp, acc=acc):
                h = inp[0].double().transpose(0, 1).reshape(inp[0].shape[1], -1)
                acc["n"] += h.shape[1]
                acc["s1"] = acc["s1"] + h.sum(1)
                acc["s2"] = acc["s2"] + (h * h).sum(1)

            hook = bn.register_forward_pre_hook(grab)
            try:
                for i in range(0, len(x), chunk_rows):
                    net(x[i: i + chunk_rows])
            finally:
                hook.remove()
            mean = acc["s1"] / acc["n"]
            stats[j] = (mean, (acc["s2"] / acc["n"] - mean * mean).clamp_min(0.0))
            _set_buffers(bn, *stats[j])
    return [stats[j] for j in range(len(bns))]


def _set_buffers(bn, mean, var) -> None:
    if bn.running_mean is None:  # track_running_stats=False: give it buffers to freeze
        bn.register_buffer("running_mean", torch.zeros_like(mean, dtype=torch.float32))
        bn.register_buffer("running_var", torch.ones_like(var, dtype=torch.float32))
        bn.track_running_stats = True
    bn.running_mean.copy_(mean)
    bn.running_var.copy_(var)


@torch.no_grad()
def frozen_copy(model: nn.Module, bn_statistics: str, x_train: torch.Tensor | None = None,
                batch: torch.Tensor | None = None, chunk_rows: int = 65536) -> nn.Module:
    """An eval-mode deep copy of ``model`` whose BN layers are fixed affine maps."""
    if bn_statistics not in BN_STATISTICS:
        raise ValueError(f"unknown bn_statistics {bn_statistics!r}; valid choices: "
                         f"{list(BN_STATISTICS)}")
    net = copy.deepcopy(model)
    bns = batchnorm_modules(net)
    if bns and bn_statistics != "running":
        if x_train is None or (bn_statistics == "batch" and batch is None):
            raise ValueError(f"bn_statistics={bn_statistics!r} needs the training inputs"
                             + (" and the step's batch" if bn_statistics == "batch" else ""))
        x = x_train if bn_statistics == "train_set" else x_train[batch.to(x_train.device)]
        for bn, (mean, var) in zip(bns, population_statistics(net, x, chunk_rows), strict=True):
            _set_buffers(bn, mean, var)
    elif any(bn.running_mean is None for bn in bns):
        raise ValueError("bn_statistics='running' needs BN layers that track running statistics")
    return net.eval()
