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
  ``theory_sgd`` (vanilla SGD, for the student's activation) and ``theory``, the curve of the
  objective the run trains or is equivalent to, named by ``curve`` (``sgd``, ``shrinkage``,
  ``ridge``), ``zeta`` and ``convention`` (a ridge's ``lam``): vanilla SGD for the vanilla arms,
  ridge ``lam = alpha zeta`` for WN + gamma decay, and for the BN family least squares shrunk by
  ``1 / (1 + zeta)`` at App. C.3's zeta, since BN's gamma^2 is the output variance over the
  training set; beside it ``zeta_main``, ``theory_main``, ``rel_error_main``: the curve Luo's
  Fig. 1a prints for BN (``1/(2M)``, ``lam = zeta``), Luo's own claim, and ``theory_shrinkage``
  (:mod:`.curves` says which arm gets which curve, and why). ``rel_error = gen_error / theory -
  1``.
- ``null_error``: the part of ``gen_error`` from the student's weight outside the span of the
  training inputs (:func:`bnstudy.theory.luo_erm.null_error`; NaN when the basis is not
  computed: ``erm: false`` and ``P >= N``). Gradient training never moves that part and batch
  statistics never see it, so it is what the initialization left; a ``unit`` student with
  ``init_span: data`` starts without it (:func:`bnstudy.networks.init.init_in_data_span`).
- ``erm_*`` (linear student, ``erm: true``): the error of the exact minimizer of each curve's
  objective on *this* training set (minimum-norm least squares, ridge, shrunk least squares), so
  that a gap to ``theory`` splits into finite-N / data-draw scatter (``erm - theory``) and
  optimization (``gen_error - erm``).

Options: ``bn_statistics`` (``running`` | ``recomputed``: BN statistics of the whole training
set at the checkpoint's weights, :func:`bnstudy.networks.probe.frozen_copy`, as the
``generalization`` measure's ``recomputed``),
``convention``
(``loss``, default | ``paper``: a ridge's ``lam`` for ``population_norm`` and, with ``bn_curve:
ridge``, the BN arms, see :mod:`bnstudy.theory.luo`; the explicit gamma-decay arm always uses its
objective's ``loss``),
``zeta_exact`` (false: the paper's constants; true: the chi-distribution mean field),
``checkpoints`` (``all`` | ``last``), ``erm`` (true | false), ``bn_curve`` (``shrinkage``, default
| ``ridge``: the BN arms' primary curve, :mod:`.curves`).
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import torch
from scipy.stats import norm as gauss
from torch import nn

from bnstudy import data
from bnstudy.measures.teacher_student import curves
from bnstudy.measures.teacher_student.curves import zeta_of  # noqa: F401 (re-exported)
from bnstudy.measures.teacher_student.options import Options
from bnstudy.networks import models
from bnstudy.networks.probe import frozen_copy, preactivations
from bnstudy.theory import luo_erm
from bnstudy.train import checkpoints
from bnstudy.train.loop import evaluate
from bnstudy.train.spec import RunSpec

log = logging.getLogger(__name__)
RECOMPUTE_CHUNK = 4096  # rows per forward of the recomputed statistics (generalization's too)

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
    """``(u, b)``: ``block``'s pre-activation (``block.norm``'s output: the single unit has no
    residual join) is ``u^T x + b`` (eval mode); None if not affine."""
    x0 = torch.zeros(1, x_check.shape[1], device=x_check.device, requires_grad=True)
    with torch.enable_grad():
        (h0,) = preactivations(model, x0, [block])
        (u,) = torch.autograd.grad(h0.reshape(()), x0)
    b = float(h0.detach().reshape(()))
    with torch.no_grad():
        (h,) = preactivations(model, x_check, [block])
        h = h.reshape(-1).double()
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
    net = (frozen_copy(model, "train_set", xtr, chunk_rows=RECOMPUTE_CHUNK)
           if o.bn_statistics == "recomputed" else copy.deepcopy(model))
    net.eval()
    row = {"step": step, "alpha": alpha, "N": n, "P": p, "S": noise,
           "data_seed": int(ds.meta["options"].get("seed", 0)), "batch_size": batch_size,
           "lr": float(spec.training.lr), "diverged": bool(diverged),
           "bn_statistics": o.bn_statistics, "epochs": step * batch_size / p,
           "train_mse": evaluate(net, xtr, ytr, ds.task)[0],
           "test_mse": evaluate(net, xte, yte, ds.task)[0]}
    cache = {} if cache is None else cache

    def basis():
        if "basis" not in cache:
            cache["basis"] = luo_erm.basis(ds, w, device)
        return cache["basis"]

    row.update(_student_columns(spec, net, w, xte, o, alpha, noise, p,
                                basis if o.erm or p < n else None))
    lam = row.pop("_lam")
    erm = {"erm_sgd": np.nan, "erm_theory": np.nan, "erm_shrinkage": np.nan}
    if o.erm and row["activation"] == "linear":
        erm = luo_erm.errors(basis(), lam, row["zeta"])
        if row["curve"] == "shrinkage":
            erm["erm_theory"] = erm["erm_shrinkage"]
    return [{**row, **erm}]


def _student_columns(spec, net, w, xte, o, alpha, noise, p, basis) -> dict:
    """The single-unit student's columns (NaN for any other model); ``basis``: a getter of the
    training inputs' basis (:func:`bnstudy.theory.luo_erm.basis`) or None."""
    nan = float("nan")
    out = {"activation": None, "gen_error": nan, "null_error": nan, "gamma2": nan, "R": nan,
           "norm_gamma2": nan, "head_weight": nan, "rel_error": nan, "rel_error_main": nan}
    block = single_unit(net)
    if block is None:
        return {**out, **curves.columns(spec, None, None, o, alpha, noise, p)}
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

        def error(v):
            return exact_error(w, v, b, a, c, act)

        out["gen_error"] = error(u)
        if basis is not None:
            out["null_error"] = luo_erm.null_error(basis(), error, u)
        wt = a * u
        out["gamma2"] = float(wt @ wt / len(w))
        nrm = float(np.linalg.norm(wt) * np.linalg.norm(w))
        out["R"] = float(wt @ w) / nrm if nrm > 0 else nan
    out.update(curves.columns(spec, block, act, o, alpha, noise, p))
    for suffix in ("", "_main"):
        th = out["theory" + suffix]
        if np.isfinite(th) and th > 0:
            out["rel_error" + suffix] = out["gen_error"] / th - 1
    return out
