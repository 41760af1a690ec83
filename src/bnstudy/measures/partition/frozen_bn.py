"""Freezing batch-statistics normalizers as fixed maps (partition density, recomputed
generalization statistics, BN jitter's population pass).

``frozen_copy(model, bn_statistics, ...)`` returns an eval-mode deep copy whose batch-statistics
layers (every layer of a normalizer the registry marks ``uses_batch_statistics``: BN and its
noisy, ghost, mean-only and variance-only variants, the l_p norms; see
:class:`bnstudy.networks.norms.layers.BatchStatistics`) normalize with fixed statistics, so the
network is
one fixed function of its input:

- ``train_set``: each layer's statistics (BN: mean and biased variance, what BN divides by in
  train mode, BN-Explained eq. (3); l_p norms: mean and l_p scale) of its input over the whole
  training set at the current weights, each layer's computed with the earlier layers already
  frozen at their own full-set statistics and running their *deterministic* map, i.e. exactly
  the frozen network's own layer inputs: ghost BN normalizes the whole set, not ghost batches,
  and noisy BN applies its eval map (the noise's expectation), not a draw of noise. One eval-mode
  forward per image, in chunks of ``chunk_rows`` rows, each chunk waiting at every layer until
  the layer is frozen from all chunks' inputs, while the waiting chunks fit the memory budget
  (else one pass stopped at each layer, as before; the numbers are the same bitwise:
  :func:`bnstudy.networks.layer_stats.layer_by_layer`; float64 sums);
- ``batch``: the same over a given mini-batch (the step's recorded batch);
- ``running``: the stored running buffers as they are (plain eval mode).

The model passed in is never changed.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from bnstudy.measures.partition.options import BN_STATISTICS  # noqa: F401 (re-exported)
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.normalizers import batch_statistics_layers
from bnstudy.networks.norms.layers import set_mean_var


@torch.no_grad()
def population_statistics(net: nn.Module, x: torch.Tensor, chunk_rows: int = 65536,
                          budget_bytes: int | None = None) -> list:
    """Freeze every batch-statistics layer of ``net`` at the statistics of its input over all of
    ``x``, input to output, and return them (``[(mean, var)]`` for BN layers, ``[(mean,
    scale)]`` for l_p norms; float64). Puts ``net`` in eval mode and changes its buffers: call it
    on a copy. ``budget_bytes``: what the suspended chunks of the one-forward pass may hold
    (:func:`bnstudy.networks.layer_stats.layer_by_layer`; None: the device's default)."""
    layers = batch_statistics_layers(net)
    net.eval()
    accs: list = [None] * len(layers)
    stats: dict[int, tuple] = {}

    def grab(j: int, z: torch.Tensor) -> None:
        accs[j] = layers[j].accumulate(accs[j], z)

    def freeze(j: int) -> None:
        stats[j] = layers[j].population(accs[j])
        layers[j].freeze(stats[j])

    layer_by_layer(net, x, chunk_rows, layers, grab, freeze, budget_bytes)
    missing = sorted(set(range(len(layers))) - set(stats))
    if missing:
        raise RuntimeError(f"batch-statistics layers {missing} are not on the forward path")
    return [stats[j] for j in range(len(layers))]


def set_buffers(bn, mean, var) -> None:
    """A BN layer's running buffers set to ``mean, var`` (BN jitter's realizations)."""
    set_mean_var(bn, mean, var)


@torch.no_grad()
def frozen_copy(model: nn.Module, bn_statistics: str, x_train: torch.Tensor | None = None,
                batch: torch.Tensor | None = None, chunk_rows: int = 65536,
                budget_bytes: int | None = None) -> nn.Module:
    """An eval-mode deep copy of ``model`` whose batch-statistics layers are fixed maps (their
    statistics: :func:`population_statistics`, within ``budget_bytes``)."""
    if bn_statistics not in BN_STATISTICS:
        raise ValueError(f"unknown bn_statistics {bn_statistics!r}; valid choices: "
                         f"{list(BN_STATISTICS)}")
    net = copy.deepcopy(model)
    layers = batch_statistics_layers(net)
    if layers and bn_statistics != "running":
        if x_train is None or (bn_statistics == "batch" and batch is None):
            raise ValueError(f"bn_statistics={bn_statistics!r} needs the training inputs"
                             + (" and the step's batch" if bn_statistics == "batch" else ""))
        x = x_train if bn_statistics == "train_set" else x_train[batch.to(x_train.device)]
        population_statistics(net, x, chunk_rows, budget_bytes)
    elif any(getattr(m, "running_mean", None) is None for m in layers):
        raise ValueError("bn_statistics='running' needs BN layers that track running statistics")
    return net.eval()
