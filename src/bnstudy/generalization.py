"""Generalization: final train and test loss/accuracy and their gaps.

Evaluated in eval mode on the whole train and test sets at the run's last checkpoint. Which
BN statistics are used is an option (recorded in the ``bn_statistics`` column):

- ``running``: the running averages accumulated during training (standard inference);
- ``recomputed``: population statistics recomputed over the whole training set at the final
  weights (cumulative average over chunks, on a copy of the model), as in "precise BN".

Gaps are ``test - train`` for the loss and ``train - test`` for accuracy, so that a positive gap
means worse on unseen data in both. A diverged run gives NaN metrics and ``diverged = True``.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .layer_inputs import for_each_input
from .normalizers import batchnorm_modules
from .training import evaluate

BN_STATISTICS = ("running", "recomputed")


@torch.no_grad()
def recompute_bn_statistics(model: nn.Module, x: torch.Tensor, chunk: int = 4096) -> nn.Module:
    """A copy of ``model`` whose BN running statistics are the population statistics of ``x``.

    Layer by layer, input to output: each BN layer's mean and (unbiased, as BN stores it)
    variance are exact sums over all of ``x`` (in chunks), with the earlier BN layers already
    fixed to their population statistics in eval mode, so the statistics are consistent with
    what eval-mode inference then computes. Costs one pass over ``x`` per BN layer.
    """
    model = copy.deepcopy(model)
    bns = batchnorm_modules(model)
    model.eval()
    for bn in bns:
        sums = {}

        def grab(z, sums=sums):
            h = z.transpose(0, 1).reshape(z.shape[1], -1).double()
            sums["n"] = sums.get("n", 0) + h.shape[1]
            sums["s"] = sums.get("s", 0) + h.sum(1)
            sums["q"] = sums.get("q", 0) + (h * h).sum(1)

        for_each_input(model, x, chunk, grab, bn)
        n, mean = sums["n"], sums["s"] / sums["n"]
        var = (sums["q"] - n * mean * mean) / (n - 1)
        bn.running_mean.copy_(mean.to(bn.running_mean.dtype))
        bn.running_var.copy_(var.to(bn.running_var.dtype))
    return model


def measure(model: nn.Module, data, options: dict | None = None) -> list[dict]:
    """One row: train/test loss and accuracy and their gaps. ``data`` is a :class:`Dataset`."""
    options = dict(options or {})
    stats = options.get("bn_statistics", "running")
    if stats not in BN_STATISTICS:
        raise ValueError(f"unknown bn_statistics {stats!r}; valid choices: {BN_STATISTICS}")
    dev = next(model.parameters()).device
    xtr = torch.as_tensor(data.x_train, device=dev)
    ytr = torch.as_tensor(data.y_train, device=dev)
    xte = torch.as_tensor(data.x_test, device=dev)
    yte = torch.as_tensor(data.y_test, device=dev)
    net = recompute_bn_statistics(model, xtr) if stats == "recomputed" else model
    tr_loss, tr_acc = evaluate(net, xtr, ytr, data.task)
    te_loss, te_acc = evaluate(net, xte, yte, data.task)
    return [{
        "train_loss": tr_loss, "test_loss": te_loss, "loss_gap": te_loss - tr_loss,
        "train_accuracy": tr_acc, "test_accuracy": te_acc, "accuracy_gap": tr_acc - te_acc,
        "bn_statistics": stats,
    }]


def diverged_row(stats: str) -> dict:
    nan = float("nan")
    return {"train_loss": nan, "test_loss": nan, "loss_gap": nan, "train_accuracy": nan,
            "test_accuracy": nan, "accuracy_gap": nan, "bn_statistics": stats}
