"""Jitter-augmented BN (BN-Explained §5): BN whose batch statistics get extra noise, so that the
variances of ``mu_B`` and ``sigma_B`` are ``1 + f`` times those the mini-batch alone gives.

BN-Explained's Proposition 2: over random batches of ``M`` iid values per unit (``M`` = batch
size for fully connected layers, batch x H x W for conv maps, whose positions count as samples),
``var(mu_B) = sigma^2 / M`` and ``var(sigma_B^2) ~ (phi_4 - sigma^4) / M`` (``phi_4`` the fourth
central moment), so by the delta method ``var(sigma_B) ~ (phi_4 - sigma^4) / (4 M sigma^2)``
(``sigma^2 / (2M)`` for Gaussian data). The paper "fed additional Gaussian additive noise and
Chi-square multiplicative noise to the layer pre-activations ... to increase the variances of
mu and sigma as desired" (about 15% for its ResNet9). Here, per unit and step, with the batch's
own moments as plug-in estimates (``var_B`` biased, ``m4_B`` the batch's fourth central moment,
``f = extra_variance``)::

    mu_used    = mu_B + sqrt(f * var_B / (M - 1)) * z1            z1 ~ N(0, 1)
    sigma_used = sigma_B * s,   E[s] = 1,  var(s) = v = f * (m4_B - var_B^2) / (4 M sigma_B^4)
    y = gamma * (x - mu_used) / sigma_used + beta,                sigma_B = sqrt(var_B + eps)

``var_B / (M - 1)`` is the unbiased estimate of ``sigma^2 / M``, and the noise is independent
of the batch, so ``var(mu_used) = (1 + f) var(mu_B)`` exactly in expectation over batches;
``var(sigma_B s) = var(sigma_B) + E[sigma_B^2 v] ~ (1 + f) var(sigma_B)`` (for Gaussian data
``v ~ f / (2M)``). The multiplicative factor ``s`` is log-normal, ``s = exp(sqrt(log(1 + v)) z2 -
log(1 + v) / 2)``: positive with mean 1 and variance ``v`` exactly (a scaled chi-square
``chi^2_k / k`` with ``k = 2 / v``, the paper's choice, has the same two moments and is, for
the ``v ~ f / (2M) << 1`` in use, the same distribution to first order). The noise amplitudes are
constants for the gradient (the noise is data, as a dropout mask is); gradients flow through
``mu_B`` and ``sigma_B`` as in BN.

The noise of a step is a function of (layer seed, training step) (:class:`StepNoise`, see
:mod:`bnstudy.networks.norms.noisy`): every pass at one checkpoint sees the same ``z1, z2``.
Eval mode (and ``extra_variance = 0``) is plain BN: running statistics, no noise. The running
averages are updated from the un-jittered batch statistics, and the layer has BN's
batch-statistics interface, so its deterministic (population) map is BN's.
"""

from __future__ import annotations

import math

import torch

from bnstudy.networks.norms.layers import BatchNormBase, channel_view, check_value
from bnstudy.networks.norms.noisy import StepNoise


def gaussian_rel_var(m: int) -> float:
    """``var(sigma_B) / E[sigma_B^2]`` for ``m`` iid Gaussian values, ``sigma_B`` their biased
    standard deviation: ``sigma_B^2 = sigma^2 chi^2_{m-1} / m``, so ``E[sigma_B] = sigma
    sqrt(2/m) Gamma(m/2) / Gamma((m-1)/2)`` and the ratio is ``1 - 2 (Gamma(m/2) /
    Gamma((m-1)/2))^2 / (m-1)`` (``~ 1/(2m)``)."""
    r = math.exp(2 * (math.lgamma(m / 2) - math.lgamma((m - 1) / 2)))
    return 1.0 - 2.0 * r / (m - 1)


def excess_kurtosis(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """Per unit: the bias-corrected sample excess kurtosis ``G2`` of the batch (unbiased for
    Gaussian data; 0 when fewer than 4 values, which cannot estimate it)."""
    dims, m = (0, *range(2, x.dim())), x.numel() // x.shape[1]
    if m < 4:
        return torch.zeros_like(var)
    g2 = (x - channel_view(mean, x)).pow(4).mean(dims) / (var * var).clamp_min(1e-30) - 3
    return ((m + 1) * g2 + 6) * (m - 1) / ((m - 2) * (m - 3))


class JitterBatchNorm(StepNoise, BatchNormBase):
    """BN with extra noise on ``mu_B, sigma_B`` raising their variances by ``extra_variance``."""

    def __init__(self, num_features: int, extra_variance: float = 0.15):
        super().__init__(num_features, affine=True)
        ok = (isinstance(extra_variance, (int, float)) and not isinstance(extra_variance, bool)
              and 0 <= extra_variance < float("inf"))
        self.extra_variance = float(check_value(extra_variance, ok, "extra_variance",
                                                "a finite number >= 0"))
        self.register_buffer("noise_seed", torch.randint(0, 2**62, ()))
        self.register_buffer("noise_step", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, extra_variance={self.extra_variance}"

    def noise(self, c: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The standard normal draws ``(z1, z2)`` of ``c`` units at ``noise_step``."""
        z = torch.randn(2, c, generator=self.generator(device), device=device, dtype=dtype)
        return z[0], z[1]

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu_used, sigma_used)`` per unit of a training batch ``x`` at ``noise_step``."""
        dims = (0, *range(2, x.dim()))
        m = x.numel() // x.shape[1]
        if m < 2:
            raise ValueError(f"batchnorm_jitter needs more than 1 value per unit in training mode, "
                             f"got input shape {tuple(x.shape)}")
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        sigma = torch.sqrt(var + self.eps)
        f = self.extra_variance
        with torch.no_grad():
            shift = torch.sqrt(f * var / (m - 1))
            v = f * gaussian_rel_var(m) * (excess_kurtosis(x, mean, var) + 2).clamp_min(0) / 2
            log1v = torch.log1p(v)
            z1, z2 = self.noise(x.shape[1], x.device, x.dtype)
            s = torch.exp(torch.sqrt(log1v) * z2 - log1v / 2)
        return mean + shift * z1, sigma * s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not self.training or self.extra_variance == 0:
            return super().forward(x)
        mu, sigma = self.statistics(x)
        self._track(x)
        y = (x - channel_view(mu, x)) / channel_view(sigma, x)
        return y * channel_view(self.weight, x) + channel_view(self.bias, x)
