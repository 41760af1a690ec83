"""BN's batch statistics across mini-batches, and Proposition 2's prediction of their variance.

BN-Explained Proposition 2 (eq. 13) gives the variance of BN's ``mu_B`` and ``sigma_B^2`` from the
moments of the layer's pre-normalization value ``h = <w, z>``: ``var(mu) = m2 / |B|`` and
``var(s^2) = (m4 - m2^2 (|B| - 3) / (|B| - 1)) / |B|``, the classic variances of the sample mean
and of the *unbiased* sample variance ``s^2`` of ``|B|`` iid draws (``m2``, ``m4``: central
moments of ``h``; App. D.5 "the standard empirical variance estimator").

- :func:`prop2`: eq. (13) as printed.
- :func:`predicted`: the exact variances of what BN computes, ``mu_B`` and the *biased*
  ``sigma_B^2 = (n - 1) / n s^2`` (eq. (3)), for a batch of ``n`` drawn from a finite population
  of ``N`` values: iid (with replacement) this is eq. (13) times ``((n - 1) / n)^2`` for
  ``sigma_B^2``; without replacement (one batch of an epoch permutation) ``var(mu_B) = m2 / n
  (N - n) / (N - 1)`` and ``var(s^2) = N (N - n) [m4 (N^2 (n - 1) - 2 N n + n + 1) - m2^2 (N^2
  (n - 3) + 6 N - 3 n - 3)] / (n (n - 1) (N - 1)^2 (N - 2) (N - 3))``, derived by writing
  ``s^2`` as the mean over pairs of ``(x_i - x_j)^2 / 2`` and summing the covariances of pairs
  that share 2, 1 or 0 units (a U-statistic under simple random sampling; it tends to eq. (13) as
  ``N -> inf`` and is 0 at ``n = N``). ``N < 4`` gives NaN. The tests check both forms against an
  exhaustive enumeration of all batches of a small population.
- :func:`population_moments`: the moments of every BN layer's input over the training set, each
  layer's computed with the earlier BN layers normalizing by their own whole-set statistics
  (eval mode, one forward per image, each chunk waiting at every BN layer until it is frozen,
  while the waiting chunks fit the memory budget, else one pass stopped at each layer, the same
  numbers: :func:`bnstudy.networks.layer_stats.layer_by_layer`; float64 power sums shifted by the
  first chunk's mean), and the eval-mode copy frozen at those statistics.
- :func:`batch_statistics`: what a train-mode forward of each batch on a private copy gives
  every BN layer: the per-unit mean and biased variance of its input over the batch (and H, W
  for conv maps), computed in the input's precision (float32, as BN does) and stored in float64.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from bnstudy.measures.jitter.options import SAMPLING  # noqa: F401 (re-exported)
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.normalizers import batchnorm_modules
from bnstudy.networks.norms.layers import GhostBatchNorm, ghost_sizes, set_mean_var
from bnstudy.networks.norms.noisy import StepNoise
from bnstudy.networks.probe import training_mode, watch


def prop2(m2, m4, n: int) -> tuple:
    """Eq. (13) as printed: ``var(mu)``, ``var(s^2)`` of ``n`` iid draws (unbiased ``s^2``)."""
    return m2 / n, (m4 - m2 ** 2 * (n - 3) / (n - 1)) / n


def predicted(m2, m4, n: int, population: int, sampling: str) -> tuple:
    """Exact ``var(mu_B)`` and ``var(sigma_B^2)`` (BN's biased variance) of a batch of ``n``
    drawn from a population of ``population`` values with central moments ``m2``, ``m4``."""
    if sampling not in SAMPLING:
        raise ValueError(f"unknown sampling {sampling!r}; valid choices: {list(SAMPLING)}")
    if n < 2:
        raise ValueError(f"batch statistics need n >= 2 samples, got {n}")
    bias = ((n - 1) / n) ** 2  # sigma_B^2 = (n - 1) / n * s^2
    if sampling == "with_replacement":
        var_mu, var_s2 = prop2(m2, m4, n)
        return var_mu, bias * var_s2
    big = population
    if n > big:
        raise ValueError(f"a batch of {n} drawn without replacement from {big} values")
    if big < 4:  # the finite-population formula needs N >= 4
        nan = m2 * float("nan")
        return nan, nan
    var_mu = m2 / n * (big - n) / (big - 1)
    var_s2 = (big * (big - n) * (m4 * (big ** 2 * (n - 1) - 2 * big * n + n + 1)
                                 - m2 ** 2 * (big ** 2 * (n - 3) + 6 * big - 3 * n - 3))
              / (n * (n - 1) * (big - 1) ** 2 * (big - 2) * (big - 3)))
    return var_mu, bias * var_s2


@dataclass
class Moments:
    """Per-unit population moments of one BN layer's input (float64 numpy arrays)."""

    count: int  # values per unit (samples, times H W for conv)
    mean: np.ndarray
    m2: np.ndarray
    m4: np.ndarray


def _dims(h: torch.Tensor) -> tuple[int, ...]:
    return (0, *range(2, h.dim()))


@torch.no_grad()
def population_moments(model: nn.Module, x: torch.Tensor, chunk_rows: int = 65536,
                       budget_bytes: int | None = None) -> tuple[list[Moments], nn.Module]:
    """Moments of every BN layer's input over ``x``, earlier BN layers normalizing by their own
    statistics of ``x``, in forwards of ``chunk_rows`` rows; also returns the eval-mode copy
    frozen at those statistics. ``budget_bytes``: what the suspended chunks may hold
    (:func:`bnstudy.networks.layer_stats.layer_by_layer`; None: the device's default)."""
    net = copy.deepcopy(model).eval()
    bns = batchnorm_modules(net)
    accs: list[dict] = [{} for _ in bns]
    out: dict[int, Moments] = {}

    def grab(j: int, z: torch.Tensor) -> None:
        acc = accs[j]
        h = z.double().transpose(0, 1).reshape(z.shape[1], -1)
        if "shift" not in acc:
            acc.update(shift=h.mean(1), n=0, s=[0.0] * 4)
        d = h - acc["shift"][:, None]
        acc["n"] += d.shape[1]
        acc["s"] = [acc["s"][p] + d.pow(p + 1).sum(1) for p in range(4)]

    def freeze(j: int) -> None:
        acc = accs[j]
        e1, e2, e3, e4 = (s / acc["n"] for s in acc["s"])
        mean = acc["shift"] + e1
        m2 = (e2 - e1 ** 2).clamp_min(0.0)
        m4 = (e4 - 4 * e1 * e3 + 6 * e1 ** 2 * e2 - 3 * e1 ** 4).clamp_min(0.0)
        set_mean_var(bns[j], mean, m2)
        out[j] = Moments(acc["n"], *(t.cpu().numpy() for t in (mean, m2, m4)))

    layer_by_layer(net, x, chunk_rows, bns, grab, freeze, budget_bytes)
    missing = sorted(set(range(len(bns))) - set(out))
    if missing:
        raise RuntimeError(f"BN layers {missing} are not on the forward path")
    return [out[j] for j in range(len(bns))], net


@torch.no_grad()
def batch_statistics(model: nn.Module, x: torch.Tensor,
                     batches: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per BN layer, ``(K, C)`` float64 means and biased variances of its input under a
    train-mode forward of each batch (on a private copy).

    Batches of one size go through as one grouped pass (:func:`_grouped`): ``torch.func.vmap``
    over the batches, every layer normalizing each batch by that batch's own statistics, as a
    forward of the batch alone does (the same numbers to float rounding: the batched BN kernel
    rounds differently). Layers that draw noise per pass (noisy BN) go one batch at a time."""
    if batches and len({len(b) for b in batches}) == 1 and not any(
            isinstance(m, StepNoise) for m in model.modules()):
        with training_mode(model, True):  # buffers passed in: the model is not changed
            return _grouped(model, batchnorm_modules(model), x, torch.stack(list(batches)))
    net = copy.deepcopy(model).train()
    bns = batchnorm_modules(net)
    current: list = [None] * len(bns)

    def moments(j: int, z: torch.Tensor) -> None:
        var, mean = torch.var_mean(z, dim=_dims(z), correction=0)
        current[j] = (mean.double(), var.double())

    out = [(torch.empty(len(batches), bn.num_features, dtype=torch.float64),
            torch.empty(len(batches), bn.num_features, dtype=torch.float64)) for bn in bns]
    with watch(bns, moments, inputs=True):  # each BN layer's input, as it runs
        for k, idx in enumerate(batches):
            net(x[idx])
            for j, (mean, var) in enumerate(current):
                out[j][0][k], out[j][1][k] = mean.cpu(), var.cpu()
    return out


@torch.no_grad()
def _grouped(net: nn.Module, bns: list, x: torch.Tensor, idx: torch.Tensor,
             max_rows: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`batch_statistics` of the batches ``idx`` (``[K, b]``) in grouped passes of at most
    ``max_rows`` rows: the parameters shared, the buffers (BN's running statistics, which a
    train-mode pass updates) one copy per batch, each BN layer's input moments per batch.
    ``None``: 4096 rows on the CPU, where a pass's activations then stay in cache (100 batches
    of 128 on the default study's digits MLP: 80 ms against 112 ms in one pass of 12800 rows;
    the numbers are bitwise the same, ``tests/test_bn_jitter.py``), 65536 on a GPU."""
    if max_rows is None:
        max_rows = 4096 if x.device.type == "cpu" else 1 << 16
    names = [n for n, _ in net.named_buffers()]
    per_group = max(2, max_rows // max(1, idx.shape[1]))  # >= 2: a group of 1 rounds as 2 do

    def one(buffers, xb):
        found: list = [None] * len(bns)

        def moments(j: int, z: torch.Tensor) -> None:  # two passes: var_mean is slow under vmap
            mean = z.mean(_dims(z), keepdim=True)
            var = (z - mean).square().mean(_dims(z))
            found[j] = (mean.reshape(var.shape).double(), var.double())

        with watch(bns, moments, inputs=True):
            functional_call(net, dict(zip(names, buffers, strict=True)), (xb,), strict=False)
        return tuple(t for pair in found for t in pair)

    grouped = vmap(one, in_dims=(0, 0), randomness="error")
    parts = []
    for lo in range(0, len(idx), per_group):
        chunk = idx[lo: lo + per_group]
        k = len(chunk)
        if k == 1:
            chunk = torch.cat([chunk, chunk])
        bufs = tuple(b.expand(len(chunk), *b.shape).clone() for b in net.buffers())
        parts.append([t[:k].cpu() for t in grouped(bufs, x[chunk])])
    flat = [torch.cat([p[i] for p in parts]) for i in range(2 * len(bns))]
    return [(flat[2 * j], flat[2 * j + 1]) for j in range(len(bns))]


def effective_batch_size(model: nn.Module, batch_size: int) -> int:
    """The number of samples BN's statistics are over: the first virtual batch for ghost BN."""
    ghosts = {m.ghost_batch_size for m in model.modules() if isinstance(m, GhostBatchNorm)}
    if len(ghosts) > 1:
        raise ValueError(f"ghost BN layers with different ghost_batch_size {sorted(ghosts)}")
    return ghost_sizes(batch_size, ghosts.pop())[0] if ghosts else batch_size


def draw_batches(n_train: int, batch_size: int, count: int, sampling: str, seed: int,
                 run_seed: int = 0) -> list[torch.Tensor]:
    """``count`` batches of training-set indices from ``default_rng([seed, run_seed,
    batch_size])``."""
    rng = np.random.default_rng([seed, run_seed, batch_size])
    replace = sampling == "with_replacement"
    return [torch.as_tensor(rng.choice(n_train, batch_size, replace=replace)) for _ in
            range(count)]
