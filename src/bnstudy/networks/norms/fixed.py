"""Normalization layers whose scale does not come from the batch: Luo's WN + gamma decay and
bn_init's frozen affine map, and the gamma-decay gradient they and population_norm share.

- :class:`WeightNormGammaDecay`: Luo et al. (2019)'s "WN + gamma decay" (§4, Eq. 4), i.e.
  population normalization for an isotropic input of per-coordinate variance ``input_var``:
  ``y = gamma w^T z / (||w|| sqrt(input_var)) + beta``, plus the gamma-decay penalty
  ``zeta gamma^2`` (see :func:`gamma_decayed`). ``input_var=1`` (default) is plain WN with
  ``g = gamma``; ``"fan_in"`` is ``1 / fan_in``, Luo's ``x ~ N(0, I/N)``, where this is the
  teacher-student student ``sqrt(N) gamma w^T x / ||w||``. gamma is the pre-activation's standard
  deviation (so Luo's BN-equivalent ``zeta`` applies) only when ``input_var`` is the input's
  per-coordinate variance.
- :class:`FrozenAffine`: a fixed per-unit map ``(x - shift) * scale`` held in buffers (bn_init).

Gamma decay (Luo Eq. 3) adds ``zeta_i gamma_i^2`` per unit to the training objective: the
gradient ``2 zeta gamma`` is added to gamma's gradient in every training-mode backward pass
(:func:`gamma_decayed`); loss values stay the data loss. Both layers compute in float32 under
autocast (:class:`bnstudy.networks.norms.float32.Float32Statistics`).
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.norms.float32 import Float32Statistics
from bnstudy.networks.norms.layers import channel_view


class _GammaDecay(torch.autograd.Function):
    """Identity on gamma whose backward adds the gradient ``2 zeta gamma`` of ``zeta gamma^2``."""

    @staticmethod
    def forward(ctx, gamma, zeta):
        ctx.save_for_backward(gamma, zeta)
        return gamma.view_as(gamma)

    @staticmethod
    def backward(ctx, grad):
        gamma, zeta = ctx.saved_tensors
        return grad + 2 * zeta * gamma, None


def gamma_decayed(layer: nn.Module) -> torch.Tensor:
    """``layer.weight`` (gamma), carrying the decay ``layer.zeta`` when training with autograd."""
    gamma = layer.weight
    if layer.training and torch.is_grad_enabled() and gamma.requires_grad:
        return _GammaDecay.apply(gamma, layer.zeta)
    return gamma


class WeightNormGammaDecay(Float32Statistics, nn.Module):
    """Luo's WN + gamma decay; bound to its block's linear/conv map by the model builder."""

    def __init__(self, num_features: int, zeta: float | str = 0.0, input_var: float | str = 1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        z0 = float(zeta) if isinstance(zeta, (int, float)) else 0.0  # "luo": set by a hook
        self.register_buffer("zeta", torch.full((num_features,), z0))
        self._input_var, self._source = input_var, []

    def bind(self, linear: nn.Module) -> None:
        if not isinstance(linear, (nn.Linear, nn.Conv2d)):
            raise ValueError(f"weightnorm_gamma_decay needs a Linear or Conv2d map, got {linear}")
        self._source = [linear]  # a plain list: not a submodule
        fan_in = linear.weight[0].numel()
        var = 1.0 / fan_in if self._input_var == "fan_in" else float(self._input_var)
        self.register_buffer("input_var", torch.tensor(float(var)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        lin = self._source[0]
        w = lin.weight.reshape(lin.weight.shape[0], -1)
        if lin.bias is not None:
            h = h - channel_view(lin.bias, h)
        n = h / channel_view(w.norm(dim=1) * self.input_var.sqrt(), h)
        return n * channel_view(gamma_decayed(self), h) + channel_view(self.bias, h)


class FrozenAffine(Float32Statistics, nn.Module):
    """``(x - shift) * scale`` per unit, with both held fixed in buffers (identity at build)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.register_buffer("shift", torch.zeros(num_features))
        self.register_buffer("scale", torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - channel_view(self.shift, x)) * channel_view(self.scale, x)
