"""Luo et al. (2019) §4 teacher-student measure: generalization error against the closed forms.

For a run on a ``teacher_student`` dataset (runs on other datasets give no rows), one row per
checkpoint (or only the last, ``checkpoints: last``; :func:`measure` is one checkpoint's model,
:func:`run` the loop over a run file's checkpoints) with:

- ``gen_error``: Luo's generalization error (Eq. 16-17), ``E_x[(w*^T x - y(x))^2]`` over
  ``x ~ N(0, I/N)`` against the *noise-free* teacher, computed exactly from the student's function:
  in eval mode a single-unit student ``y = a g(u^T x + b) + c`` (Luo's ``unit`` model, where
  ``a = 1, c = 0``, or an ``mlp`` of depth 1 and width 1 with its 1x1 head ``a, c``; the block's
  map and normalizer fold into the affine ``u^T x + b``, extracted by autograd and verified on
  test points) has ``||a u - w*||^2 / N + (a b + c)^2`` for
  ``g`` the identity and a Gaussian closed form for ReLU. NaN for any other student.
  ``test_mse`` is the same quantity estimated on the noise-free test set (any model);
  ``train_mse`` is the loss on the noisy training targets. Identifying columns: ``alpha``
  (``P / N``), ``N``, ``P``, ``S``, ``data_seed`` (the dataset's draw: runs at one load pool
  over draws), ``batch_size`` (``P`` for full batch), ``lr``, ``epochs``.
- order parameters of the effective weight ``w~ = a u``: ``gamma2 = ||w~||^2 / N`` and the
  overlap ``R = cos(w~, w*)``; ``norm_gamma2``: the normalizer's own ``gamma^2`` (Luo Fig. 2e's
  quantity; in an ``mlp`` it trades off against the head weight ``head_weight``).
- the closed forms of :mod:`bnstudy.theory.luo` at the same ``alpha = P/N`` and ``S``:
  ``theory_sgd`` (vanilla SGD, for the student's activation) and ``theory``, the curve Luo
  assigns to the run's normalizer: vanilla SGD for ``none``, ``zero_bias``, ``random_bias``,
  ``weightnorm`` (zeta = 0) and ``bn_init``; WN + gamma decay at BN's equivalent ``zeta`` for the
  BN family (``batchnorm``, ``batchnorm_fixed_affine``, ``ghost_batchnorm``: ``mu_B`` and
  ``sigma_B``, ``1/M + 1/(2M)``; ``weightnorm_varonly_bn``: ``sigma_B`` only, ``1/(2M)``, the
  paper's BN student; ``weightnorm_meanonly_bn``: ``mu_B`` only, ``1/M``; ``M`` the training
  batch size, the virtual batch size for ghost BN) and at the layer's own ``zeta`` buffer for
  explicit gamma decay (``weightnorm_gamma_decay``, ``population_norm``); NaN for other
  normalizers and where the paper has no closed form (WN + gamma decay with ReLU units).
  Each arm is compared with the curve of the objective it trains or is claimed equivalent to:
  WN + gamma decay minimizes ``(1/P) sum_j (.)^2 + zeta gamma^2`` with ``gamma^2 = ||w~||^2 /
  N``, ridge ``lam = alpha zeta``, and under Eq. 3 BN's expected loss is that same objective at
  its equivalent ``zeta``, so the primary curve (``theory``, ``rel_error``) of every arm has
  ``lam = alpha zeta`` (``convention = "loss"``, the default of the ``convention`` option, which
  sets the BN arms' ridge; ``paper``: ``lam = zeta``). ``convention`` and ``zeta`` (columns) name
  the curve of ``theory``. ``zeta_main``, ``theory_main``, ``rel_error_main`` (BN arms that
  divide by ``sigma_B``): *secondary*, the curve printed in Luo's Fig. 1a, ``zeta = 1/(2M)`` (Luo
  §4's BN student, ``sigma_B`` only) with ``lam = zeta`` (``convention = "paper"``) whatever the
  option says: for BN with ``mu_B`` it differs from the primary curve in both the constant and the
  ridge.
  ``theory_shrinkage``: our mean-field curve for normalizers whose statistics come from the
  training set (BN family, ``population_norm``): least squares shrunk by ``1/(1 + zeta)``.
  ``rel_error = gen_error / theory - 1``.
- ``erm_*`` (linear student, ``erm: true``): the error of the exact minimizer of each curve's
  objective on *this* training set (minimum-norm least squares, ridge, shrunk least squares), so
  that a gap to ``theory`` splits into finite-N / data-draw scatter (``erm - theory``) and
  optimization (``gen_error - erm``).

Options: ``bn_statistics`` (``running`` | ``recomputed``: BN statistics of the whole training
set at the checkpoint's weights, as in :mod:`bnstudy.measures.generalization.compute`),
``convention``
(``loss``, default | ``paper``: how a BN arm's zeta maps to the primary curve's ridge, see
:mod:`bnstudy.theory.luo`; the explicit gamma-decay arm always uses its objective's ``loss``),
``zeta_exact`` (false: the paper's constants; true: the chi-distribution mean field),
``checkpoints`` (``all`` | ``last``), ``erm`` (true | false).
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import torch
from scipy.stats import norm as gauss
from torch import nn

from bnstudy import data
from bnstudy.measures.generalization.compute import recompute_bn_statistics
from bnstudy.measures.teacher_student.options import Options
from bnstudy.networks import models
from bnstudy.theory import luo as luo_theory
from bnstudy.theory import luo_erm
from bnstudy.train import checkpoints
from bnstudy.train.loop import evaluate
from bnstudy.train.spec import RunSpec

log = logging.getLogger(__name__)

VANILLA = ("none", "zero_bias", "random_bias", "weightnorm", "bn_init")
# BN family: (subtract_mean, divide_std) of the normalized pre-activation.
BN_FAMILY = {"batchnorm": (True, True), "batchnorm_fixed_affine": (True, True),
             "ghost_batchnorm": (True, True), "weightnorm_varonly_bn": (False, True),
             "weightnorm_meanonly_bn": (True, False)}
DECAY = ("weightnorm_gamma_decay", "population_norm")


def teacher(ds) -> np.ndarray | None:
    """The teacher ``w*`` of a ``teacher_student`` dataset (checked against its test targets)."""
    if ds.meta.get("kind") != "teacher_student":
        return None
    opts = ds.meta.get("options", {})
    n = int(ds.input_shape[0])
    w = data.teacher_weights(n, int(opts.get("seed", 0)))
    err = np.max(np.abs(ds.x_test.astype(np.float64) @ w - ds.y_test[:, 0]))
    if err > 1e-3 * (1 + np.max(np.abs(ds.y_test))):
        raise ValueError(f"the test targets are not the teacher's (max deviation {err:.3g}): "
                         "the dataset was not made by data.make('teacher_student', ...)")
    return w


def activation(act: nn.Module) -> str | None:
    """'linear' (identity, leaky ReLU of slope 1), 'relu', or None (no closed form)."""
    if isinstance(act, nn.Identity) or (isinstance(act, nn.LeakyReLU)
                                        and act.negative_slope == 1.0):
        return "linear"
    if isinstance(act, nn.ReLU) or (isinstance(act, nn.LeakyReLU) and act.negative_slope == 0):
        return "relu"
    return None


def single_unit(model: nn.Module) -> models.Block | None:
    """The model's only block when it is Luo's single-unit student (one block of width 1)."""
    bl = models.blocks(model)
    if len(bl) != 1 or getattr(bl[0].linear, "out_features", None) != 1:
        return None
    head = getattr(model, "head", None)
    if not (isinstance(head, nn.Identity) or (isinstance(head, nn.Linear)
                                               and head.weight.shape == (1, 1))):
        return None
    return bl[0]


def _head(model: nn.Module) -> tuple[float, float]:
    head = model.head
    if isinstance(head, nn.Identity):
        return 1.0, 0.0
    bias = float(head.bias.detach()) if head.bias is not None else 0.0
    return float(head.weight.detach().reshape(())), bias


def affine_preactivation(model: nn.Module, block: models.Block, x_check: torch.Tensor):
    """``(u, b)``: ``block.norm``'s output is ``u^T x + b`` (eval mode); None if not affine."""
    got = {}
    handle = block.norm.register_forward_hook(lambda m, i, o: got.__setitem__("h", o))
    try:
        x0 = torch.zeros(1, x_check.shape[1], device=x_check.device, requires_grad=True)
        with torch.enable_grad():
            model(x0)
            (u,) = torch.autograd.grad(got["h"].reshape(()), x0)
        b = float(got["h"].detach().reshape(()))
        with torch.no_grad():
            model(x_check)
            h = got["h"].reshape(-1).double()
    finally:
        handle.remove()
    u = u.reshape(-1).double()
    pred = x_check.double() @ u + b
    if float((pred - h).abs().max()) > 1e-4 * (1 + float(h.abs().max())):
        return None
    return u.cpu().numpy(), b


def exact_error(w: np.ndarray, u: np.ndarray, b: float, a: float, c: float, act: str) -> float:
    """``E_x[(w^T x - a g(u^T x + b) - c)^2]``, ``x ~ N(0, I/N)``, ``||w||^2 / N = 1``."""
    n = len(w)
    if act == "linear":
        return float(np.sum((a * u - w) ** 2) / n + (a * b + c) ** 2)
    s = np.sqrt(u @ u / n)  # z = u^T x + b ~ N(b, s^2), cov(w^T x, z) = u^T w / N
    cov = u @ w / n
    if s == 0:
        r1, r2, p = max(b, 0.0), max(b, 0.0) ** 2, float(b > 0)
    else:
        t = b / s
        p = gauss.cdf(t)
        r1 = s * gauss.pdf(t) + b * p
        r2 = (b * b + s * s) * p + b * s * gauss.pdf(t)
    # E[w^T x relu(z)] = cov P(z > 0) (Stein's lemma); E[(w^T x)^2] = 1
    return float(1 + a * a * r2 + c * c - 2 * a * cov * p + 2 * a * c * r1)


def zeta_of(run_spec: RunSpec, block, act: str | None, exact: bool, p: int,
            main_text: bool = False):
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


def run(run: dict, ds, options: Options, device: torch.device) -> list[dict]:
    """The ``teacher_student`` table's rows for one run (none off teacher-student data):
    :func:`measure` on each selected checkpoint's restored model, sharing one ERM basis."""
    o = Options.parse(options)
    if teacher(ds) is None:
        log.info("teacher_student: dataset kind %r is not teacher_student; no rows",
                 ds.meta.get("kind"))
        return []
    idx = range(len(run["checkpoints"]))
    rows, cache = [], {}
    for i in (idx if o.checkpoints == "all" else [idx[-1]]):
        restored = checkpoints.restore(run, i, ds, device)
        rows += measure(restored.model, ds, o, run["spec"], step=restored.step,
                        diverged=bool(run["diverged"]), cache=cache)
    return rows


def measure(model: nn.Module, ds, options: Options | dict | None, spec: RunSpec, *,
            step: int = 0, diverged: bool = False, cache: dict | None = None) -> list[dict]:
    """One checkpoint's row: ``model`` (trained as ``spec`` says, ``step`` steps; ``diverged``:
    its run's flag) on the teacher-student dataset ``ds``; no rows on other data. ``model`` is
    left as it is: the measure evaluates an eval-mode copy (``checkpoints`` is :func:`run`'s
    choice and ignored here). ``cache``: a memo of the data-only ERM basis that :func:`run`
    shares between one run's checkpoints (the same numbers without it)."""
    o = Options.parse(options)
    w = teacher(ds)
    if w is None:
        return []
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    n, p = int(ds.input_shape[0]), len(ds.x_train)
    alpha, noise = p / n, float(ds.meta["noise_variance"])
    batch_size = spec.training.batch_for(p)
    xtr, ytr, xte, yte = (torch.as_tensor(a, device=device)
                          for a in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
    net = (recompute_bn_statistics(model, xtr)
           if o.bn_statistics == "recomputed" else copy.deepcopy(model))
    net.eval()
    row = {"step": step, "alpha": alpha, "N": n, "P": p, "S": noise,
           "data_seed": int(ds.meta["options"].get("seed", 0)), "batch_size": batch_size,
           "lr": float(spec.training.lr), "diverged": bool(diverged),
           "bn_statistics": o.bn_statistics, "epochs": step * batch_size / p,
           "train_mse": evaluate(net, xtr, ytr, ds.task)[0],
           "test_mse": evaluate(net, xte, yte, ds.task)[0]}
    row.update(_student_columns(spec, net, w, xte, o, alpha, noise, p))
    lam = row.pop("_lam")
    erm = {"erm_sgd": np.nan, "erm_theory": np.nan, "erm_shrinkage": np.nan}
    if o.erm and row["activation"] == "linear":
        cache = {} if cache is None else cache
        if "basis" not in cache:
            cache["basis"] = luo_erm.basis(ds, w, device)
        erm = luo_erm.errors(cache["basis"], lam, row["zeta"])
    return [{**row, **erm}]


def _student_columns(spec, net, w, xte, o, alpha, noise, p) -> dict:
    nan = float("nan")
    out = {"activation": None, "gen_error": nan, "gamma2": nan, "R": nan, "norm_gamma2": nan,
           "head_weight": nan, "zeta": nan, "theory": nan, "theory_sgd": nan,
           "theory_shrinkage": nan, "rel_error": nan, "convention": o.convention,
           "zeta_main": nan, "theory_main": nan, "rel_error_main": nan, "_lam": nan}
    block = single_unit(net)
    if block is None:
        return out
    act = activation(block.act)
    out["activation"] = act
    gamma = getattr(block.norm, "weight", None)
    if isinstance(gamma, torch.Tensor) and gamma.numel() == 1:
        out["norm_gamma2"] = float(gamma.detach().reshape(())) ** 2
    ub = affine_preactivation(net, block, xte[:256])
    a, c = _head(net)
    out["head_weight"] = a
    if ub is not None and act is not None:
        u, b = ub
        out["gen_error"] = exact_error(w, u, b, a, c, act)
        wt = a * u
        out["gamma2"] = float(wt @ wt / len(w))
        nrm = float(np.linalg.norm(wt) * np.linalg.norm(w))
        out["R"] = float(wt @ w) / nrm if nrm > 0 else nan
    if act is None:
        return out
    out["theory_sgd"] = float(luo_theory.eps_sgd(alpha, noise, act))
    kind, zeta = zeta_of(spec, block, act, o.zeta_exact, p)
    out["zeta"] = zeta
    conv = "loss" if spec.norm == "weightnorm_gamma_decay" else o.convention
    out["convention"] = conv
    if kind == "sgd":
        out["theory"], out["_lam"] = out["theory_sgd"], 0.0
    elif kind in ("bn", "decay") and act == "linear" and np.isfinite(zeta):
        out["theory"] = float(luo_theory.eps_wn_linear(alpha, noise, zeta, conv))
        out["_lam"] = float(luo_theory.ridge_lambda(alpha, zeta, conv))
        if kind == "bn" or spec.norm == "population_norm":
            out["theory_shrinkage"] = float(luo_theory.eps_shrinkage_linear(alpha, noise, zeta))
        if kind == "bn" and BN_FAMILY[spec.norm][1]:
            zm = zeta_of(spec, block, act, o.zeta_exact, p, main_text=True)[1]
            out["zeta_main"] = zm
            # secondary: the curve Luo's Fig. 1a prints (1/(2M), lam = zeta)
            out["theory_main"] = float(luo_theory.eps_wn_linear(alpha, noise, zm, "paper"))
    for suffix in ("", "_main"):
        th = out["theory" + suffix]
        if np.isfinite(th) and th > 0:
            out["rel_error" + suffix] = out["gen_error"] / th - 1
    return out
