"""Luo's normalizers whose statistics come from the training set, not the mini-batch
(:mod:`bnstudy.networks.norms.bn_init` is BN-Explained's).

Both need the trainer: :func:`bnstudy.train.loop.train` calls the normalizer's ``on_init`` hook
once after building the model (before the step-0 checkpoint) and its ``before_update`` hook at
the start of every step (before that step's evaluation, checkpoint and update). Everything a
hook computes is stored in parameters or buffers, so a checkpoint restores the trained model
without rerunning any hook. ``ctx`` is a :class:`bnstudy.networks.normalizers.HookContext`.

**Population normalization + gamma decay** (Luo et al. 2019, Eq. 3): :class:`PopulationNorm`
computes ``gamma (h - mu_P) / sqrt(sigma_P^2 + eps) + beta`` with population statistics of the
pre-activation ``h = w^T z`` instead of batch statistics. Choices the paper leaves open:

- The population is a fixed subset of ``n_samples`` training inputs (drawn once from the run
  seed; the whole training set when it is smaller). Before every ``refresh_every``-th update,
  layer by layer from the input, the mean ``m`` and (biased) covariance ``C`` of each layer's
  *input* ``z`` over that subset are re-estimated (for conv layers: of the im2col patches, over
  samples and positions), with the earlier layers already refreshed.
- ``mu_P = w^T m`` and ``sigma_P^2 = w^T C w`` are computed from the layer's *current* weights,
  so they are exact population statistics of ``h`` for the stored input moments and gradients
  flow through them to the layer's own weights (PN is then scale-invariant in ``w``, like BN and
  like WN, to which Luo's Eq. 4 reduces it when ``C = a I``). The dependence of ``m, C`` on
  earlier layers is not differentiated (Luo's per-layer analysis, App. C.4, isolates each
  layer's input the same way). Train and eval mode compute the same function.
- Gamma decay adds ``zeta_i gamma_i^2`` per unit to the objective: its gradient ``2 zeta gamma``
  is added to gamma's gradient in every training-mode backward pass (the reported loss is the
  data loss). ``zeta`` is a number (the same for all units; Luo's linear-student equivalence is
  ``1/(2M)``) or ``"eq3"``: at each refresh, per unit, Luo's Eq. 3 in its deep-network form
  (App. C.4), computed from the curvature of the training loss with respect to the unit through
  the rest of the network, in units of the training loss, with ``M = zeta_batch_size``
  (default: the training batch size, the BN batch PN + gamma decay stands in for):
  :mod:`bnstudy.networks.norms.population_decay` documents the estimate (Gauss-Newton part,
  cross-unit noise covariance, ``zeta_probes`` antithetic probes for the ReLU kinks, seeded by
  the run seed and the step). ``tests/test_population_decay.py`` checks ``sum zeta gamma^2``
  against a Monte Carlo of the expected increase of the training loss under batch statistics.
- Cost: each refresh is one forward pass over the subset (in chunks) and a ``fan_in x fan_in``
  covariance per layer; ``"eq3"`` adds one forward pass, one backward pass per network output and
  ``2 zeta_probes`` forward + backward passes -- raise ``refresh_every`` for larger studies
  (statistics then lag the weights by up to that many steps).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bnstudy.networks.blocks import blocks
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.norms.fixed import WeightNormGammaDecay, gamma_decayed
from bnstudy.networks.norms.float32 import Float32Statistics
from bnstudy.networks.norms.host_ints import buffer_int, remember_int
from bnstudy.networks.norms.layers import channel_view
from bnstudy.networks.norms.population_decay import PROBES, curvature_zeta
from bnstudy.networks.norms.population_options import POPULATION_OPTIONS
from bnstudy.networks.norms.registry import (
    Normalizer,
    int_at_least,
    number_at_least,
    register,
    require,
)


class PopulationNorm(Float32Statistics, nn.Module):
    """Luo's PN with gamma decay; bound to its block's linear/conv map by the model builder."""

    def __init__(self, num_features: int, zeta: float | str = "eq3", eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        z0 = 0.0 if zeta == "eq3" else float(zeta)
        self.register_buffer("zeta", torch.full((num_features,), z0))
        self.register_buffer("calibrated", torch.zeros((), dtype=torch.bool))
        self._source: list[nn.Module] = []

    def bind(self, linear: nn.Module) -> None:
        """Attach the linear/conv map whose pre-activations this layer normalizes."""
        if isinstance(linear, nn.Conv2d) and (linear.groups != 1 or linear.padding_mode != "zeros"):
            raise ValueError("population_norm supports ungrouped, zero-padded convolutions only")
        if not isinstance(linear, (nn.Linear, nn.Conv2d)):
            raise ValueError(f"population_norm needs a Linear or Conv2d map, got {type(linear)}")
        self._source = [linear]  # a plain list: not a submodule, no duplicate state_dict keys
        d = linear.weight[0].numel()
        self.register_buffer("mean_in", torch.zeros(d))
        self.register_buffer("cov_in", torch.zeros(d, d))

    @property
    def linear(self) -> nn.Module:
        if not self._source:
            raise RuntimeError("PopulationNorm is not bound to a linear/conv map")
        return self._source[0]

    def patches(self, z: torch.Tensor) -> torch.Tensor:
        """The layer's input as rows ``(samples x positions, fan_in)``."""
        lin = self.linear
        if isinstance(lin, nn.Linear):
            return z.reshape(z.shape[0], -1)
        cols = F.unfold(z, lin.kernel_size, lin.dilation, lin.padding, lin.stride)
        return cols.transpose(1, 2).reshape(-1, cols.shape[1])

    def population_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``mu_P = w^T m (+ b)`` and ``sigma_P^2 = w^T C w``, differentiable in ``w``."""
        lin = self.linear
        w = lin.weight.reshape(lin.weight.shape[0], -1)
        mu = w @ self.mean_in
        if lin.bias is not None:
            mu = mu + lin.bias
        return mu, ((w @ self.cov_in) * w).sum(1)

    def normalized(self, h: torch.Tensor) -> torch.Tensor:
        if not buffer_int(self, "calibrated"):
            raise RuntimeError("population_norm has no population statistics yet: they are "
                               "estimated by the trainer's hooks (training.train)")
        mu, var = self.population_stats()
        return (h - channel_view(mu, h)) * channel_view(torch.rsqrt(var + self.eps), h)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        n = self.normalized(h)
        return n * channel_view(gamma_decayed(self), h) + channel_view(self.bias, h)


def subset(ctx, n_samples: int) -> torch.Tensor:
    """The fixed population subset: ``n_samples`` training indices drawn from the run seed."""
    n = len(ctx.x)
    if n_samples >= n:
        return torch.arange(n)
    gen = torch.Generator().manual_seed(int(ctx.seed))
    return torch.randperm(n, generator=gen)[:n_samples].sort().values


def _accumulate(pn: PopulationNorm, acc: dict, z: torch.Tensor) -> None:
    rows = pn.patches(z.detach()).double()
    acc["n"] += rows.shape[0]
    acc["s"] = acc["s"] + rows.sum(0)
    acc["q"] = acc["q"] + rows.T @ rows


@torch.no_grad()
def _store(pn: PopulationNorm, acc: dict) -> None:
    mean = acc["s"] / acc["n"]
    pn.mean_in.copy_(mean.to(pn.mean_in.dtype))
    pn.cov_in.copy_((acc["q"] / acc["n"] - torch.outer(mean, mean)).to(pn.cov_in.dtype))
    pn.calibrated.fill_(True)
    remember_int(pn, "calibrated", 1)


@torch.no_grad()
def refresh(model: nn.Module, ctx, options: dict, chunk: int = 4096, step: int = 0) -> None:
    """Re-estimate every PN layer's input moments (and ``zeta`` for ``"eq3"``), layer by layer.

    One forward of the subset in chunks of ``chunk`` inputs, each chunk waiting at every PN
    layer until that layer's moments are set from all chunks' inputs (so later layers see
    refreshed earlier ones; :func:`bnstudy.networks.layer_stats.layer_by_layer`). ``step`` seeds
    ``"eq3"``'s probes.
    """
    idx = subset(ctx, options["n_samples"]).to(ctx.x.device)
    x, y = ctx.x[idx], ctx.y[idx]
    pairs = [(b, b.norm) for b in blocks(model) if isinstance(b.norm, PopulationNorm)]
    eq3 = options["zeta"] == "eq3" and bool(pairs)
    m = int(options.get("zeta_batch_size") or ctx.batch_size)
    accs = [{"n": 0, "s": 0.0, "q": 0.0} for _ in pairs]
    layer_by_layer(model, x, chunk, [b.linear for b, _ in pairs],
                   lambda j, z: _accumulate(pairs[j][1], accs[j], z),
                   lambda j: _store(pairs[j][1], accs[j]))
    if eq3:
        with torch.enable_grad():
            gen = torch.Generator().manual_seed(int(ctx.seed) * 1_000_003 + int(step))
            curvature_zeta(model, pairs, x, y, ctx.task, m, chunk,
                           int(options.get("zeta_probes", PROBES)), gen)


@torch.no_grad()
def luo_zeta(model: nn.Module, ctx, options: dict) -> None:
    """weightnorm_gamma_decay's ``zeta="luo"``: the decay Luo §4 finds equivalent to BN with
    batch size M: ``1/(2M)`` for a linear (identity) unit, ``1/(4M)`` for a ReLU unit."""
    if options["zeta"] != "luo":
        return
    m = int(options.get("zeta_batch_size") or ctx.batch_size)
    for block in blocks(model):
        if isinstance(block.act, nn.Identity):
            z = 1 / (2 * m)
        elif isinstance(block.act, nn.ReLU):
            z = 1 / (4 * m)
        else:
            raise ValueError("weightnorm_gamma_decay zeta='luo' is defined for identity and ReLU "
                             f"units, got {type(block.act).__name__}; give zeta a number")
        block.norm.zeta.fill_(z)


# -- the registry entries ----------------------------------------------------------------------
NORMALIZERS = ("population_norm", "weightnorm_gamma_decay")


def _check_population(o: dict) -> None:
    require(o, "n_samples", int_at_least(2), "an int >= 2")
    require(o, "refresh_every", int_at_least(1), "an int >= 1")
    require(o, "zeta", lambda v: v == "eq3" or number_at_least(0)(v), "'eq3' or a number >= 0")
    require(o, "zeta_batch_size", lambda v: v is None or int_at_least(2)(v),
            "null or an int >= 2")
    require(o, "zeta_probes", int_at_least(0), "an int >= 0")
    require(o, "eps", lambda v: number_at_least(0)(v) and v > 0, "a number > 0")


def _check_wn_gamma_decay(o: dict) -> None:
    require(o, "zeta", lambda v: v == "luo" or number_at_least(0)(v), "'luo' or a number >= 0")
    require(o, "zeta_batch_size", lambda v: v is None or int_at_least(1)(v),
            "null or an int >= 1")
    require(o, "input_var", lambda v: v == "fan_in" or (number_at_least(0)(v) and v > 0),
            "'fan_in' (1/fan_in) or a number > 0")


def _population_refresh(model: nn.Module, ctx, step: int, o: dict) -> None:
    if step % o["refresh_every"] == 0:
        refresh(model, ctx, o, step=step)


register(Normalizer(
    "population_norm", lambda c, kind, zeta, eps, **_: PopulationNorm(c, zeta=zeta, eps=eps),
    linear_bias=False,
    options=dict(POPULATION_OPTIONS),
    check=_check_population, before_update=_population_refresh, batched=False,
    option_docs={
        "n_samples": "training inputs in the population the statistics are estimated on",
        "refresh_every": "training steps between re-estimates of the population statistics",
        "zeta": "the gamma-decay factor: 'eq3' (Luo's Eq. 3) or a number >= 0",
        "zeta_batch_size": "Eq. 3's M (null: the training batch size)",
        "zeta_probes": "antithetic probe pairs for the kink part of the 'eq3' curvature "
                       "(0: its Gauss-Newton part only)",
        "eps": "added to the population variance"},
    description="Luo's population normalization + gamma decay"))
register(Normalizer(
    "weightnorm_gamma_decay", lambda c, kind, zeta, input_var, **_: WeightNormGammaDecay(
        c, zeta=zeta, input_var=input_var), linear_bias=False,
    options={"zeta": "luo", "zeta_batch_size": None, "input_var": 1.0},
    check=_check_wn_gamma_decay, on_init=luo_zeta,
    batched=False,  # gamma decay's backward (an autograd.Function) is skipped under vmap
    option_docs={
        "zeta": "'luo' (1/(2M) for linear, 1/(4M) for ReLU units) or a number >= 0",
        "zeta_batch_size": "the M of 'luo' (null: the training batch size)",
        "input_var": "the input variance: 1.0 (plain WN, g = gamma), a number > 0, or 'fan_in' "
                     "(1/fan_in: Luo's x ~ N(0, I/N))"},
    description="Luo's WN + gamma decay (population norm for isotropic inputs, §4 Eq. 4)"))
