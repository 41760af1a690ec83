"""Rows per forward of BN jitter's population pass and grid forwards, from a memory budget.

The population pass (:func:`bnstudy.measures.jitter.stats.population_moments`) runs the whole
training set through the network, and the boundary grids (:mod:`.maps`, :mod:`.cells`) run up
to ``boundary_resolution ** 2`` points; a fixed ``chunk_rows`` (65536) of CIFAR images through a
ResNet9 holds far more than a card has. So a chunk holds what ``memory_budget_mb`` (resolved on
the model's device by :func:`bnstudy.networks.memory.budget_mb`: "auto" is a share of the CUDA
device's free memory, 2048 MiB on the CPU) allows at

    row_bytes = input and leaf outputs' bytes + GRAB_COPIES * 2 * the largest of them

per row, at most ``chunk_rows`` and at least one. The first term bounds a no-grad forward's
activations (every leaf output as if alive at once). The second counts the population pass's
own copies: at each BN layer the chunk's input is copied to float64 (twice its float32 bytes),
reshaped channel-major (a second copy for conv maps), shifted (a third) and raised to powers (a
fourth, transient); the BN layer's input is a leaf's output, so the largest one bounds it. The
numbers do not depend on the chunking (up to the float64 rounding of sums over other chunks).
"""

from __future__ import annotations

from torch import nn

from bnstudy.networks import memory

GRAB_COPIES = 4


def row_bytes(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Estimated bytes one input row of ``input_shape`` costs a pass (module docstring); runs
    two zero rows through an eval-mode copy: ``model`` is not touched."""
    total, largest = memory.activation_bytes(model, input_shape)
    return max(1, total + GRAB_COPIES * 2 * largest)


def chunk_rows(model: nn.Module, input_shape: tuple[int, ...], memory_budget_mb: float,
               cap: int) -> int:
    """Rows per forward: what ``memory_budget_mb`` (MiB, resolved) holds at :func:`row_bytes`
    each, at most ``cap`` (the ``chunk_rows`` option) and at least 1."""
    return memory.fit_rows(memory_budget_mb, row_bytes(model, input_shape), cap)
