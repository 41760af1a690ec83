"""Normalizers whose training map is random: Santurkar's noisy BN, and the rule every such layer
follows: **the noise is a function of (layer seed, training step), never of how many forward
passes ran.**

The noise drawn for training step ``t`` is part of that step's function. A measure that
compares several passes at one checkpoint (gradient ICS's G and G', the smoothness probes, the
Hessian) must compare one function, not one function plus fresh noise per pass. So a
:class:`StepNoise` layer keeps two buffers, ``noise_seed`` (drawn from torch's global RNG when
the layer is built, i.e. from the run seed) and ``noise_step``, and every training-mode forward
draws the noise of exactly that pair: any number of passes see the same noise. The trainer
sets the step at the start of every step (:func:`set_step`, before hooks, evaluation,
checkpoint and update), so

- training draws new noise at every step (Algorithm 1's "time-varying" noise), the same on
  every run of a seed, and a resumed run replays it exactly;
- the checkpoint at step ``t`` stores ``noise_step = t``: a restored model draws the noise its
  update used, in every pass a measure makes on it (on CPU and on CUDA; the CUDA stream differs
  from the CPU one).

:class:`NoisyBatchNorm`: Santurkar et al. (2018) Algorithm 1 (App. A.2.1): BN (with its learned
affine), then in training mode every activation ``a_ij`` becomes ``s_ij a_ij + m_ij``. Per step
and unit ``j``: ``mu_j ~ U(-n_mu, n_mu)``, ``sigma_j ~ U(1, n_sigma)``; per sample and unit:
``m_ij ~ U(mu_j - r_mu, mu_j + r_mu)``, ``s_ij ~ N(sigma_j, r_sigma)`` (``r_sigma`` read as a
standard deviation). Conv maps draw ``m, s`` per position (H, W are batch). The paper leaves
inference open; ``eval_noise="mean"`` (default) applies the noise's expectation
``a -> E[s] a + E[m] = (1 + n_sigma)/2 a`` (as dropout applies its mean at test time), ``"off"``
applies none. Its deterministic map (eval mode, and population statistics' passes) is BN with
that expectation. It has BN's batch-statistics interface (:mod:`bnstudy.networks.norms.layers`).
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.norms.host_ints import buffer_int, remember_int
from bnstudy.networks.norms.layers import BatchNormBase
from bnstudy.networks.norms.registry import BN, Normalizer, number_at_least, register, require

EVAL_NOISE = ("mean", "off")


class StepNoise:
    """A layer whose training-mode noise is drawn from ``(noise_seed, noise_step)`` buffers.

    No host-device sync per forward: the buffers' values are read as Python ints by
    :func:`~bnstudy.networks.norms.host_ints.buffer_int` (from the device only after they changed
    other than through :meth:`set_step`), and the layer keeps one generator per device,
    re-seeded per draw (a re-seeded generator gives the same stream as a fresh one)."""

    def set_step(self, step: int) -> None:
        step = int(step)
        with torch.no_grad():
            self.noise_step.fill_(step)
        remember_int(self, "noise_step", step)

    def generator(self, device) -> torch.Generator:
        """This layer's generator for the noise of step ``noise_step``, seeded afresh."""
        seed = (buffer_int(self, "noise_seed") * 6364136223846793005
                + buffer_int(self, "noise_step") * 1442695040888963407) % 2**63
        gens = self.__dict__.setdefault("_generators", {})
        device = torch.device(device)
        if device not in gens:
            gens[device] = torch.Generator(device=device)
        return gens[device].manual_seed(seed)


def set_step(model: nn.Module, step: int) -> None:
    """Make every :class:`StepNoise` layer of ``model`` draw the noise of training step ``step``."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"bad training step {step!r}; valid: an int >= 0")
    for m in model.modules():
        if isinstance(m, StepNoise):
            m.set_step(step)


class NoisyBatchNorm(StepNoise, BatchNormBase):
    """BN followed by Santurkar's Algorithm 1 noise (training mode)."""

    def __init__(self, num_features: int, n_mu: float = 0.5, n_sigma: float = 1.25,
                 r_mu: float = 0.1, r_sigma: float = 0.1, eval_noise: str = "mean"):
        super().__init__(num_features, affine=True)
        _check({"n_mu": n_mu, "n_sigma": n_sigma, "r_mu": r_mu, "r_sigma": r_sigma,
                "eval_noise": eval_noise})  # the registry's check: one statement of the ranges
        self.n_mu, self.n_sigma = float(n_mu), float(n_sigma)
        self.r_mu, self.r_sigma = float(r_mu), float(r_sigma)
        self.eval_noise = eval_noise
        self.register_buffer("noise_seed", torch.randint(0, 2**62, ()))
        self.register_buffer("noise_step", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, n_mu={self.n_mu}, n_sigma={self.n_sigma}, "
                f"r_mu={self.r_mu}, r_sigma={self.r_sigma}, eval_noise={self.eval_noise}")

    def noise(self, shape: torch.Size, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The draw ``(s, m)`` of Algorithm 1 for activations of ``shape`` at ``noise_step``."""
        gen, c = self.generator(device), shape[1]
        kw = {"generator": gen, "device": device, "dtype": dtype}
        view = (1, c, *([1] * (len(shape) - 2)))
        mu = (2 * torch.rand(c, **kw) - 1) * self.n_mu
        sigma = 1 + torch.rand(c, **kw) * (self.n_sigma - 1)
        m = mu.view(view) + (2 * torch.rand(shape, **kw) - 1) * self.r_mu
        s = sigma.view(view) + torch.randn(shape, **kw) * self.r_sigma
        return s, m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if self.training:
            s, m = self.noise(y.shape, y.device, y.dtype)
            return s * y + m
        if self.eval_noise == "mean":
            return y * ((1 + self.n_sigma) / 2)
        return y


# -- the registry entry ------------------------------------------------------------------------
NORMALIZERS = ("noisy_batchnorm",)


def _check(o: dict) -> None:
    """Algorithm 1's ranges: the registry's check of a config's options, and the layer's own
    when it is built directly."""
    for key, lo in (("n_mu", 0), ("n_sigma", 1), ("r_mu", 0), ("r_sigma", 0)):
        require(o, key, number_at_least(lo), f"a number >= {lo}")
    require(o, "eval_noise", lambda v: v in EVAL_NOISE, " or ".join(map(repr, EVAL_NOISE)))


register(Normalizer(
    "noisy_batchnorm", lambda c, kind, **o: NoisyBatchNorm(c, **o), **BN, stochastic=True,
    batched=False,
    options={"n_mu": 0.5, "n_sigma": 1.25, "r_mu": 0.1, "r_sigma": 0.1, "eval_noise": "mean"},
    check=_check,
    option_docs={
        "n_mu": "per step and unit mu_j ~ U(-n_mu, n_mu): the additive noise's mean (Alg. 1)",
        "n_sigma": "per step and unit sigma_j ~ U(1, n_sigma): the multiplicative noise's mean",
        "r_mu": "per sample m_ij ~ U(mu_j - r_mu, mu_j + r_mu): the additive noise's spread",
        "r_sigma": "per sample s_ij ~ N(sigma_j, r_sigma): the multiplicative noise's std",
        "eval_noise": "'mean' applies the noise's expectation in eval mode, 'off' none"},
    description="BatchNorm followed by Santurkar's Algorithm 1 time-varying noise"))
