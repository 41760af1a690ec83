"""Exact minimizers of Luo §4's objectives on one training set (the ``erm_*`` columns of
:mod:`bnstudy.measures.teacher_student.compute`): what the closed forms of
:mod:`bnstudy.theory.luo` average
over data draws, so that a gap to them splits into draw scatter and optimization; and the part of a
student's error that lies outside the span of the training inputs (:func:`null_error`), which none
of those minimizers has and which gradient training never changes."""

from __future__ import annotations

import numpy as np
import torch


def basis(ds, w: np.ndarray, device) -> dict:
    """The training inputs' SVD ``X = U diag(s) V^T`` (float64, on ``device``) as the exact
    minimizers need it: ``s``, ``U^T y``, the teacher in the V basis and ``||w*||^2``."""
    x = torch.as_tensor(ds.x_train, device=device, dtype=torch.float64)
    y = torch.as_tensor(ds.y_train[:, 0], device=device, dtype=torch.float64)
    uu, s, vt = torch.linalg.svd(x, full_matrices=False)
    keep = s > s.max() * max(x.shape) * torch.finfo(torch.float64).eps
    wt = torch.as_tensor(w, device=device, dtype=torch.float64)
    out = {"s": s, "proj": uu.T @ y, "wv": vt @ wt, "keep": keep, "v": vt[keep].T}
    out = {k: v.cpu().numpy() for k, v in out.items()}
    out["w2"], out["n"] = float(w @ w), len(w)
    return out


def errors(b: dict, lam: float, zeta: float) -> dict:
    """Errors of the exact minimizers on the training set: min-norm least squares
    (``erm_sgd``), ridge with ``lam`` (``erm_theory``), least squares shrunk by ``1/(1+zeta)``.
    A student ``V c`` has error ``(||c - V^T w*||^2 + ||w*||^2 - ||V^T w*||^2) / N``."""
    s, wv = b["s"], b["wv"]
    rest = b["w2"] - wv @ wv  # the teacher outside the span of the training inputs

    def err(c):
        return float((np.sum((c - wv) ** 2) + rest) / b["n"])

    mn = np.where(b["keep"], b["proj"] / np.where(b["keep"], s, 1.0), 0.0)
    out = {"erm_sgd": err(mn)}
    if np.isfinite(lam) and lam > 0:
        out["erm_theory"] = err(b["proj"] * s / (s * s + lam))
    else:
        out["erm_theory"] = out["erm_sgd"] if lam == 0 else float("nan")
    out["erm_shrinkage"] = err(mn / (1 + zeta)) if np.isfinite(zeta) else float("nan")
    return out


def in_span(b: dict, u: np.ndarray) -> np.ndarray:
    """``u`` projected onto the span of the training inputs (basis ``b['v']``)."""
    return b["v"] @ (b["v"].T @ u)


def null_error(b: dict, error, u: np.ndarray) -> float:
    """How much of a student's error comes from its pre-activation weight ``u``'s part outside
    the span of the training inputs: ``error(u) - error(u projected onto the span)`` (``error``:
    the student's generalization error as a function of ``u``). Gradient training from ``u_0``
    never moves that part, and batch statistics of the training set never see it, so for such a
    student this is exactly what an initialization in the span would have spared."""
    return float(error(u) - error(in_span(b, u)))
