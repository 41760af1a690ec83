"""The normalizer registry: every normalization layer the study compares, by name.

Models never test for a normalizer by name. They receive a :class:`Normalizer` (the
``norm_layer`` pattern) and call it at each hidden layer::

    lin = norm.wrap(nn.Linear(d_in, d_out, bias=norm.linear_bias))
    block = [lin, norm.layer(d_out, "fc"), activation]

``layer(num_features, kind)`` builds the module that sits between the linear/conv map and the
activation (``kind`` is ``"fc"`` for (N, C) inputs and ``"conv"`` for (N, C, H, W) inputs);
``wrap(module)`` may reparametrize the linear/conv map itself (weight normalization does);
``linear_bias`` says whether that map keeps its own bias (BN's beta makes it redundant, and
BN-Explained's fixed-affine BN has no bias at all); ``bias_init`` overrides the model config's
bias initialization; ``on_init`` / ``before_update`` are trainer hooks (see
:mod:`bnstudy.networks.norms.population`) for normalizers whose statistics come from the training
set.

Traits every measure relies on (``tests/test_normalizer_traits.py`` checks them against the
layers of every registered normalizer):

- ``uses_batch_statistics``: the training-mode map normalizes with statistics of the batch. Its
  layers implement :class:`bnstudy.networks.norms.layers.BatchStatistics`, the one interface through
  which population statistics are frozen or recomputed (:func:`batch_statistics_layers`).
- ``stochastic``: the training-mode map is random. Its layers draw the noise of the training
  step the trainer sets (:func:`set_step`), the same in every pass at that step
  (:mod:`bnstudy.networks.norms.noisy`).

Options: a model config's ``norm_options`` maps normalizer names to their options, e.g.
``{"ghost_batchnorm": {"ghost_batch_size": 8}}``, so one model serves every normalizer of an
experiment; each normalizer gets its own entry (:meth:`Normalizer.with_options`). Unknown names
or bad values fail with the valid choices.

============================  ===============================================================
normalizer                    options (default)
============================  ===============================================================
none, batchnorm,              —
batchnorm_fixed_affine,
layernorm, weightnorm,
instancenorm, l1norm, l2norm, (l_p norms: ``eps`` (1e-5) added to the l_p scale)
linfnorm, zero_bias,
weightnorm_meanonly_bn,
weightnorm_varonly_bn
groupnorm                     ``groups`` (8): the largest divisor of the width <= groups
noisy_batchnorm               ``n_mu`` (0.5), ``n_sigma`` (1.25), ``r_mu`` (0.1), ``r_sigma``
                              (0.1): Santurkar Alg. 1; ``eval_noise`` ("mean" | "off")
ghost_batchnorm               ``ghost_batch_size`` (16): virtual batch size of the statistics
batchnorm_jitter              ``extra_variance`` (0.15): BN-Explained §5's jitter: noise that
                              raises var(mu_B), var(sigma_B) by this fraction
population_norm               ``n_samples`` (1024): training inputs in the population;
                              ``refresh_every`` (1): steps between re-estimates; ``zeta``
                              ("eq3" | number >= 0): gamma-decay factor; ``zeta_batch_size``
                              (null = training batch size): Eq. 3's M; ``zeta_probes`` (4):
                              antithetic probe pairs for the kink part of "eq3"'s curvature
                              (0 = Gauss-Newton part only); ``eps`` (1e-5)
weightnorm_gamma_decay        ``zeta`` ("luo" = 1/(2M) linear, 1/(4M) ReLU units | number);
                              ``zeta_batch_size`` (null = training batch size): M;
                              ``input_var`` (1.0 = plain WN, g = gamma | number |
                              "fan_in" = 1/fan_in, Luo's x ~ N(0, I/N))
bn_init                       ``fold`` (true): fold the frozen BN map into W, b; ``eps`` (1e-5)
random_bias                   ``bias_std`` (null = the model config's ``bias_std``)
============================  ===============================================================

Adding a normalizer is one :func:`register` call. Unknown names fail with the list of valid ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch import nn
from torch.nn.utils import parametrizations

from bnstudy.networks.norms import fixed as nlf
from bnstudy.networks.norms import jitter as njit
from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms import noisy as nln
from bnstudy.networks.norms import population as npop


@dataclass(frozen=True)
class HookContext:
    """What the trainer hands to normalizer hooks: the training set and run settings."""

    x: torch.Tensor  # training inputs, on the run's device
    y: torch.Tensor  # training targets
    task: str  # "classification" | "regression"
    batch_size: int  # the training mini-batch size (the training-set size for full batch)
    seed: int  # the run seed


def _identity_wrap(module: nn.Module) -> nn.Module:
    return module


@dataclass(frozen=True)
class Normalizer:
    """A named normalization scheme, injected into models."""

    name: str
    build: Callable[..., nn.Module]  # build(num_features, kind, **options)
    wrap: Callable[[nn.Module], nn.Module] = _identity_wrap
    linear_bias: bool = True
    description: str = ""
    uses_batch_statistics: bool = False  # training mode normalizes with batch statistics
    stochastic: bool = False  # training mode draws noise (of the step set by set_step)
    options: dict = field(default_factory=dict)  # defaults; with_options gives configured ones
    check: Callable[[dict], None] | None = None  # validates option values
    bias_init: str | None = None  # overrides the model config's bias_init when set
    on_init: Callable[[nn.Module, HookContext, dict], None] | None = None
    before_update: Callable[[nn.Module, HookContext, int, dict], None] | None = None

    def layer(self, num_features: int, kind: str) -> nn.Module:
        if kind not in ("fc", "conv"):
            raise ValueError(f"layer kind must be 'fc' or 'conv', got {kind!r}")
        return self.build(num_features, kind, **self.options)

    def with_options(self, options: dict | None) -> Normalizer:
        """This normalizer with ``options`` over its defaults (checked)."""
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            valid = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"unknown option(s) {unknown} for normalizer {self.name!r}; "
                             f"valid: {valid}")
        merged = {**self.options, **options}
        if self.check is not None:
            self.check(merged)
        return replace(self, options=merged)

    def init_overrides(self) -> dict:
        """Model-config fields this normalizer overrides (the bias-init baselines)."""
        if self.bias_init is None:
            return {}
        out = {"bias_init": self.bias_init}
        if self.options.get("bias_std") is not None:
            out["bias_std"] = float(self.options["bias_std"])
        return out


REGISTRY: dict[str, Normalizer] = {}


def register(norm: Normalizer) -> Normalizer:
    if norm.name in REGISTRY:
        raise ValueError(f"normalizer {norm.name!r} is already registered")
    REGISTRY[norm.name] = norm
    return norm


def get(name: str, options: dict | None = None) -> Normalizer:
    try:
        norm = REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown normalizer {name!r}; valid choices: {valid}") from None
    return norm.with_options(options)


def names() -> list[str]:
    return sorted(REGISTRY)


def _require(opts: dict, key: str, ok: Callable, valid: str) -> None:
    if not ok(opts[key]):
        raise ValueError(f"bad normalizer option {key}={opts[key]!r}; valid: {valid}")


def _int(lo: int) -> Callable:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _number(lo: float) -> Callable:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= lo


def _batchnorm(affine: bool) -> Callable[..., nn.Module]:
    def build(c: int, kind: str) -> nn.Module:
        cls = nl.BatchNorm1d if kind == "fc" else nl.BatchNorm2d
        return cls(c, affine=affine)

    return build


def _layernorm(c: int, kind: str) -> nn.Module:
    if kind == "fc":
        return nn.LayerNorm(c)
    # Channel-and-space layer norm for conv maps: GroupNorm with one group is exactly that.
    return nn.GroupNorm(1, c)


def _groupnorm(c: int, kind: str, groups: int = 8) -> nn.Module:
    g = groups
    while c % g:
        g -= 1
    return nn.GroupNorm(g, c)


def _instancenorm(c: int, kind: str) -> nn.Module:
    if kind != "conv":
        raise ValueError("instancenorm normalizes each channel over H, W of one sample: it needs "
                         "conv layers (arch vgg), not fully connected ones")
    return nn.InstanceNorm2d(c, affine=True)


def _identity(c: int, kind: str, **_) -> nn.Module:
    return nn.Identity()


def _weight_norm(module: nn.Module) -> nn.Module:
    return parametrizations.weight_norm(module, name="weight", dim=0)


def _lp(p: float) -> Callable[..., nn.Module]:
    def build(c: int, kind: str, eps: float) -> nn.Module:
        return nl.LpBatchNorm(c, p, eps=eps)

    return build


def _check_eps(o: dict) -> None:
    _require(o, "eps", _number(0), "a number >= 0")


def _check_population(o: dict) -> None:
    _require(o, "n_samples", _int(2), "an int >= 2")
    _require(o, "refresh_every", _int(1), "an int >= 1")
    _require(o, "zeta", lambda v: v == "eq3" or _number(0)(v), "'eq3' or a number >= 0")
    _require(o, "zeta_batch_size", lambda v: v is None or _int(2)(v), "null or an int >= 2")
    _require(o, "zeta_probes", _int(0), "an int >= 0")
    _require(o, "eps", lambda v: _number(0)(v) and v > 0, "a number > 0")


def _check_bn_init(o: dict) -> None:
    _require(o, "fold", lambda v: isinstance(v, bool), "true or false")
    _check_eps(o)


def _check_wn_gamma_decay(o: dict) -> None:
    _require(o, "zeta", lambda v: v == "luo" or _number(0)(v), "'luo' or a number >= 0")
    _require(o, "zeta_batch_size", lambda v: v is None or _int(1)(v), "null or an int >= 1")
    _require(o, "input_var", lambda v: v == "fan_in" or (_number(0)(v) and v > 0),
             "'fan_in' (1/fan_in) or a number > 0")


def _population_layer(c: int, kind: str, zeta, eps, **_) -> nn.Module:
    return npop.PopulationNorm(c, zeta=zeta, eps=eps)


def _population_refresh(model: nn.Module, ctx: HookContext, step: int, o: dict) -> None:
    if step % o["refresh_every"] == 0:
        npop.refresh(model, ctx, o, step=step)


BN = {"linear_bias": False, "uses_batch_statistics": True}

register(Normalizer("none", _identity, description="no normalization (the 'standard' network)"))
register(Normalizer("batchnorm", _batchnorm(affine=True), **BN,
                    description="BatchNorm with learned gamma and beta (Ioffe & Szegedy)"))
register(Normalizer(
    "batchnorm_fixed_affine", _batchnorm(affine=False), **BN,
    description="BatchNorm with gamma=1, beta=0 not learned (BN-Explained's setting)"))
register(Normalizer("layernorm", _layernorm, description="LayerNorm over features"))
register(Normalizer(
    "groupnorm", _groupnorm, options={"groups": 8},
    check=lambda o: _require(o, "groups", _int(1), "an int >= 1"),
    description="GroupNorm (the largest divisor of the width <= groups, 8 by default)"))
register(Normalizer(
    "weightnorm", _identity, wrap=_weight_norm,
    description="weight normalization w = g v/||v|| of each linear/conv map (Salimans)"))
register(Normalizer(
    "noisy_batchnorm", lambda c, kind, **o: nln.NoisyBatchNorm(c, **o), **BN, stochastic=True,
    options={"n_mu": 0.5, "n_sigma": 1.25, "r_mu": 0.1, "r_sigma": 0.1, "eval_noise": "mean"},
    description="BatchNorm followed by Santurkar's Algorithm 1 time-varying noise"))
register(Normalizer(
    "batchnorm_jitter", lambda c, kind, **o: njit.JitterBatchNorm(c, **o), **BN, stochastic=True,
    options={"extra_variance": 0.15},
    check=lambda o: _require(o, "extra_variance", lambda v: _number(0)(v) and math.isfinite(v),
                             "a finite number >= 0"),
    description="BN with jitter: extra noise raising var(mu_B), var(sigma_B) by extra_variance "
                "(BN-Explained §5)"))
register(Normalizer(
    "ghost_batchnorm", lambda c, kind, **o: nl.GhostBatchNorm(c, **o), **BN,
    options={"ghost_batch_size": 16},
    description="BatchNorm over virtual batches (BN-Explained's noise-controlled BN)"))
for _name, _p in (("l1norm", 1.0), ("l2norm", 2.0), ("linfnorm", math.inf)):
    register(Normalizer(
        _name, _lp(_p), **BN, options={"eps": 1e-5}, check=_check_eps,
        description=f"Santurkar's l_{'inf' if _p == math.inf else int(_p)} normalization: "
                    "batch-mean centering, division by the batch average l_p norm"))
register(Normalizer("instancenorm", _instancenorm, linear_bias=False,
                    description="InstanceNorm (per sample and channel over H, W; conv only)"))
register(Normalizer(
    "population_norm", _population_layer, linear_bias=False,
    options={"n_samples": 1024, "refresh_every": 1, "zeta": "eq3", "zeta_batch_size": None,
             "zeta_probes": 4, "eps": 1e-5},
    check=_check_population, before_update=_population_refresh,
    description="Luo's population normalization + gamma decay"))
register(Normalizer(
    "weightnorm_meanonly_bn", lambda c, kind: nl.MeanOnlyBatchNorm(c), wrap=_weight_norm,
    **BN, description="weight normalization + mean-only BN (Luo §5)"))
register(Normalizer(
    "weightnorm_varonly_bn", lambda c, kind: nl.VarOnlyBatchNorm(c), wrap=_weight_norm,
    **BN, description="weight normalization + variance-only BN (Luo §5)"))
register(Normalizer(
    "weightnorm_gamma_decay", lambda c, kind, zeta, input_var, **_: nlf.WeightNormGammaDecay(
        c, zeta=zeta, input_var=input_var), linear_bias=False,
    options={"zeta": "luo", "zeta_batch_size": None, "input_var": 1.0},
    check=_check_wn_gamma_decay, on_init=npop.luo_zeta,
    description="Luo's WN + gamma decay (population norm for isotropic inputs, §4 Eq. 4)"))
register(Normalizer(
    "bn_init", lambda c, kind, **_: nlf.FrozenAffine(c), options={"fold": True, "eps": 1e-5},
    check=_check_bn_init, on_init=lambda model, ctx, o: npop.fold_bn_init(model, ctx, o),
    description="BN-Explained's smart init: whole-training-set BN frozen at step 0, no BN"))
register(Normalizer("zero_bias", _identity, bias_init="zero",
                    description="no normalization, zero biases (BN-Explained §3.3)"))
register(Normalizer(
    "random_bias", _identity, bias_init="random", options={"bias_std": None},
    check=lambda o: _require(o, "bias_std", lambda v: v is None or _number(0)(v),
                             "null or a number >= 0"),
    description="no normalization, biases ~ N(0, bias_std^2) (BN-Explained §3.3)"))


def batch_statistics_layers(model: nn.Module) -> list[nl.BatchStatistics]:
    """Every layer of ``model`` whose training map normalizes with batch statistics (the layers
    of the ``uses_batch_statistics`` normalizers), input to output."""
    return [m for m in model.modules() if isinstance(m, nl.BatchStatistics)]


def batchnorm_modules(model: nn.Module) -> list[nl.BatchStatistics]:
    """The batch-statistics layers whose statistics are a mean and a variance held in BN's
    running buffers (BN and its noisy, jitter, ghost, mean-only and variance-only variants): the
    :func:`batch_statistics_layers` without the l_p norms (whose statistics are a mean and an
    l_p scale)."""
    return [m for m in batch_statistics_layers(model) if m.STATISTICS == ("mean", "var")]


def set_step(model: nn.Module, step: int) -> None:
    """Make the stochastic layers of ``model`` draw the noise of training step ``step``."""
    nln.set_step(model, step)
