"""Global pooling with a deterministic backward on CUDA.

``adaptive_avg_pool2d`` / ``AdaptiveMaxPool2d`` accumulate their gradients with atomic adds on
CUDA, so two identical training steps can differ in the last bits and exact replays (resume,
ICS's replay of the next weights) fail; ``torch.use_deterministic_algorithms(True)`` refuses
them (:mod:`bnstudy.train.determinism`). A mean or an amax over H, W computes the same values.
"""

from __future__ import annotations

import torch


def global_avg_pool(h: torch.Tensor) -> torch.Tensor:
    """``(N, C, H, W) -> (N, C)`` mean over H, W: adaptive_avg_pool2d(h, 1) without its
    nondeterministic CUDA backward."""
    return h.mean(dim=(2, 3))


class GlobalMaxPool(torch.nn.Module):
    """``(N, C, H, W) -> (N, C)`` max over H, W: AdaptiveMaxPool2d(1) + Flatten without the
    nondeterministic CUDA backward. amax's backward splits the gradient among tied maxima where
    AdaptiveMaxPool2d gives it to one; in the models ties are zeros after a ReLU, where the
    ReLU's backward sends nothing further either way, so the parameter gradients are equal
    (tested against the adaptive pools)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h.amax(dim=(2, 3))
