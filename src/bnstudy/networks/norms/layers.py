"""Batch-statistics normalization layers: the modules the registry builds for every normalizer
whose training-mode map normalizes with statistics of the mini-batch, and their one interface.

Every layer takes ``(N, C)`` (fully connected) or ``(N, C, H, W)`` (conv) inputs; statistics are
per unit ``C``, over the batch and, for conv maps, over ``H, W`` as well ("H, W as batch").

**The batch-statistics interface** (:class:`BatchStatistics`). Every layer of a normalizer the
registry marks ``uses_batch_statistics`` implements it, so code that freezes or recomputes
population statistics (:func:`bnstudy.networks.probe.frozen_copy`,
:mod:`bnstudy.measures.generalization.compute`) handles
them all the same way, whatever the statistics are:

- ``STATISTICS``: their names, ``("mean", "var")`` (BN and its variants: ``running_mean`` and
  ``running_var`` hold them, torch's semantics) or ``("mean", "scale")`` (l_p norms);
- ``accumulate(acc, x)``: adds the per-unit sums of an input chunk ``x`` to ``acc`` (``None``
  starts one; float64);
- ``population(acc)``: the statistics of all accumulated inputs as a training-mode pass over one
  batch holding them all computes them (the *biased* variance, what BN divides by);
- ``freeze(stats)``: writes them into the running buffers, so that eval mode normalizes with
  exactly these statistics.

The classes:

- :class:`BatchNorm1d`, :class:`BatchNorm2d`: torch's BN with the interface (same state dict).
- :class:`GhostBatchNorm`: BN-Explained §5's noise-controlled BN, realized as ghost batches: in
  training mode the batch is split, in order, into virtual batches of ``ghost_batch_size``
  samples, each normalized with its own statistics, so ``mu_B, sigma_B`` have exactly the
  variance a batch of that size gives (Proposition 2), i.e. more jitter than the real batch. A
  remainder of one sample joins the previous virtual batch (a single sample has no variance);
  a batch no larger than ``ghost_batch_size`` is plain BN. The running averages are updated
  once per step from the statistics of the whole batch, so inference is the same as BN's; its
  deterministic (population) map is BN's.
- :class:`LpBatchNorm`: Santurkar §3.3: ``y = gamma (x - mean_B) / (s_B + eps) + beta`` with
  ``s_B = (mean_B |x|^p)^(1/p)`` (``max_B |x|`` for ``p = inf``), the batch average l_p norm of
  each unit's activations taken *before* centering. The paper does not spell the average out;
  we read it per unit, as the l_p norm w.r.t. the empirical distribution of the batch, so that
  ``p = 2`` is the uncentered RMS (BN's sigma without centering) and every ``p`` gives O(1)
  outputs. Gradients flow through both statistics, as in BN; running averages (``momentum``
  0.1) of ``mean_B`` and ``s_B`` (``running_mean``, ``running_scale``) are used in eval mode.
- :class:`MeanOnlyBatchNorm`: Salimans & Kingma's mean-only BN used by Luo §5 with WN:
  ``y = x - mean_B + beta`` (no scaling; WN's ``g`` sets the scale).
- :class:`VarOnlyBatchNorm`: Luo §5's variance-only BN: ``y = gamma x / sqrt(var_B + eps) +
  beta``, ``var_B`` the (centered, biased) batch variance, the input itself not centered.
- Santurkar's noisy BN (a BN variant whose training map is random) is in
  :mod:`bnstudy.networks.norms.noisy`; layers without batch statistics (WN + gamma decay, bn_init's
  frozen map) are in :mod:`bnstudy.networks.norms.fixed`.

The ``_BatchNorm`` subclasses keep torch's running-buffer semantics (``running_mean``, unbiased
``running_var``, ``momentum``; ``momentum=None`` is a cumulative average).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from bnstudy.networks.norms.float32 import Float32Statistics


def channel_view(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A per-unit vector ``(C,)`` shaped to broadcast against ``x`` of shape ``(N, C, ...)``."""
    return v.view(1, -1, *([1] * (x.dim() - 2)))


def _dims(x: torch.Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.dim()))


def check_value(value, ok: bool, name: str, valid: str):
    if not ok:
        raise ValueError(f"bad {name} {value!r}; valid: {valid}")
    return value


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as ``(C, samples x positions)`` float64 rows, one per unit."""
    return x.detach().double().transpose(0, 1).reshape(x.shape[1], -1)


def set_mean_var(bn: nn.Module, mean: torch.Tensor, var: torch.Tensor) -> None:
    """Write ``mean, var`` into a BN layer's running buffers (creating them when it does not
    track running statistics), so that eval mode normalizes with them."""
    if bn.running_mean is None:
        bn.register_buffer("running_mean", torch.zeros_like(mean, dtype=torch.float32))
        bn.register_buffer("running_var", torch.ones_like(var, dtype=torch.float32))
        bn.track_running_stats = True
    bn.running_mean.copy_(mean)
    bn.running_var.copy_(var)


class BatchStatistics(Float32Statistics):
    """A layer whose training map normalizes with batch statistics ``(mean, var)``; subclasses
    with other statistics override the three methods (see the module docstring)."""

    STATISTICS: tuple[str, ...] = ("mean", "var")

    @torch.no_grad()
    def accumulate(self, acc: dict | None, x: torch.Tensor) -> dict:
        h = _rows(x)
        if acc is None:  # sums of deviations from the first chunk's mean: no cancellation
            acc = {"shift": h.mean(1), "n": 0, "s1": 0.0, "s2": 0.0}
        d = h - acc["shift"][:, None]
        acc["n"] += d.shape[1]
        acc["s1"] = acc["s1"] + d.sum(1)
        acc["s2"] = acc["s2"] + (d * d).sum(1)
        return acc

    def population(self, acc: dict) -> tuple[torch.Tensor, ...]:
        e1 = acc["s1"] / acc["n"]
        return acc["shift"] + e1, (acc["s2"] / acc["n"] - e1 * e1).clamp_min(0.0)

    @torch.no_grad()
    def freeze(self, stats: tuple[torch.Tensor, ...]) -> None:
        set_mean_var(self, *stats)


class BatchNorm1d(BatchStatistics, nn.BatchNorm1d):
    """torch's ``BatchNorm1d`` with the batch-statistics interface."""


class BatchNorm2d(BatchStatistics, nn.BatchNorm2d):
    """torch's ``BatchNorm2d`` with the batch-statistics interface."""


class BatchNormBase(BatchStatistics, _BatchNorm):
    """A BN subclass for (N, C) and (N, C, H, W) inputs with torch's running-buffer updates."""

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() not in (2, 4):
            raise ValueError(f"expected (N, C) or (N, C, H, W) input, got shape {tuple(x.shape)}")

    @torch.no_grad()
    def _track(self, x: torch.Tensor) -> None:
        """Update the running buffers from batch ``x`` exactly as ``nn.BatchNorm`` would."""
        if not (self.training and self.track_running_stats):
            return
        self.num_batches_tracked.add_(1)
        factor = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                  else self.momentum)
        F.batch_norm(x.detach(), self.running_mean, self.running_var, None, None, True,
                     factor, self.eps)

    def _use_batch(self) -> bool:
        return self.training or self.running_mean is None


def ghost_sizes(n: int, ghost: int) -> list[int]:
    """Sizes of the virtual batches a batch of ``n`` splits into (a remainder of 1 is merged)."""
    if n <= ghost:
        return [n]
    sizes = [ghost] * (n // ghost) + ([n % ghost] if n % ghost else [])
    if sizes[-1] == 1:
        sizes = sizes[:-2] + [sizes[-2] + 1]
    return sizes


class GhostBatchNorm(BatchNormBase):
    """BN whose training-mode statistics come from virtual batches of ``ghost_batch_size``."""

    def __init__(self, num_features: int, ghost_batch_size: int = 16):
        super().__init__(num_features, affine=True)
        ok = isinstance(ghost_batch_size, int) and ghost_batch_size >= 2
        self.ghost_batch_size = check_value(ghost_batch_size, ok, "ghost_batch_size", "an int >= 2")

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, ghost_batch_size={self.ghost_batch_size}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not self.training:
            return super().forward(x)
        self._track(x)
        parts = x.split(ghost_sizes(x.shape[0], self.ghost_batch_size))
        return torch.cat([F.batch_norm(p, None, None, self.weight, self.bias, True, 0.0,
                                       self.eps) for p in parts])


class LpBatchNorm(BatchStatistics, nn.Module):
    """Santurkar's l_p normalization: batch-mean centering, division by the average l_p norm."""

    STATISTICS = ("mean", "scale")

    def __init__(self, num_features: int, p: float, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        ok = p == math.inf or (isinstance(p, (int, float)) and p >= 1)
        self.p = float(check_value(p, ok, "p", "a number >= 1 or inf"))
        self.eps = float(check_value(eps, eps >= 0, "eps", ">= 0"))
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_scale", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, p={self.p}, eps={self.eps}, momentum={self.momentum}"

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch mean and average l_p norm (before centering) per unit."""
        dims, a = _dims(x), x.abs()
        mean = x.mean(dims)
        if self.p == math.inf:
            return mean, a.amax(dims)
        return mean, a.pow(self.p).mean(dims).pow(1.0 / self.p)

    @torch.no_grad()
    def accumulate(self, acc: dict | None, x: torch.Tensor) -> dict:
        h = _rows(x)
        a = h.abs()
        if acc is None:
            acc = {"n": 0, "s1": 0.0, "sp": 0.0}
        acc["n"] += h.shape[1]
        acc["s1"] = acc["s1"] + h.sum(1)
        if self.p == math.inf:
            acc["sp"] = torch.maximum(torch.as_tensor(acc["sp"]).to(a), a.amax(1))
        else:
            acc["sp"] = acc["sp"] + a.pow(self.p).sum(1)
        return acc

    def population(self, acc: dict) -> tuple[torch.Tensor, torch.Tensor]:
        scale = acc["sp"] if self.p == math.inf else (acc["sp"] / acc["n"]).pow(1.0 / self.p)
        return acc["s1"] / acc["n"], scale

    @torch.no_grad()
    def freeze(self, stats: tuple[torch.Tensor, ...]) -> None:
        mean, scale = stats
        self.running_mean.copy_(mean)
        self.running_scale.copy_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() not in (2, 4):
            raise ValueError(f"expected (N, C) or (N, C, H, W) input, got shape {tuple(x.shape)}")
        if self.training:
            mean, scale = self.statistics(x)
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                f = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                     else self.momentum)
                self.running_mean.lerp_(mean.detach(), f)
                self.running_scale.lerp_(scale.detach(), f)
        else:
            mean, scale = self.running_mean, self.running_scale
        y = (x - channel_view(mean, x)) / (channel_view(scale, x) + self.eps)
        return y * channel_view(self.weight, x) + channel_view(self.bias, x)


class MeanOnlyBatchNorm(BatchNormBase):
    """``x - mean_B + beta``: mean-only BN (Salimans & Kingma 2016), used with WN."""

    def __init__(self, num_features: int):
        super().__init__(num_features, affine=False)
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if self._use_batch():
            mean = x.mean(_dims(x))
            self._track(x)
        else:
            mean = self.running_mean
        return x - channel_view(mean, x) + channel_view(self.bias, x)


class VarOnlyBatchNorm(BatchNormBase):
    """``gamma x / sqrt(var_B + eps) + beta``: variance-only BN (Luo et al. 2019, §5)."""

    def __init__(self, num_features: int):
        super().__init__(num_features, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if self._use_batch():
            var = x.var(_dims(x), unbiased=False)
            self._track(x)
        else:
            var = self.running_var
        y = x * channel_view(torch.rsqrt(var + self.eps), x)
        return y * channel_view(self.weight, x) + channel_view(self.bias, x)
