"""Luo §4 closed forms against independent references: random matrices, Monte Carlo of the same
statistical model (min-norm least squares, ridge, shrinkage), Gaussian integrals, limits."""

import contextlib
import math

import numpy as np
import pytest

from bnstudy.theory import luo as lt


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """numpy's BLAS single-threaded, as conftest makes torch: the 2 cores are shared."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn's dependency; without it the tests only run slower
        threadpool_limits = None
    with threadpool_limits(1) if threadpool_limits else contextlib.nullcontext():
        yield


def _draws(n, alpha, S, k, seed=0):
    """k draws of Luo's setting: X (P x N) with rows N(0, I/N), w* (||w*||^2 = N), y."""
    rng = np.random.default_rng(seed)
    p = int(round(alpha * n))
    for _ in range(k):
        w = rng.standard_normal(n)
        w *= math.sqrt(n) / np.linalg.norm(w)
        x = rng.standard_normal((p, n)) / math.sqrt(n)
        yield x, w, x @ w + math.sqrt(S) * rng.standard_normal(p)


def _mc(n, alpha, S, solve, k=16):
    """Mean over draws of ``||v - w*||^2 / N`` for the student ``v = solve(x, y)``."""
    return float(np.mean([np.sum((solve(x, y) - w) ** 2) / n
                          for x, w, y in _draws(n, alpha, S, k)]))


def _min_norm(x, y):
    """The minimum-norm least-squares solution, by normal equations (cheap, well-posed here)."""
    p, n = x.shape
    if p > n:
        return np.linalg.solve(x.T @ x, x.T @ y)
    return x.T @ np.linalg.solve(x @ x.T, y)


def _ridge(lam):
    return lambda x, y: np.linalg.solve(x.T @ x + lam * np.eye(x.shape[1]), x.T @ y)


@pytest.mark.parametrize("alpha", [0.4, 2.0, 3.0])
def test_vanilla_linear_is_min_norm_least_squares(alpha):
    mc = _mc(200, alpha, 0.25, _min_norm)
    assert mc == pytest.approx(lt.eps_sgd_linear(alpha, 0.25), rel=0.06)


def test_vanilla_linear_values_and_divergence():
    a = np.array([0.5, 1.0, 2.0])
    got = lt.eps_sgd_linear(a, 0.25)
    assert got[0] == pytest.approx(1 - 0.5 + 0.5 * 0.25 / 0.5)
    assert got[1] == math.inf
    assert got[2] == pytest.approx(0.25)
    assert lt.eps_sgd_linear(5.0, 0.0) == 0.0  # noise-free, overdetermined: exact recovery


@pytest.mark.parametrize("alpha,lam", [(0.5, 0.05), (1.0, 0.25), (1.0, 0.02), (2.0, 0.25)])
def test_wn_gamma_decay_is_ridge_monte_carlo(alpha, lam):
    mc = _mc(200, alpha, 0.25, _ridge(lam))
    assert mc == pytest.approx(lt.eps_wn_linear(alpha, 0.25, lam, "paper"), rel=0.06)


def test_loss_convention_is_the_papers_loss_minimizer():
    """(1/P) sum (y - v^T x)^2 + zeta ||v||^2 / N (= zeta gamma^2): ridge, lam = alpha zeta."""
    alpha, zeta, n = 3.0, 0.5, 100

    def solve(x, y):
        p = len(x)
        return np.linalg.solve(x.T @ x / p + zeta / n * np.eye(n), x.T @ y / p)

    mc = _mc(n, alpha, 0.25, solve)
    assert mc == pytest.approx(lt.eps_wn_linear(alpha, 0.25, zeta, "loss"), rel=0.06)
    assert mc != pytest.approx(lt.eps_wn_linear(alpha, 0.25, zeta, "paper"), rel=0.06)
    assert lt.eps_wn_linear(1.0, 0.25, zeta, "loss") == lt.eps_wn_linear(1.0, 0.25, zeta)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.5])
def test_resolvent_against_random_matrices_and_finite_differences(alpha):
    n, lam = 400, 0.3
    x = np.random.default_rng(1).standard_normal((int(alpha * n), n)) / math.sqrt(n)
    ev = np.linalg.eigvalsh(x.T @ x)
    g, dg = lt.resolvent(alpha, lam)
    assert g == pytest.approx(np.mean(1 / (ev + lam)), rel=0.02)
    assert dg == pytest.approx(-np.mean(1 / (ev + lam) ** 2), rel=0.04)
    h = 1e-6
    fd = (lt.resolvent(alpha, lam + h)[0] - lt.resolvent(alpha, lam - h)[0]) / (2 * h)
    assert dg == pytest.approx(fd, rel=1e-6)


def test_ridge_limits_and_optimum():
    for alpha in (0.5, 2.0, 3.0):  # zeta -> 0: vanilla (min norm); zeta -> inf: student -> 0
        assert lt.eps_wn_linear(alpha, 0.25, 1e-9) == pytest.approx(
            lt.eps_sgd_linear(alpha, 0.25), rel=1e-5)
        assert lt.eps_wn_linear(alpha, 0.25, 1e9) == pytest.approx(1.0, rel=1e-6)
        assert lt.eps_wn_linear(alpha, 0.25, 0.0) == lt.eps_sgd_linear(alpha, 0.25)
    assert np.isfinite(lt.eps_wn_linear(1.0, 0.25, 1 / 64))  # no divergence at alpha = 1
    lams = np.geomspace(0.01, 5, 2001)  # Krogh & Hertz: the optimal weight decay is lam = S
    for alpha in (0.5, 1.0, 2.0):
        best = lams[np.argmin([lt.eps_wn_linear(alpha, 0.25, v) for v in lams])]
        assert best == pytest.approx(0.25, rel=0.01)


def test_order_parameters_reproduce_the_errors():
    for alpha in (0.5, 1.0, 2.0):
        g2, gr = lt.order_parameters_wn_linear(alpha, 0.25, 0.1)
        assert lt.eps_from_order_parameters(g2, gr) == pytest.approx(
            lt.eps_wn_linear(alpha, 0.25, 0.1), rel=1e-10)
        g2, gr = lt.order_parameters_shrinkage_linear(alpha, 0.25, 0.1)
        assert lt.eps_from_order_parameters(g2, gr) == pytest.approx(
            lt.eps_shrinkage_linear(alpha, 0.25, 0.1), rel=1e-10)
    for alpha in (0.3, 1.0, 1.7):  # the ReLU student: Eq. 22-23 in App. D.1 give Eq. 24
        g2, gr = lt.order_parameters_sgd_relu(alpha, 0.25)
        assert lt.eps_from_order_parameters(g2, gr, "relu") == pytest.approx(
            lt.eps_sgd_relu(alpha, 0.25), rel=1e-12)


def test_ridge_order_parameters_monte_carlo():
    n, alpha, lam = 300, 1.5, 0.2
    g2 = np.mean([np.sum(_ridge(lam)(x, y) ** 2) / n for x, w, y in _draws(n, alpha, 0.25, 12)])
    assert g2 == pytest.approx(lt.order_parameters_wn_linear(alpha, 0.25, lam)[0], rel=0.05)


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_shrinkage_monte_carlo(alpha):
    k = 1 / (1 + 0.3)
    mc = _mc(200, alpha, 0.25, lambda x, y: k * _min_norm(x, y))
    assert mc == pytest.approx(lt.eps_shrinkage_linear(alpha, 0.25, 0.3), rel=0.06)
    assert lt.eps_shrinkage_linear(1.0, 0.25, 0.3) == math.inf  # shrinkage does not cure alpha=1


def test_relu_generalization_error_gaussian_integral():
    """App. D.1: E[(h1 - relu(gamma R h1 + gamma sqrt(1-R^2) h2))^2] = 1 + gamma^2/2 - gamma R."""
    rng = np.random.default_rng(0)
    h1, h2 = rng.standard_normal((2, 2_000_000))
    for gamma, r in ((0.7, 0.9), (1.3, 0.2)):
        z = gamma * r * h1 + gamma * math.sqrt(1 - r * r) * h2
        mc = np.mean((h1 - np.maximum(z, 0)) ** 2)
        assert mc == pytest.approx(lt.eps_from_order_parameters(gamma ** 2, gamma * r, "relu"),
                                   abs=4e-3)


def test_relu_vanilla_limits():
    a = np.array([0.0001, 1.0, 1.999, 2.0, 3.0])
    got = lt.eps_sgd_relu(a, 0.25)
    assert got[0] == pytest.approx(1.0, abs=1e-3)
    assert got[1] == pytest.approx(1 - 0.25 + 0.25 / 2)
    assert got[2] > 100  # diverges at alpha = 2
    assert np.isnan(got[3]) and np.isnan(got[4])
    assert lt.eps_sgd_relu(1.5, 0.0) == pytest.approx(1 - 1.5 / 4)  # the noise-free lower bound


def test_chi_moments_monte_carlo():
    rng = np.random.default_rng(0)
    for m, centered in ((8, True), (32, False)):
        h = rng.standard_normal((200_000, m))
        var = h.var(1) if centered else (h * h).mean(1)
        c = 1 / np.sqrt(var)
        m1, m2 = lt.chi_moments(m - 1 if centered else m, m)
        assert m1 == pytest.approx(c.mean(), rel=2e-3)
        assert m2 == pytest.approx((c * c).mean(), rel=5e-3)


def test_zeta_bn_constants_and_mean_field():
    assert lt.zeta_bn(32) == 1 / 64
    assert lt.zeta_bn(32, subtract_mean=True) == 3 / 64
    assert lt.zeta_bn(32, subtract_mean=True, divide_std=False) == 1 / 32
    assert lt.zeta_bn(16, "relu") == 1 / 64
    for sub, const in ((False, 1 / 2), (True, 3 / 2)):  # the exact mean field -> the constants
        assert lt.zeta_bn(512, subtract_mean=sub, exact=True) * 512 == pytest.approx(const,
                                                                                     rel=0.01)
    rng = np.random.default_rng(1)  # exact: E[c^2]/E[c]^2 - 1 of c = sigma / sigma_B
    c = 1 / np.sqrt(rng.standard_normal((400_000, 8)).var(1))
    assert lt.zeta_bn(8, exact=True) == pytest.approx((c * c).mean() / c.mean() ** 2 - 1,
                                                      rel=0.02)


def test_zeta_eq3():
    assert lt.zeta_eq3(32, rho=0.0, i_gamma=2.0, mean_a2=1.0) == pytest.approx(
        2 / (8 * 32) * 2 + 1 / 64)


def test_bad_arguments_name_the_choices():
    with pytest.raises(ValueError, match="'tanh'.*linear, relu"):
        lt.eps_sgd(2.0, 0.25, "tanh")
    with pytest.raises(ValueError, match="'ridge'.*paper, loss"):
        lt.eps_wn_linear(2.0, 0.25, 0.1, "ridge")
    with pytest.raises(ValueError, match="alpha must be > 0"):
        lt.eps_sgd_linear(0.0, 0.25)
    with pytest.raises(ValueError, match="zeta must be >= 0"):
        lt.eps_wn_linear(2.0, 0.25, -1.0)
    with pytest.raises(ValueError, match="M must be an int >= 2"):
        lt.zeta_bn(1)
    with pytest.raises(ValueError, match="ReLU"):
        lt.zeta_bn(32, "relu", subtract_mean=True)
