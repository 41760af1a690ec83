"""The Hessian's trace, top eigenvalues and eigenvalue density from Hessian-vector products.

The Hessian is never formed: :func:`hvp_operator` differentiates the loss once with
``create_graph=True`` and each product ``H v`` is one more backward pass through that graph
(Pearlmutter). Vectors are lists of tensors, one per parameter tensor (a *block*).

- :func:`hutchinson`: ``tr H = E[v' H v]`` over Rademacher ``v`` (entries +-1); the estimate
  is the mean over ``n`` draws and its standard error the draws' sample standard deviation over
  ``sqrt(n)``. Per block ``b``: ``tr H_bb = E[v_b' (H v)_b]``, from the same draws (the blocks'
  estimates sum to the total's).
- :func:`lanczos`: ``m`` steps of the Lanczos iteration with full re-orthogonalization (every new
  vector is orthogonalized twice against all earlier ones, as PyHessian does), from a unit start
  vector ``v`` (:func:`bnstudy.networks.hessian.lanczos`, which the smoothness measure's top
  eigenvalue uses too). The tridiagonal ``T`` it builds has Ritz values ``theta_i`` (its
  eigenvalues) and vectors ``s_i``; ``|beta_m s_i[m]|`` bounds the eigen-residual of each Ritz pair,
  so a Ritz value with a small one is within it of an eigenvalue of ``H``. A breakdown (an invariant
  subspace: ``beta ~ 0``) ends the iteration early with exact Ritz values.
- top-k: the ``k`` largest Ritz values of one Lanczos run from a seeded Gaussian start.
- density: stochastic Lanczos quadrature (Ubaru et al. 2017; PyHessian's ``density``): for each
  run a Rademacher start ``v / ||v||``; the nodes are the Ritz values and the weights
  ``w_i = s_i[0]^2`` (summing to 1), so that ``sum_i w_i f(theta_i)`` is the Gauss quadrature of
  ``v' f(H) v`` (exact for polynomials of degree below ``2m``) and its mean over runs estimates
  ``tr f(H) / n``: the spectral density is ``sum_i w_i delta(t - theta_i)``, which the figure
  smooths with a Gaussian kernel as PyHessian does.

Random vectors are drawn on the CPU from ``torch.Generator().manual_seed(seed)`` in float64 and
moved to each tensor's device and dtype, so the same seed gives the same numbers on any device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bnstudy.networks import hessian

Vector = hessian.Vector
HVP = hessian.HVP


def dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x.double() * y.double()).sum() for x, y in zip(a, b, strict=True))


def hvp_operator(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> HVP:
    """``v -> H v`` for the Hessian of ``loss`` w.r.t. the leaf tensors ``params``."""
    return hessian.gradient_and_hvp(loss, params)[1]


def hutchinson(hvp: HVP, like: Sequence[torch.Tensor], samples: int, seed: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw ``v_b' (H v)_b`` for every block ``b``: an array (samples, blocks)."""
    gen = torch.Generator().manual_seed(int(seed))
    rows = []
    for _ in range(samples):
        v = hessian.draw(like, gen, rademacher=True)
        hv = hvp(v)
        rows.append(torch.stack([dot([a], [b]) for a, b in zip(v, hv, strict=True)]))
    return torch.stack(rows).cpu().numpy(), np.array([p.numel() for p in like])


def mean_se(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard error (sample sd / sqrt(n)) of ``values``."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else np.nan


def lanczos(hvp: HVP, v0: Vector, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ritz values (ascending), quadrature weights and residual bounds of ``steps`` Lanczos
    steps (fewer at a breakdown) from ``v0`` (normalized here):
    :func:`bnstudy.networks.hessian.lanczos`."""
    r = hessian.lanczos(hvp, v0, steps)
    return r.theta, r.weights, r.residuals


def top_k(hvp: HVP, like: Sequence[torch.Tensor], k: int, steps: int, seed: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest Ritz values (descending) and their residual bounds."""
    gen = torch.Generator().manual_seed(int(seed))
    n = sum(p.numel() for p in like)
    theta, _, res = lanczos(hvp, hessian.draw(like, gen, rademacher=False), min(steps, n))
    order = np.argsort(theta)[::-1][:k]
    return theta[order], res[order]


def density(hvp: HVP, like: Sequence[torch.Tensor], runs: int, steps: int, seed: int
            ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Stochastic Lanczos quadrature: per run, nodes, weights and residual bounds."""
    gen = torch.Generator().manual_seed(int(seed))
    n = sum(p.numel() for p in like)
    return [lanczos(hvp, hessian.draw(like, gen, rademacher=True), min(steps, n))
            for _ in range(runs)]


def smoothed(nodes: np.ndarray, weights: np.ndarray, grid: np.ndarray, sigma: float
             ) -> np.ndarray:
    """``sum_i w_i N(t; theta_i, sigma^2)`` on ``grid``: the density the figure draws."""
    z = (np.asarray(grid)[:, None] - np.asarray(nodes)[None, :]) / sigma
    return (np.exp(-0.5 * z ** 2) / (sigma * np.sqrt(2 * np.pi))) @ np.asarray(weights)
