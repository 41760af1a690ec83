"""Which closed form of :mod:`bnstudy.theory.luo` each arm of the teacher-student measure is
compared with, and why (the ``zeta``, ``curve``, ``convention``, ``theory*`` columns).

- Vanilla arms (``none``, ``zero_bias``, ``random_bias``, ``weightnorm`` with no decay,
  ``bn_init``): the minimum-norm least-squares error (``curve = sgd``, zeta 0).
- WN + gamma decay (``weightnorm_gamma_decay``): the objective it trains, ``(1/P) sum_j (.)^2 +
  zeta gamma^2`` with ``gamma^2 = ||w~||^2 / N``, is ridge with ``lam = alpha zeta``
  (Krogh & Hertz; ``curve = ridge``, ``convention = loss`` whatever the option says).
  ``population_norm`` (PN + gamma decay at its own zeta buffer): ridge with the option's
  ``convention``.
- The BN family (``batchnorm``, ``batchnorm_fixed_affine``, ``ghost_batchnorm``: ``mu_B`` and
  ``sigma_B``, App. C.3's ``3/(2M)``; ``weightnorm_varonly_bn``: ``sigma_B`` only, ``1/(2M)``,
  Luo §4's BN student; ``weightnorm_meanonly_bn``: ``mu_B`` only, ``1/M``; ``M`` the training
  batch, the virtual batch for ghost BN). Eq. 3 makes BN's expected loss the PN loss plus
  ``zeta gamma^2``, and BN's ``gamma^2`` is the variance of the student's output over the batches,
  i.e. over the *training set*: ``gamma^2 = w~^T (X^T X / P) w~``, not ``||w~||^2 / N`` (the two
  agree only for ``alpha -> inf``). So the objective BN is equivalent to is ``||y - X w~||^2 / P
  + zeta w~^T (X^T X / P) w~``, whose minimizer is least squares shrunk by ``1 / (1 + zeta)``:
  the primary curve (``curve = shrinkage``, option ``bn_curve: shrinkage``, the default) is
  :func:`~bnstudy.theory.luo.eps_shrinkage_linear` at App. C.3's zeta. ``bn_curve: ridge``
  compares with the ridge of the option's ``convention`` instead (the earlier reading, kept for
  comparison). Beside it, for the arms that divide by ``sigma_B``: ``zeta_main`` /
  ``theory_main``, the curve Luo's Fig. 1a prints for its BN student, WN + gamma decay at
  ``1/(2M)`` with ``lam = zeta``, which is Luo's own claim (§4: "BN is equivalent to 'WN+gamma
  decay' when zeta = 1/2M") and which the ledger tests on the variance-only arm.
- ``theory_shrinkage``: the shrinkage curve at the arm's zeta for every normalizer whose
  statistics come from the training set (BN family, ``population_norm``).
"""

from __future__ import annotations

import numpy as np

from bnstudy.theory import luo as luo_theory

VANILLA = ("none", "zero_bias", "random_bias", "weightnorm", "bn_init")
# BN family: (subtract_mean, divide_std) of the normalized pre-activation.
BN_FAMILY = {"batchnorm": (True, True), "batchnorm_fixed_affine": (True, True),
             "ghost_batchnorm": (True, True), "weightnorm_varonly_bn": (False, True),
             "weightnorm_meanonly_bn": (True, False)}
DECAY = ("weightnorm_gamma_decay", "population_norm")
BN_CURVES = ("shrinkage", "ridge")


def zeta_of(run_spec, block, act: str | None, exact: bool, p: int, main_text: bool = False):
    """(kind, zeta): kind 'sgd' | 'bn' | 'decay' | None; zeta NaN where the paper has none.
    ``exact``: the exact finite-batch zeta; ``main_text``: a BN arm's zeta without ``mu_B``'s share
    (Luo §4's ``1/(2M)``)."""
    norm = run_spec.norm
    if norm in VANILLA:
        return "sgd", 0.0
    if norm in DECAY:
        return "decay", float(block.norm.zeta.reshape(-1)[0])
    if norm not in BN_FAMILY or act is None:
        return None, float("nan")
    m = run_spec.training.batch_for(p)
    if norm == "ghost_batchnorm":
        m = min(m, int(run_spec.model_config.normalizer(norm).options["ghost_batch_size"]))
    sub, div = BN_FAMILY[norm]
    if main_text:  # Luo §4's BN student: sigma_B only, zeta = 1/(2M)
        sub = False
    try:
        return "bn", luo_theory.zeta_bn(m, act, subtract_mean=sub, divide_std=div,
                                        exact=exact)
    except ValueError:
        return "bn", float("nan")


def columns(spec, block, act: str | None, o, alpha: float, noise: float, p: int) -> dict:
    """The curve columns of one row (``_lam``: the ridge of ``theory``, 0 for vanilla SGD, NaN
    when ``theory`` is no ridge); ``act`` None: no closed form."""
    nan = float("nan")
    out = {"zeta": nan, "curve": None, "convention": None, "theory": nan, "theory_sgd": nan,
           "theory_shrinkage": nan, "zeta_main": nan, "theory_main": nan, "_lam": nan}
    if act is None:
        return out
    out["theory_sgd"] = float(luo_theory.eps_sgd(alpha, noise, act))
    kind, zeta = zeta_of(spec, block, act, o.zeta_exact, p)
    out["zeta"] = zeta
    if kind == "sgd":
        out.update(theory=out["theory_sgd"], _lam=0.0, curve="sgd")
        return out
    if kind not in ("bn", "decay") or act != "linear" or not np.isfinite(zeta):
        return out
    if kind == "bn" or spec.norm == "population_norm":
        out["theory_shrinkage"] = float(luo_theory.eps_shrinkage_linear(alpha, noise, zeta))
    if kind == "bn" and o.bn_curve == "shrinkage":
        out.update(theory=out["theory_shrinkage"], curve="shrinkage")
    else:
        conv = "loss" if spec.norm == "weightnorm_gamma_decay" else o.convention
        out.update(theory=float(luo_theory.eps_wn_linear(alpha, noise, zeta, conv)),
                   _lam=float(luo_theory.ridge_lambda(alpha, zeta, conv)), curve="ridge",
                   convention=conv)
    if kind == "bn" and BN_FAMILY[spec.norm][1]:
        zm = zeta_of(spec, block, act, o.zeta_exact, p, main_text=True)[1]
        out["zeta_main"] = zm
        # Luo's own claim: the curve Fig. 1a prints (1/(2M), lam = zeta)
        out["theory_main"] = float(luo_theory.eps_wn_linear(alpha, noise, zm, "paper"))
    return out
