"""The trainer's evaluation: mean loss and accuracy of a model on a data set, in eval mode.

:func:`evaluation_sums` leaves its sums on the device (no host-device sync), so the trainer reads
an evaluation of both splits and its watched training losses in one transfer;
:func:`evaluate` is the one-call form the measures use. Chunk sums are added on the host in chunk
order, as Python floats: the numbers do not depend on how the values are read.
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.train import precision


def loss_fn(task: str):
    if task == "classification":
        return nn.functional.cross_entropy
    if task == "regression":
        return nn.functional.mse_loss
    raise ValueError(f"unknown task {task!r}; valid choices: classification, regression")


@torch.no_grad()
def evaluation_sums(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: str,
                    chunk: int = 4096, autocast: str = "fp32") -> torch.Tensor:
    """On ``x``'s device, without a sync: float64 ``[loss sum of each chunk..., number correct]``
    in eval mode (forward passes at the training ``precision`` ``autocast``); restores the
    model's mode. :func:`evaluation_result` turns their host values into (loss, accuracy)."""
    was_training = model.training
    model.eval()
    lf, parts = loss_fn(task), []
    correct = torch.zeros((), dtype=torch.float64, device=x.device)
    for i in range(0, len(x), chunk):
        with precision.autocast(x.device, autocast):
            out = model(x[i: i + chunk])
            parts.append(lf(out, y[i: i + chunk], reduction="sum").double().reshape(1))
        if task == "classification":
            correct = correct + (out.argmax(1) == y[i: i + chunk]).sum()
    model.train(was_training)
    return torch.cat([*parts, correct.reshape(1)])


def evaluation_result(values: list[float], x: torch.Tensor, y: torch.Tensor,
                      task: str) -> tuple[float, float]:
    """Mean loss and accuracy (NaN for regression) from :func:`evaluation_sums`' values."""
    total = 0.0
    for v in values[:-1]:  # chunk by chunk, as a running sum of Python floats
        total += v
    denom = len(x) * (y.shape[1] if task == "regression" and y.dim() > 1 else 1)
    acc = int(values[-1]) / len(x) if task == "classification" else float("nan")
    return total / denom, acc


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: str,
             chunk: int = 4096) -> tuple[float, float]:
    """Mean loss and accuracy (NaN for regression) in eval mode; restores the model's mode."""
    return evaluation_result(evaluation_sums(model, x, y, task, chunk).tolist(), x, y, task)
