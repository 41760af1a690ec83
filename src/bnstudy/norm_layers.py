"""Batch-statistics normalization layers beyond torch's built-ins (the modules the registry builds).

Every layer takes ``(N, C)`` (fully connected) or ``(N, C, H, W)`` (conv) inputs; statistics are
per unit ``C``, over the batch and, for conv maps, over ``H, W`` as well ("H, W as batch"). The
``_BatchNorm`` subclasses keep torch's running-buffer semantics (``running_mean``, unbiased
``running_var``, ``momentum``; ``momentum=None`` is a cumulative average), so code that handles
BatchNorm buffers (:func:`bnstudy.normalizers.batchnorm_modules`, recomputed population
statistics) handles them too.

- :class:`NoisyBatchNorm`: Santurkar et al. (2018) Algorithm 1 (App. A.2.1): BN (with its
  learned affine), then in training mode every activation ``a_ij`` becomes ``s_ij a_ij + m_ij``.
  Per step and unit ``j``: ``mu_j ~ U(-n_mu, n_mu)``, ``sigma_j ~ U(1, n_sigma)``; per sample and
  unit: ``m_ij ~ U(mu_j - r_mu, mu_j + r_mu)``, ``s_ij ~ N(sigma_j, r_sigma)`` (``r_sigma`` read
  as a standard deviation). Conv maps draw ``m, s`` per position (H, W are batch). The paper
  leaves inference open; ``eval_noise="mean"`` (default) applies the noise's expectation
  ``a -> E[s] a + E[m] = (1 + n_sigma)/2 a`` (as dropout applies its mean at test time),
  ``"off"`` applies none. The noise comes from a per-layer counter-based generator: seed
  ``noise_seed`` (drawn from torch's global RNG when the layer is built, i.e. from the run seed)
  mixed with ``noise_step``, the number of training-mode forward passes so far. Both are buffers,
  so a restored checkpoint replays exactly the noise its update used, on CPU and on CUDA (the
  CUDA stream differs from the CPU one).
- :class:`GhostBatchNorm`: BN-Explained §5's noise-controlled BN, realized as ghost batches: in
  training mode the batch is split, in order, into virtual batches of ``ghost_batch_size``
  samples, each normalized with its own statistics, so ``mu_B, sigma_B`` have exactly the
  variance a batch of that size gives (Proposition 2), i.e. more jitter than the real batch. A
  remainder of one sample joins the previous virtual batch (a single sample has no variance);
  a batch no larger than ``ghost_batch_size`` is plain BN. The running averages are updated
  once per step from the statistics of the whole batch, so inference is the same as BN's.
- :class:`LpBatchNorm`: Santurkar §3.3: ``y = gamma (x - mean_B) / (s_B + eps) + beta`` with
  ``s_B = (mean_B |x|^p)^(1/p)`` (``max_B |x|`` for ``p = inf``), the batch average l_p norm of
  each unit's activations taken *before* centering. The paper does not spell the average out;
  we read it per unit, as the l_p norm w.r.t. the empirical distribution of the batch, so that
  ``p = 2`` is the uncentered RMS (BN's sigma without centering) and every ``p`` gives O(1)
  outputs. Gradients flow through both statistics, as in BN; running averages (``momentum``
  0.1) of ``mean_B`` and ``s_B`` are used in eval mode.
- :class:`MeanOnlyBatchNorm`: Salimans & Kingma's mean-only BN used by Luo §5 with WN:
  ``y = x - mean_B + beta`` (no scaling; WN's ``g`` sets the scale).
- :class:`VarOnlyBatchNorm`: Luo §5's variance-only BN: ``y = gamma x / sqrt(var_B + eps) +
  beta``, ``var_B`` the (centered, biased) batch variance, the input itself not centered.
- Layers without batch statistics (WN + gamma decay, bn_init's frozen map) are in
  :mod:`bnstudy.norm_layers_fixed`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

EVAL_NOISE = ("mean", "off")


def _view(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A per-unit vector ``(C,)`` shaped to broadcast against ``x`` of shape ``(N, C, ...)``."""
    return v.view(1, -1, *([1] * (x.dim() - 2)))


def _dims(x: torch.Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.dim()))


def _check(value, ok: bool, name: str, valid: str):
    if not ok:
        raise ValueError(f"bad {name} {value!r}; valid: {valid}")
    return value


class _Base(_BatchNorm):
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


class NoisyBatchNorm(_Base):
    """BN followed by Santurkar's Algorithm 1 noise (training mode)."""

    def __init__(self, num_features: int, n_mu: float = 0.5, n_sigma: float = 1.25,
                 r_mu: float = 0.1, r_sigma: float = 0.1, eval_noise: str = "mean"):
        super().__init__(num_features, affine=True)
        self.n_mu = float(_check(n_mu, n_mu >= 0, "n_mu", ">= 0"))
        self.n_sigma = float(_check(n_sigma, n_sigma >= 1, "n_sigma", ">= 1"))
        self.r_mu = float(_check(r_mu, r_mu >= 0, "r_mu", ">= 0"))
        self.r_sigma = float(_check(r_sigma, r_sigma >= 0, "r_sigma", ">= 0"))
        self.eval_noise = _check(eval_noise, eval_noise in EVAL_NOISE, "eval_noise",
                                 ", ".join(EVAL_NOISE))
        self.register_buffer("noise_seed", torch.randint(0, 2**62, ()))
        self.register_buffer("noise_step", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, n_mu={self.n_mu}, n_sigma={self.n_sigma}, "
                f"r_mu={self.r_mu}, r_sigma={self.r_sigma}, eval_noise={self.eval_noise}")

    def _generator(self, device: torch.device) -> torch.Generator:
        seed = (int(self.noise_seed) * 6364136223846793005
                + int(self.noise_step) * 1442695040888963407) % 2**63
        return torch.Generator(device=device).manual_seed(seed)

    def noise(self, shape: torch.Size, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """One draw ``(s, m)`` of Algorithm 1 for activations of ``shape``; advances the counter."""
        gen, c = self._generator(device), shape[1]
        kw = {"generator": gen, "device": device, "dtype": dtype}
        view = (1, c, *([1] * (len(shape) - 2)))
        mu = (2 * torch.rand(c, **kw) - 1) * self.n_mu
        sigma = 1 + torch.rand(c, **kw) * (self.n_sigma - 1)
        m = mu.view(view) + (2 * torch.rand(shape, **kw) - 1) * self.r_mu
        s = sigma.view(view) + torch.randn(shape, **kw) * self.r_sigma
        with torch.no_grad():
            self.noise_step.add_(1)
        return s, m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if self.training:
            s, m = self.noise(y.shape, y.device, y.dtype)
            return s * y + m
        if self.eval_noise == "mean":
            return y * ((1 + self.n_sigma) / 2)
        return y


def ghost_sizes(n: int, ghost: int) -> list[int]:
    """Sizes of the virtual batches a batch of ``n`` splits into (a remainder of 1 is merged)."""
    if n <= ghost:
        return [n]
    sizes = [ghost] * (n // ghost) + ([n % ghost] if n % ghost else [])
    if sizes[-1] == 1:
        sizes = sizes[:-2] + [sizes[-2] + 1]
    return sizes


class GhostBatchNorm(_Base):
    """BN whose training-mode statistics come from virtual batches of ``ghost_batch_size``."""

    def __init__(self, num_features: int, ghost_batch_size: int = 16):
        super().__init__(num_features, affine=True)
        ok = isinstance(ghost_batch_size, int) and ghost_batch_size >= 2
        self.ghost_batch_size = _check(ghost_batch_size, ok, "ghost_batch_size", "an int >= 2")

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


class LpBatchNorm(nn.Module):
    """Santurkar's l_p normalization: batch-mean centering, division by the average l_p norm."""

    def __init__(self, num_features: int, p: float, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        ok = p == math.inf or (isinstance(p, (int, float)) and p >= 1)
        self.p = float(_check(p, ok, "p", "a number >= 1 or inf"))
        self.eps = float(_check(eps, eps >= 0, "eps", ">= 0"))
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
        y = (x - _view(mean, x)) / (_view(scale, x) + self.eps)
        return y * _view(self.weight, x) + _view(self.bias, x)


class MeanOnlyBatchNorm(_Base):
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
        return x - _view(mean, x) + _view(self.bias, x)


class VarOnlyBatchNorm(_Base):
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
        y = x * _view(torch.rsqrt(var + self.eps), x)
        return y * _view(self.weight, x) + _view(self.bias, x)
