"""Closed forms of Luo et al. (2019) §4 / App. C.3, D: generalization error of a teacher-student
regression as a function of the load ``alpha = P / N``.

Setting (the ``teacher_student`` dataset): inputs ``x ~ N(0, I/N)``, a linear teacher ``w*`` with
``||w*||^2 / N = 1``, training targets ``w*^T x + s`` with ``s ~ N(0, S)`` fixed per example,
``P = alpha N`` examples, thermodynamic limit ``N -> inf``. The generalization error is Luo's
Eq. 16-17, the squared error against the *noise-free* teacher averaged over ``x``; in order
parameters ``gamma^2 = ||w~||^2 / N`` and ``gamma R = w~^T w* / N`` it is
``1 + gamma^2 - 2 gamma R`` for a linear student (Eq. 18) and ``1 + gamma^2 / 2 - gamma R`` for a
ReLU student (App. D.1).

Curves, as printed in the paper:

- vanilla SGD, linear student (§4.1, after Advani & Saxe): ``1 - alpha + alpha S / (1 - alpha)``
  for ``alpha < 1``, ``S / (alpha - 1)`` for ``alpha > 1``; it diverges at ``alpha = 1``. It is
  the error of the minimum-norm least-squares solution (the limit of gradient descent from a
  zero initialization: infinitely long training, vanishing learning rate).
- vanilla SGD, ReLU student (§4.1, App. D.2 Eq. 22-24 with ``a = 1``):
  ``1 - alpha / 4 + alpha S / (2 (2 - alpha))`` for ``alpha < 2``. The paper gives nothing for
  ``alpha >= 2`` (NaN here). Its replica derivation is heuristic: the stationarity conditions
  of its Eq. 21 do not by themselves give ``a = 1``, which the paper asserts for ``alpha < 2``;
  we implement the printed result and test its internal consistency, not a saddle point.
- WN + gamma decay, linear student (§4.1, after Krogh & Hertz 1992):
  ``eps = S d(lam G)/d lam - lam^2 dG/d lam`` with
  ``G = [1 - alpha - lam + sqrt((lam + (1 + sqrt alpha)^2)(lam + (1 - sqrt alpha)^2))] / (2 lam)``
  the normalized trace of the resolvent ``(A + lam)^-1`` of ``A = X^T X`` (Marchenko-Pastur).
  This is the error of ridge regression ``min sum_j (y_j - w~^T x_j)^2 + lam ||w~||^2``. The
  paper prints the fraction bar of ``G`` misplaced (only the square root over ``2 zeta``); the
  form above is the resolvent, which the tests check against random matrices. Which ``lam``
  belongs to a gamma-decay factor ``zeta`` is a convention the paper leaves inconsistent:
  §4.1 says "the gamma decay term turns the correlation matrix to ``x^T x + zeta I``", i.e.
  ``lam = zeta`` (``convention="paper"``, the curves of its Fig. 1a); the loss it defines,
  ``(1/P) sum_j (.)^2 + zeta gamma^2`` with ``gamma^2 = ||w~||^2 / N``, is ridge with
  ``lam = alpha zeta`` (``convention="loss"``). Both agree at ``alpha = 1``. The WN arm trains
  that loss, so the teacher-student measure compares it with ``lam = alpha zeta``; BN is *not*
  that objective (below), and the printed curve (``1/(2M)``, ``lam = zeta``) is kept as Luo's
  own claim about its BN student.
- BN's equivalent gamma decay (App. C.3): for a linear student and plain (not halved) mean
  squared error, ``zeta = 1 / (2M)`` from ``sigma_B`` alone (the paper's BN student drops
  ``mu_B``) and ``3 / (2M)`` when BN also centers with ``mu_B``; the paper uses
  ``zeta = 1 / (4M)`` for the ReLU student (Fig. 1b). :func:`zeta_bn` also gives the exact
  mean-field value from the chi distribution of ``sigma_B`` (Gaussian pre-activations,
  statistics independent of the sample, as in the paper's priors): with ``c = sigma / sigma_B``,
  ``zeta = E[c^2] / E[c]^2 - 1 (+ E[c^2] / (E[c]^2 M)`` with centering).
- :func:`zeta_eq3` is Luo's Eq. 3, ``(rho + 2) / (8M) I(gamma) + 1 / (2M) mean_j A''(hbar_j)``,
  with ``I(gamma)`` in the curvature form App. C.1 derives, ``mean_j A''(hbar_j) n_j^2``: the
  empirical Fisher (mean squared gradient) equals it only in expectation over the labels (for
  regression: only at unit residual variance). Deep networks:
  :mod:`bnstudy.networks.norms.population_decay`.

BN's curve, the closed form consistent with Eq. 3 and App. C.3 (the paper does not write it):
BN's batch statistics are statistics of the *training* set, so the ``gamma^2`` of its gamma decay
is the variance of its output over that set, ``gamma^2 = w~^T (A / P) w~`` with ``A = X^T X``
(not ``||w~||^2 / N``, which it is only when the training covariance is the population's,
``alpha -> inf``), and the objective ``||y - X w~||^2 / P + zeta w~^T (A / P) w~`` is minimized
by the least-squares solution shrunk by ``kappa = 1 / (1 + zeta)`` (:func:`eps_shrinkage_linear`),
which, unlike ridge, still diverges at ``alpha = 1``. This is the teacher-student measure's
primary curve for the BN family (:mod:`bnstudy.measures.teacher_student.curves`), and what "PN +
gamma decay" gives when the population is the training set. At ``alpha = 2``, ``S = 0.25``,
``zeta = 3/64`` it is 18% above the ridge with ``lam = alpha zeta``.
"""

from __future__ import annotations

import math

import numpy as np

ACTIVATIONS = ("linear", "relu")
CONVENTIONS = ("paper", "loss")


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown student activation {activation!r}; valid choices: "
                         f"{', '.join(ACTIVATIONS)}")


def _arr(alpha):
    a = np.asarray(alpha, dtype=float)
    if np.any(a <= 0):
        raise ValueError(f"the load alpha must be > 0, got {alpha!r}")
    return a


def _out(x, like):
    return float(x) if np.ndim(like) == 0 else x


def noise_term_linear(alpha, S):
    """Noise part of the min-norm error: ``alpha S / (1 - alpha)`` or ``S / (alpha - 1)``."""
    a = _arr(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a < 1, a * S / (1 - a), S / (a - 1))
    out = np.where(a == 1, np.inf, out)
    return _out(out, alpha)


def eps_sgd_linear(alpha, S):
    """Vanilla SGD, linear student (the minimum-norm least-squares error); ``inf`` at 1."""
    a = _arr(alpha)
    return _out(1 - np.minimum(a, 1) + np.asarray(noise_term_linear(a, S)), alpha)


def eps_sgd_relu(alpha, S):
    """Vanilla SGD, ReLU student (Eq. 24 with ``a = 1``); NaN for ``alpha >= 2``."""
    a = _arr(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a < 2, 1 - a / 4 + a * S / (2 * (2 - a)), np.nan)
    return _out(out, alpha)


def eps_sgd(alpha, S, activation: str = "linear"):
    _check_activation(activation)
    return eps_sgd_linear(alpha, S) if activation == "linear" else eps_sgd_relu(alpha, S)


def order_parameters_sgd_relu(alpha, S):
    """Eq. 22-23 with ``a = 1``: ``(gamma^2, gamma R)`` of the ReLU student (``alpha < 2``)."""
    a = _arr(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        g2 = np.where(a < 2, a / 2 + a * S / (2 - a), np.nan)
        gr = np.where(a < 2, a / 2, np.nan)
    return _out(g2, alpha), _out(gr, alpha)


def eps_from_order_parameters(gamma2, gamma_r, activation: str = "linear"):
    """Eq. 18 (linear) or App. D.1 (ReLU student, linear teacher)."""
    _check_activation(activation)
    if activation == "linear":
        return 1 + np.asarray(gamma2) - 2 * np.asarray(gamma_r)
    return 1 + np.asarray(gamma2) / 2 - np.asarray(gamma_r)


def resolvent(alpha, lam):
    """``G = lim (1/N) tr (A + lam)^-1`` and ``dG/dlam`` for ``A = X^T X``, rows ``N(0, I/N)``."""
    a, lam = _arr(alpha), np.asarray(lam, dtype=float)
    if np.any(lam <= 0):
        raise ValueError(f"the ridge lam must be > 0, got {lam!r}")
    r = np.sqrt((lam + (1 + np.sqrt(a)) ** 2) * (lam + (1 - np.sqrt(a)) ** 2))
    g = (1 - a - lam + r) / (2 * lam)
    # G solves lam G^2 + (lam + alpha - 1) G - 1 = 0; differentiate implicitly.
    dg = -(g * g + g) / (2 * lam * g + lam + a - 1)
    return g, dg


def ridge_lambda(alpha, zeta, convention: str = "paper"):
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown gamma-decay convention {convention!r}; valid choices: "
                         f"{', '.join(CONVENTIONS)}")
    if np.any(np.asarray(zeta) < 0):
        raise ValueError(f"the gamma-decay factor zeta must be >= 0, got {zeta!r}")
    return np.asarray(zeta, dtype=float) * (1.0 if convention == "paper" else _arr(alpha))


def eps_wn_linear(alpha, S, zeta, convention: str = "paper"):
    """WN + gamma decay, linear student (Krogh & Hertz); ``zeta = 0`` is vanilla SGD."""
    a = _arr(alpha)
    lam = ridge_lambda(a, zeta, convention)
    if np.all(lam == 0):
        return eps_sgd_linear(alpha, S)
    g, dg = resolvent(a, np.maximum(lam, 1e-300))
    out = S * (g + lam * dg) - lam * lam * dg
    out = np.where(lam == 0, eps_sgd_linear(a, S), out)
    return _out(out, alpha if np.ndim(zeta) == 0 else zeta)


def order_parameters_wn_linear(alpha, S, zeta, convention: str = "paper"):
    """``(gamma^2, gamma R)`` of the ridge solution: ``1 - 2 lam G - lam^2 G' + S (G + lam G')``
    and ``1 - lam G``."""
    a = _arr(alpha)
    lam = ridge_lambda(a, zeta, convention)
    g, dg = resolvent(a, lam)
    return (_out(1 - 2 * lam * g - lam * lam * dg + S * (g + lam * dg), alpha),
            _out(1 - lam * g, alpha))


def eps_shrinkage_linear(alpha, S, zeta):
    """Least squares shrunk by ``kappa = 1/(1 + zeta)`` (BN / PN on the training set, mean field):
    ``1 - (1 - (1 - kappa)^2) min(alpha, 1) + kappa^2 noise(alpha)``."""
    a = _arr(alpha)
    if np.any(np.asarray(zeta) < 0):
        raise ValueError(f"the gamma-decay factor zeta must be >= 0, got {zeta!r}")
    k = 1.0 / (1.0 + np.asarray(zeta, dtype=float))
    out = 1 - (1 - (1 - k) ** 2) * np.minimum(a, 1) + k * k * np.asarray(noise_term_linear(a, S))
    return _out(out, alpha)


def order_parameters_shrinkage_linear(alpha, S, zeta):
    """``(gamma^2, gamma R)`` of the shrunk least-squares solution:
    ``kappa^2 (min(alpha, 1) + noise(alpha))`` and ``kappa min(alpha, 1)``."""
    a = _arr(alpha)
    k = 1.0 / (1.0 + np.asarray(zeta, dtype=float))
    m = np.minimum(a, 1)
    return (_out(k * k * (m + np.asarray(noise_term_linear(a, S))), alpha), _out(k * m, alpha))


def chi_moments(dof: int, M: int) -> tuple[float, float]:
    """``E[c], E[c^2]`` for ``c = sqrt(M / chi2_dof)`` (``sigma / sigma_B`` of a Gaussian batch)."""
    if dof <= 2:
        raise ValueError(f"E[sigma_B^-2] is finite only for more than 2 degrees of freedom; "
                         f"got {dof} (batch size M = {M})")
    # scipy.special imported here only: a third of a second at the start of every process that
    # lists the measures (each Snakemake start among them)
    from scipy.special import gammaln

    m1 = math.sqrt(M / 2) * math.exp(gammaln((dof - 1) / 2) - gammaln(dof / 2))
    return m1, M / (dof - 2)


def zeta_bn(M: int, activation: str = "linear", subtract_mean: bool = False,
            divide_std: bool = True, exact: bool = False, centered_variance: bool = True):
    """BN's equivalent gamma-decay factor for batch size ``M`` (plain mean squared error).

    ``exact=False``: the paper's constants (App. C.3 doubled for the plain MSE): ``1/(2M)`` from
    ``sigma_B``, ``1/M`` from ``mu_B`` (so ``3/(2M)`` for BN with both); Fig. 1b's ``1/(4M)`` for
    the ReLU student (``sigma_B`` only; the paper gives no ReLU constant with ``mu_B``).
    ``exact=True`` (linear only): the chi-distribution mean field, ``sigma_B^2`` with ``M - 1``
    (centered variance) or ``M`` degrees of freedom, plus ``E[c^2] / (E[c]^2 M)`` from ``mu_B``.
    """
    _check_activation(activation)
    if not (isinstance(M, (int, np.integer)) and M >= 2):
        raise ValueError(f"batch size M must be an int >= 2, got {M!r}")
    if activation == "relu":
        if exact or subtract_mean or not divide_std:
            raise ValueError("for the ReLU student the paper gives only zeta = 1/(4M) (BN "
                             "without mu_B, paper constants)")
        return 1 / (4 * M)
    if not exact:
        return (1 / (2 * M) if divide_std else 0.0) + (1 / M if subtract_mean else 0.0)
    r = 1.0
    if divide_std:
        m1, m2 = chi_moments(M - 1 if centered_variance else M, M)
        r = m2 / (m1 * m1)
    return (r - 1) + (r / M if subtract_mean else 0.0)


def zeta_eq3(M: int, rho, i_gamma, mean_a2):
    """Luo's Eq. 3: ``(rho + 2) / (8M) I(gamma) + mean_j A''(hbar_j) / (2M)``, ``i_gamma`` the
    curvature ``mean_j A''(hbar_j) n_j^2`` (App. C.1), not the mean squared gradient."""
    if M < 1:
        raise ValueError(f"batch size M must be >= 1, got {M!r}")
    return (np.asarray(rho) + 2) / (8 * M) * np.asarray(i_gamma) + np.asarray(mean_a2) / (2 * M)
