"""Per-run metrics of the ledger's Santurkar and Luo claims (:mod:`bnstudy.claims.ledger` states the
verdict rules). Each maps a table to one value per (experiment, dataset, model, norm, seed):

- :func:`ics`: ``log(ICS + ICS_FLOOR)`` with ICS the mean of ``1 - cos(G, G')`` over layers 2..
  and checkpoints. The paired effect is then ``log((ics_norm + floor) / (ics_base + floor))``, a
  relative comparison that can fail at any baseline level above the floor (an absolute margin
  on ``1 - cos`` cannot once the baseline's ICS is below the margin, the DLN regime). The floor,
  ``1e-4``, is ICS treated as none: three orders of magnitude above float32 rounding of a
  cosine, below any ICS a trained net shows.
- :func:`smooth`: the mean over checkpoints of ``log(value)`` (the stated quantity; not the log
  of the mean), optionally of the value divided by the point's own loss or gradient norm
  (``per``: the loss variation and gradient predictiveness relative to the point, so that an arm
  that interpolates, loss ~1e-6, is compared on its own scale). A blow-up (a probe beyond a
  non-finite loss: ``+inf`` in the maxima, a non-finite ``loss_max``/``loss_min`` for the loss
  variation, or a non-finite point) counts as the worst value: it is replaced by
  ``BLOWUP_FACTOR`` (10) times the largest finite value of that quantity in the table it is
  given, so the paired comparison stays finite and a blow-up weighs against its arm. A value of
  exactly 0 (a flat loss, an unchanged gradient) is replaced by the smallest positive value in
  the table (the best observed; the log of 0 is not finite). The ledger gives the metric the
  compared pair's rows only (both arms of one experiment), so the replacement values come from
  that pair, never from another experiment or normalizer. NaN that is not a blow-up
  (``beta_eff`` at a zero gradient, which is undefined) is left out. Only the checkpoints where
  neither arm of the pair has converged enter (:mod:`bnstudy.claims.values.stage`), as for
  :func:`ics`; with ``early``, only the early-training checkpoints
  (:func:`bnstudy.claims.values.stage.early`: step <= 25% of the run, step 0 always), the stage at
  which Santurkar et al. read the loss range and the gradient change.
- :func:`final_train_loss`: ``log`` of the final training loss.
- :func:`final_log`, :func:`final_percent`: a generalization column at each run's last
  checkpoint, as a log (losses, gamma^2) or a percentage (accuracies).
- :func:`rel_error`: Luo's ``gen_error / curve - 1`` at the final checkpoint, pooled over data
  draws per configuration: the load alpha, the batch size M, the learning rate, N and S (and
  the model), each of them in the pooled row's name, so that a run of another batch size or
  learning rate at the same load has a row of its own and leaves this one as it is;
  :func:`luo_curve` names the curve and constant a row is compared with.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from bnstudy import columns
from bnstudy.claims.values import stage

KEYS = ["experiment", "dataset", "model", "norm", "seed"]
ICS_FLOOR = 1e-4
BLOWUP_FACTOR = 10.0


def per_run(df: pd.DataFrame, col: str, log: bool = False) -> pd.Series:
    v = df.groupby(KEYS)[col].mean()
    return np.log(v) if log else v


def ics(df: pd.DataFrame) -> pd.Series:
    d = columns.normalize("ics", stage.matched(df, stage.LOSS["ics"]))
    # position: layer_index (layer is the label, a string)
    d = d[d["layer_index"] != 1].copy() if "layer_index" in d else d
    d["ics"] = 1.0 - d["grad_cosine"]
    return np.log(per_run(d, "ics").clip(lower=0.0) + ICS_FLOOR)


def last_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Each run's rows at its last step."""
    last = df.groupby(["experiment", "norm", "seed"])["step"].transform("max")
    return df[df["step"] == last]


def final_train_loss(df: pd.DataFrame) -> pd.Series:
    return per_run(last_rows(df[df["split"] == "train"]), "loss", log=True)


def final_log(col: str) -> Callable[[pd.DataFrame], pd.Series]:
    """``log(col)`` at each run's last checkpoint (a table with one row per run and step, such
    as generalization's); values that are not positive (NaN: a diverged run, or a quantity the
    run has none of) are left out."""

    def metric(df: pd.DataFrame) -> pd.Series:
        if col not in df:
            return pd.Series(dtype=float)
        d = last_rows(df)
        return per_run(d[d[col] > 0], col, log=True)

    return metric


def first_log(col: str) -> Callable[[pd.DataFrame], pd.Series]:
    """``log(col)`` at each run's first checkpoint; values that are not positive (a Hessian
    trace estimate below zero, NaN) are left out."""

    def metric(df: pd.DataFrame) -> pd.Series:
        if col not in df:
            return pd.Series(dtype=float)
        first = df.groupby(["experiment", "norm", "seed"])["step"].transform("min")
        d = df[df["step"] == first]
        return per_run(d[d[col] > 0], col, log=True)

    return metric


def final_percent(col: str) -> Callable[[pd.DataFrame], pd.Series]:
    """``100 col`` (a fraction as a percentage) at each run's last checkpoint."""

    def metric(df: pd.DataFrame) -> pd.Series:
        if col not in df:
            return pd.Series(dtype=float)
        d = last_rows(df)
        return 100.0 * per_run(d[d[col].notna()], col)

    return metric


def smooth(col: str, per: str | None = None,
           early: bool = False) -> Callable[[pd.DataFrame], pd.Series]:
    """The metric for ``col`` (``loss_variation`` = ``loss_max - loss_min``, or a column),
    divided at each checkpoint by column ``per`` (the point's own ``loss`` or ``grad_norm``)
    when given; over the early-training checkpoints only (:func:`stage.early`) with ``early``."""

    def metric(df: pd.DataFrame) -> pd.Series:
        d = stage.matched(stage.early(df) if early else df, stage.LOSS["smoothness"]).copy()
        if col == "loss_variation":
            v = d["loss_max"] - d["loss_min"]
            blown = ~(np.isfinite(d["loss_max"]) & np.isfinite(d["loss_min"]))
        else:
            v = d[col].astype(float)
            blown = np.isposinf(v)
        if per is not None:
            if per not in d:
                raise ValueError(f"the smoothness table has no column {per!r}, needed to "
                                 f"normalize {col!r}; its columns: {', '.join(map(str, d))}")
            scale = d[per].astype(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                v = v / scale
            blown = blown | ~np.isfinite(scale) | np.isposinf(v)  # the point itself blew up
        good = v[np.isfinite(v) & ~blown & (v > 0)]
        if good.empty:
            return pd.Series(dtype=float)
        v = v.where(~blown, BLOWUP_FACTOR * good.max()).clip(lower=good.min())
        d["log_value"] = np.log(v)
        return per_run(d[np.isfinite(d["log_value"])], "log_value")

    metric.early = early  # read by the ledger's notes (stage.add_notes)
    return metric


def rel_error(col: str = "rel_error") -> Callable[[pd.DataFrame], pd.Series]:
    """Measured generalization error / closed form - 1 (``col``: ``rel_error`` or
    ``rel_error_main``) at the final checkpoint of each run, pooled per configuration
    (:data:`POOL`, named by :func:`pooled_name`; and model): the replicates are every
    (experiment, seed) pair of that configuration, since Luo's study draws a new data set per
    replicate (separate experiments)."""

    def metric(df: pd.DataFrame) -> pd.Series:
        d = df[np.isfinite(df[col])] if col in df else df.iloc[0:0]
        if d.empty:
            return pd.Series(dtype=float)
        d = last_rows(d).copy()
        d["replicate"] = d["experiment"].astype(str) + "/" + d["seed"].astype(str)
        d["experiment"] = pooled_name(d)
        d["dataset"] = "teacher_student"
        d["seed"] = d.groupby(["experiment", "model", "norm"])["replicate"].rank(method="dense")
        d["seed"] = d["seed"].astype(int)
        return per_run(d, col)

    return metric


# what a pooled Luo row holds fixed: runs that differ in any of these are different rows
POOL = ("alpha", "batch_size", "lr", "N", "S")


def pooled_name(d: pd.DataFrame) -> pd.Series:
    """The pooled row's name: ``alpha=2, M=32, lr=0.1, N=400, S=0.25 (pooled)`` (``M=full``: full
    batch, ``M = P``); a column the table lacks reads ``?``."""

    def col(c: str) -> pd.Series:
        return d[c] if c in d else pd.Series(np.nan, index=d.index)

    def fmt(v) -> str:
        return "?" if pd.isna(v) else f"{float(v):g}"

    full = (col("batch_size") == col("P")) & col("P").notna()
    m = [("full" if f else fmt(b)) for f, b in zip(full, col("batch_size"), strict=True)]
    parts = [col("alpha").map(fmt), pd.Series(m, index=d.index), col("lr").map(fmt),
             col("N").map(fmt), col("S").map(fmt)]
    names = ("alpha", "M", "lr", "N", "S")
    out = pd.Series("", index=d.index, dtype=object)
    for k, (name, part) in enumerate(zip(names, parts, strict=True)):
        out = out + ("" if k == 0 else ", ") + name + "=" + part.astype(str)
    return out + " (pooled)"


CURVES = {"sgd": "vanilla SGD closed form (minimum-norm least squares)",
          "shrinkage": "least squares shrunk by 1/(1 + zeta)",
          "ridge": "WN + gamma decay closed form (ridge)"}


def luo_curve(zeta_col: str = "zeta", convention: str | None = None,
              curve: str | None = None) -> Callable[[pd.DataFrame, str, str], str]:
    """Names the curve a ledger row (pooled configuration ``experiment``, ``norm``) is compared
    with: the kind (the table's ``curve`` column: vanilla SGD, shrunk least squares, ridge), zeta
    (value and multiple of 1/M) and a ridge's convention, from the table's ``zeta_col`` and
    ``convention`` columns. ``curve`` and ``convention`` given: that curve and ridge whatever the
    table's columns say (the secondary curve of ``rel_error_main``, always Luo Fig. 1a's ridge
    with ``lam = zeta``). A table without a ``curve`` column (written before it existed) reads
    as a ridge where zeta > 0."""

    def describe(df: pd.DataFrame, norm: str, experiment: str) -> str:
        d = df[(df["norm"] == norm) & (pooled_name(df) == experiment)]
        if zeta_col not in d or (d[zeta_col].fillna(0) == 0).all():  # no gamma decay
            return CURVES["sgd"]
        d = d[d[zeta_col].notna()]
        d = d.assign(curve=curve or (d["curve"] if "curve" in d else "ridge"))
        if convention is not None:
            d = d.assign(convention=convention)
        parts = []
        for (kind, z, m), g in d.groupby(["curve", zeta_col, "batch_size"], dropna=False):
            frac = (f" = {z * m:g}/M, M = {m:g}" if norm not in ("weightnorm_gamma_decay",
                                                                 "population_norm") else "")
            text = f"{CURVES.get(kind, str(kind))} at zeta = {z:.4g}{frac}"
            conv = g["convention"].dropna().unique() if "convention" in g else []
            if kind == "ridge" and len(conv):
                lam = {"paper": "lam = zeta", "loss": "lam = alpha zeta"}
                text += ", ridge " + "; ".join(lam.get(c, str(c)) for c in conv)
            parts.append(text)
        return "; ".join(parts)

    return describe
