"""Generalization: final train and test loss/accuracy and their gaps.

Evaluated in eval mode on the whole train and test sets at the run's last checkpoint. Which
statistics the batch-statistics normalizers (BN and its variants, the l_p norms: the registry's
``uses_batch_statistics``) use is an option (recorded in the ``bn_statistics`` column):

- ``running``: the running averages accumulated during training (standard inference);
- ``recomputed``: population statistics recomputed over the whole training set at the final
  weights, as in "precise BN": each layer's statistics of its input (BN: mean and biased
  variance; l_p norms: mean and l_p scale) over the set, the earlier layers frozen at theirs
  and running their deterministic map (:func:`bnstudy.networks.probe.frozen_copy`, on a copy).
  A model without such layers is evaluated as it is.

Gaps are ``test - train`` for the loss and ``train - test`` for accuracy, so that a positive gap
means worse on unseen data in both. A diverged run gives NaN metrics and ``diverged = True``.

Each row also states what Luo et al. §5 compare runs by, so that runs of different experiments
can be set side by side (the claims ledger's cross-experiment contrasts, the batch-size
figure): ``arch`` and ``dropout`` (the model's), ``train_batch_size`` (the batch the run trained
with; a full-batch run's is the training-set size), ``lr_batch_scaled`` (whether its learning
rate was scaled with the batch size, ``lr_reference_batch``), ``training_schedule`` (its
learning-rate path, momentum, weight decay and steps in words) and ``gamma_sq``, the strength of the
normalizers' scale at the last checkpoint: the mean over hidden layers whose normalizer has a
learned per-unit scale gamma (BN and its variants, population norm, WN + gamma decay, the l_p,
layer and group norms) of the layer's mean gamma^2 (Luo Fig. 2e: weaker regularization from
larger batches lets gamma^2 grow); NaN when no layer has one.
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.measures.generalization.options import BN_STATISTICS, Options  # noqa: F401
from bnstudy.networks.blocks import blocks
from bnstudy.networks.probe import frozen_copy
from bnstudy.train import checkpoints
from bnstudy.train.loop import evaluate


def recompute_bn_statistics(model: nn.Module, x: torch.Tensor, chunk: int = 4096) -> nn.Module:
    """An eval-mode copy of ``model`` whose batch-statistics layers hold the population
    statistics of ``x``, layer by layer (one forward per image in chunks of ``chunk`` rows, each
    chunk waiting at every layer until it is frozen; per-layer passes instead where those
    suspended forwards would not fit the memory budget, same numbers:
    :func:`bnstudy.networks.layer_stats.layer_by_layer`; float64 sums), consistent with what
    eval-mode inference computes."""
    return frozen_copy(model, "train_set", x, chunk_rows=chunk)


def measure(model: nn.Module, data, options: Options | dict | None = None) -> list[dict]:
    """One row: train/test loss and accuracy and their gaps. ``data`` is a :class:`Dataset`."""
    stats = Options.parse(options).bn_statistics
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


def gamma_sq(model: nn.Module) -> float:
    """Mean over hidden layers with a learned per-unit normalizer scale of mean(gamma^2)."""
    per_layer = []
    for block in blocks(model):
        w = getattr(block.norm, "weight", None)
        if isinstance(w, nn.Parameter) and w.requires_grad and w.dim() == 1:
            per_layer.append(float(w.detach().double().pow(2).mean()))
    return sum(per_layer) / len(per_layer) if per_layer else float("nan")


def run_covariates(run: dict, data) -> dict:
    """What runs are compared by across experiments: architecture, dropout, training batch."""
    model, train = run["spec"].model_config, run["spec"].training
    return {"arch": model.label, "dropout": float(model.dropout),
            "train_batch_size": train.batch_for(len(data.x_train)),
            "lr_batch_scaled": train.lr_reference_batch is not None,
            "training_schedule": training_schedule(train)}


def training_schedule(t) -> str:
    """The run's learning-rate path and optimizer in words: equal for runs trained alike, so
    that a contrast pairs only those (bnstudy.claims.declare.contrast)."""
    parts = [f"lr {t.lr:g}" + (f" x M/{t.lr_reference_batch}" if t.lr_reference_batch else ""),
             t.lr_schedule]
    if t.lr_schedule in ("inverse_time", "exponential"):
        parts.append(f"decay {t.lr_decay:g}")
    if t.lr_schedule == "step":
        parts.append(f"x{t.lr_step_factor:g} at {t.lr_milestone_unit}s "
                     + ",".join(map(str, t.lr_milestones)))
    if t.warmup_steps:
        parts.append(f"warm-up {t.warmup_steps}")
    return ", ".join([*parts, f"momentum {t.momentum:g}", f"weight decay {t.weight_decay:g}",
                      f"{t.steps} steps"])


def diverged_row(stats: str) -> dict:
    nan = float("nan")
    return {"train_loss": nan, "test_loss": nan, "loss_gap": nan, "train_accuracy": nan,
            "test_accuracy": nan, "accuracy_gap": nan, "bn_statistics": stats}


def run(run: dict, ds, options: Options, device: torch.device) -> list[dict]:
    """Generalization at the run's last checkpoint (NaN row when the run diverged)."""
    stats = options.bn_statistics
    last = run["checkpoints"][-1]
    if run["diverged"]:
        row = {**diverged_row(stats), "gamma_sq": float("nan")}
    else:
        restored = checkpoints.restore(run, len(run["checkpoints"]) - 1, ds, device)
        row = {**measure(restored.model, ds, options)[0], "gamma_sq": gamma_sq(restored.model)}
    return [{"step": int(last["step"]), **row, **run_covariates(run, ds),
             "diverged": bool(run["diverged"])}]
