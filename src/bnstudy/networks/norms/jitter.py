"""Jitter-augmented BN (BN-Explained §5): BN whose batch statistics get extra noise, so that the
variances of ``mu_B`` and ``sigma_B`` over batches are ``1 + f`` times those the mini-batch
alone gives (``f = extra_variance``).

The paper "fed additional Gaussian additive noise and Chi-square multiplicative noise to the
layer pre-activations ... to increase the variances of mu and sigma as desired" (about 15% for
its ResNet9). Per unit and step, with ``V_mu``, ``V_sigma`` estimates of the batch-to-batch
variances ``var(mu_B)``, ``var(sigma_B)`` (``sigma_B = sqrt(var_B + eps)``, ``var_B`` biased)::

    mu_used    = mu_B + sqrt(f * V_mu) * z1                      z1 ~ N(0, 1)
    sigma_used = sigma_B * s,   E[s] = 1,  var(s) = v = f * V_sigma / sigma_B^2
    y = gamma * (x - mu_used) / sigma_used + beta

The noise is independent of the batch, so ``var(mu_used) = var(mu_B) + f V_mu`` and
``var(sigma_used) = var(sigma_B) + f V_sigma``: ``1 + f`` times the batch's own variances when
``V`` estimates them. ``s`` is log-normal, ``s = exp(sqrt(log(1 + v)) z2 - log(1 + v) / 2)``:
positive with mean 1 and variance ``v`` exactly (a scaled chi-square ``chi^2_k / k``, ``k = 2 /
v``, the paper's choice, has the same two moments and, for the small ``v`` in use, the same
distribution to first order). The noise amplitudes are constants for the gradient (the noise is
data, as a dropout mask is); gradients flow through ``mu_B`` and ``sigma_B`` as in BN.

**Calibration: the empirical batch-to-batch variance.** Proposition 2's i.i.d. plug-in
(``var_B / (M - 1)`` for ``var(mu_B)``, ``M`` = values per unit: batch, or batch x H x W for
conv maps) is right only at the input layer: deeper, the samples of a batch share the previous
layers' batch statistics, and the true ``var(mu_B)`` is several times smaller (the plug-in
raised it by +82-85% instead of +15% in an MLP's hidden layers). So ``V_mu, V_sigma`` are
running estimates over training steps, kept in buffers: exponential moving averages (weight
``1 - CALIBRATION_MOMENTUM`` per step, ~50 steps) of half the squared change of ``mu_B`` and
``sigma_B`` from one step to the next, ``(mu_B^t - mu_B^{t-1})^2 / 2``, whose mean is
``var(mu_B)`` for independent batches, unaffected by the slow drift of the weights. They start at
the plug-in (``var_B / (M - 1)``; for ``sigma_B`` the delta method with the batch's excess
kurtosis ``G2``, ``sigma_B^2 (G2 + 2) / 2`` times :func:`gaussian_rel_var`, ``~ sigma^2 / (2M)``
for Gaussian data), which fades as ``CALIBRATION_MOMENTUM ** steps`` (0.2% after 300 steps).
Batches drawn without replacement within an epoch of ``K`` batches are slightly anti-correlated,
which raises the estimate by a factor ``1 + 1/(K - 1)``.

The estimates are updated once per training step, at the first training-mode pass of a new
``noise_step``, and that step uses the estimates of the steps before it. Every later pass at
the same step uses the same amplitudes, so the layer keeps the rule of
:mod:`bnstudy.networks.norms.noisy`: the noise of a step is a function of (layer seed, training
step, the layer's state at that step's checkpoint), and any number of passes at one checkpoint
see the same function; a resumed run replays it exactly (the estimates are in the state dict).
Eval mode (and ``extra_variance = 0``) is plain BN: running statistics, no noise, no
calibration. The running averages are updated from the un-jittered batch statistics, and the
layer has BN's batch-statistics interface, so its deterministic (population) map is BN's.
"""

from __future__ import annotations

import math

import torch

from bnstudy.networks.norms.host_ints import buffer_int, remember_int
from bnstudy.networks.norms.layers import BatchNormBase, channel_view, check_value
from bnstudy.networks.norms.noisy import StepNoise
from bnstudy.networks.norms.registry import BN, Normalizer, number_at_least, register, require

CALIBRATION_MOMENTUM = 0.98  # weight of the past in the running variance estimates, per step
_ESTIMATES = ("last_mu", "last_sigma", "var_mu", "var_sigma", "used_var_mu", "used_var_sigma")


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


def plug_in(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
            sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Proposition 2's i.i.d. estimates of ``(var(mu_B), var(sigma_B))`` from one batch ``x``
    (the calibration's starting point)."""
    m = x.numel() // x.shape[1]
    k = (excess_kurtosis(x, mean, var) + 2).clamp_min(0) / 2
    return var / (m - 1), sigma * sigma * gaussian_rel_var(m) * k


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
        # the step whose batch statistics were last folded into the estimates (-1: none yet)
        self.register_buffer("calibration_step", torch.full((), -1, dtype=torch.long))
        for name in _ESTIMATES:
            self.register_buffer(name, torch.zeros(num_features))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, extra_variance={self.extra_variance}"

    def noise(self, c: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The standard normal draws ``(z1, z2)`` of ``c`` units at ``noise_step``."""
        z = torch.randn(2, c, generator=self.generator(device), device=device, dtype=dtype)
        return z[0], z[1]

    @torch.no_grad()
    def calibrate(self, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                  sigma: torch.Tensor) -> None:
        """At the first training pass of a new step: fix the step's amplitudes (``used_var_*``,
        the estimates of the steps before it), then fold this batch's statistics in."""
        done, step = buffer_int(self, "calibration_step"), buffer_int(self, "noise_step")
        if done == step:
            return
        if done < 0:
            v_mu, v_sigma = plug_in(x, mean, var, sigma)
            self.var_mu.copy_(v_mu)
            self.var_sigma.copy_(v_sigma)
        self.used_var_mu.copy_(self.var_mu)
        self.used_var_sigma.copy_(self.var_sigma)
        if done >= 0:
            keep = CALIBRATION_MOMENTUM
            self.var_mu.mul_(keep).add_((mean - self.last_mu).square() / 2, alpha=1 - keep)
            self.var_sigma.mul_(keep).add_((sigma - self.last_sigma).square() / 2,
                                           alpha=1 - keep)
        self.last_mu.copy_(mean)
        self.last_sigma.copy_(sigma)
        self.calibration_step.fill_(step)
        remember_int(self, "calibration_step", step)

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu_used, sigma_used)`` per unit of a training batch ``x`` at ``noise_step`` (the
        first pass of a step updates the calibration, see :meth:`calibrate`)."""
        dims = (0, *range(2, x.dim()))
        m = x.numel() // x.shape[1]
        if m < 2:
            raise ValueError(f"batchnorm_jitter needs more than 1 value per unit in training mode, "
                             f"got input shape {tuple(x.shape)}")
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        sigma = torch.sqrt(var + self.eps)
        f = self.extra_variance
        with torch.no_grad():
            self.calibrate(x.detach(), mean.detach(), var.detach(), sigma.detach())
            shift = torch.sqrt(f * self.used_var_mu.to(x.dtype))
            v = f * self.used_var_sigma.to(x.dtype) / (sigma * sigma)
            log1v = torch.log1p(v.clamp_min(0))
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


# -- the registry entry ------------------------------------------------------------------------
NORMALIZERS = ("batchnorm_jitter",)

register(Normalizer(
    "batchnorm_jitter", lambda c, kind, **o: JitterBatchNorm(c, **o), **BN, stochastic=True,
    batched=False,
    options={"extra_variance": 0.15},
    check=lambda o: require(o, "extra_variance",
                            lambda v: number_at_least(0)(v) and math.isfinite(v),
                            "a finite number >= 0"),
    option_docs={"extra_variance": "the fraction by which the noise raises var(mu_B) and "
                                   "var(sigma_B) over the mini-batch's own"},
    description="BN with jitter: extra noise raising var(mu_B), var(sigma_B) by extra_variance "
                "(BN-Explained §5)"))
