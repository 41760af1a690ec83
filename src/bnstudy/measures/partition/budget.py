"""Rows per forward pass of the partition-density measure, from a memory budget.

Every pass of the measure (the population-statistics pass over the training images that freezes
BN, and the forward-mode passes over ``points x D`` rows that give the units' gradients) runs
over chunks of rows. A fixed row count cannot fit every model: 65536 rows of CIFAR images
through a ResNet9 hold tens of GB of activations. So the chunk is sized from
``memory_budget_mb`` ("auto": a share of the device's free memory, 2048 MiB on the CPU; or MiB:
:func:`bnstudy.networks.memory.budget_mb`, resolved on the model's device when the measure
runs): a row's cost is estimated from the activation sizes of one input
through the network,

    row_bytes = ROW_FACTOR * (input bytes + sum of every leaf module's output bytes)

(``ROW_FACTOR = 4``: each activation carries a tangent of its size in the forward-mode pass,
and the float64 copies and temporaries of a pass are counted once more), and a chunk holds
``min(chunk_rows, budget * 2**20 // row_bytes)`` rows, at least one. The sum counts every
module's output as if all were alive at once, which a ``no_grad`` pass never needs (the measure
keeps only the counted layers' outputs to the end of a chunk): an upper bound of a pass's
activation memory, not counting the model's weights.
"""

from __future__ import annotations

from torch import nn

from bnstudy.networks import memory

ROW_FACTOR = 4
MB = memory.MB


def row_bytes(model: nn.Module, input_dim: int) -> int:
    """Estimated bytes one input row of ``input_dim`` features costs in a pass (see the module
    docstring). Runs two zero rows through an eval-mode copy: ``model`` is not touched."""
    total, _ = memory.activation_bytes(model, (input_dim,))
    return max(1, ROW_FACTOR * total)


def chunk_rows(model: nn.Module, input_dim: int, memory_budget_mb: float, cap: int) -> int:
    """Rows per pass: what ``memory_budget_mb`` (MiB, resolved) holds at :func:`row_bytes`
    each, at most ``cap`` (the ``chunk_rows`` option) and at least 1."""
    return memory.fit_rows(memory_budget_mb, row_bytes(model, input_dim), cap)
