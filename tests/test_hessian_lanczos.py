"""bnstudy.networks.hessian: the one Lanczos iteration behind the smoothness measure's top
eigenvalue and the landscape measure's top-k and density, against exact eigen-decompositions."""

import math

import numpy as np
import pytest
import torch

from bnstudy.measures.landscape import curvature
from bnstudy.measures.smoothness import hessian as smooth_hessian
from bnstudy.networks import hessian


def _sym(eigs, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((len(eigs), len(eigs))))
    return torch.tensor(q @ np.diag(eigs) @ q.T)


def _start(n, seed=0):
    return hessian.draw([torch.zeros(n, dtype=torch.float64)],
                        torch.Generator().manual_seed(seed))


def test_full_lanczos_recovers_the_spectrum_and_quadrature_weights_sum_to_one():
    eigs = [-3.0, -0.5, 0.2, 1.0, 4.0, 9.0]
    h = _sym(eigs)
    r = hessian.lanczos(lambda v: [h @ v[0]], _start(6), 6)
    assert r.products == 6 and not r.stopped
    assert r.theta == pytest.approx(eigs, rel=1e-10, abs=1e-10)
    assert r.weights.sum() == pytest.approx(1.0, rel=1e-12)
    assert np.all(r.residuals < 1e-8)


def test_stop_ends_the_iteration_after_the_step_it_approves():
    h = _sym(np.linspace(-1.0, 5.0, 40))
    seen = []

    def stop(theta, res):
        seen.append(len(theta))
        return len(theta) == 4

    r = hessian.lanczos(lambda v: [h @ v[0]], _start(40), 30, stop=stop)
    assert r.products == 4 and r.stopped and not r.exact and len(r.theta) == 4
    assert seen == [1, 2, 3, 4]  # asked after every step, with that step's Ritz values


def test_a_breakdown_ends_with_exact_ritz_values():
    """A rank-two operator: the Krylov space is exhausted after at most three products."""
    u = torch.tensor(np.linalg.qr(np.random.default_rng(1).standard_normal((8, 2)))[0])
    h = u @ torch.diag(torch.tensor([7.0, -2.0], dtype=torch.float64)) @ u.T
    r = hessian.lanczos(lambda v: [h @ v[0]], _start(8), 8)
    assert r.exact and r.products <= 3
    assert r.theta[[0, -1]] == pytest.approx([-2.0, 7.0], rel=1e-9)


def test_a_non_finite_product_gives_nan_ritz_values_not_an_error():
    r = hessian.lanczos(lambda v: [torch.full_like(v[0], math.nan)], _start(5), 5)
    assert r.products == 1 and np.isnan(r.theta).all() and not (r.exact or r.stopped)
    with pytest.raises(ValueError, match="steps >= 1, got 0"):
        hessian.lanczos(lambda v: v, _start(3), 0)


def test_smoothness_and_landscape_run_the_same_lanczos(monkeypatch):
    """One implementation (it was two until 2026-12-06): the smoothness measure's top
    eigenvalue and the landscape measure's top-k and density all call
    bnstudy.networks.hessian.lanczos,
    and agree with each other and with the exact spectrum."""
    eigs = [-6.0, -1.0, 0.5, 2.0, 3.0, 8.0]
    h = _sym(eigs, seed=3)
    like = [torch.zeros(6, dtype=torch.float64)]
    calls = []
    real = hessian.lanczos

    def counted(*a, **k):
        calls.append(k.get("stop") is not None)
        return real(*a, **k)

    monkeypatch.setattr(hessian, "lanczos", counted)
    top = smooth_hessian.top_eigenvalue(lambda v: [h @ v[0]], like, iters=6, tol=1e-10)
    k_top, _ = curvature.top_k(lambda v: [h @ v[0]], like, 2, steps=6, seed=0)
    (nodes, weights, _), = curvature.density(lambda v: [h @ v[0]], like, 1, 6, seed=0)
    assert calls == [True, False, False]  # smoothness stops on its tolerance; landscape does not
    assert top.converged and top.top == pytest.approx(8.0, rel=1e-9)
    assert top.dominant == pytest.approx(8.0, rel=1e-9)
    assert k_top == pytest.approx([8.0, 3.0], rel=1e-9)
    assert nodes == pytest.approx(eigs, rel=1e-9, abs=1e-9)
    assert weights.sum() == pytest.approx(1.0)
