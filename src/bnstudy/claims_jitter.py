"""Per-run metrics of BN-Explained §5's jitter claims, from the ``bn_jitter`` table.

Each function maps the table to one value per (experiment, dataset, model, norm, seed), as the
ledger's other metrics do (:mod:`bnstudy.claims` states the verdict rules):

- :func:`jitter_batch_ratio`: ``log(band_fraction at the smallest batch size / at the largest)``,
  mean over checkpoints. ``band_fraction`` is the fraction of the decision boundary's
  neighbourhood that the mini-batch realizations disagree on (:mod:`bnstudy.bn_jitter_maps`);
  Fig. 6: smaller batches jitter more, so the claim expects a positive value.
- :func:`jitter_band`: ``log(band_fraction)`` at the largest batch size, mean over checkpoints:
  compared between noise-controlled (ghost) BN and BN at the same real batch size.
- :func:`prop2_ratio`: the log of ``empirical / predicted variance`` of ``mu_B`` or
  ``sigma_B^2`` at the first BN layer of fully connected nets, its mean taken over checkpoints
  and batch sizes. Only there
  is the batch an exact sample of the population the prediction uses (deeper layers see inputs
  normalized by the same batch; conv layers count correlated positions of one image as samples),
  so only there is Proposition 2 a prediction rather than an approximation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["experiment", "dataset", "model", "norm", "seed"]


def _applicable(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["applicable"].astype(bool)] if "applicable" in df else df


def _boundary(df: pd.DataFrame) -> pd.DataFrame:
    d = _applicable(df)
    d = d[(d["layer"].astype(str) == "boundary") & np.isfinite(d["band_fraction"])]
    return d[d["band_fraction"] > 0]


def jitter_batch_ratio(df: pd.DataFrame) -> pd.Series:
    d = _boundary(df)
    if d.empty or d["batch_size"].nunique() < 2:
        return pd.Series(dtype=float)
    small, large = d["batch_size"].min(), d["batch_size"].max()
    wide = d.pivot_table(index=[*KEYS, "step"], columns="batch_size", values="band_fraction")
    ratio = np.log(wide[small] / wide[large]).dropna()
    return ratio.groupby(level=KEYS).mean()


def jitter_band(df: pd.DataFrame) -> pd.Series:
    d = _boundary(df)
    if d.empty:
        return pd.Series(dtype=float)
    d = d[d["batch_size"] == d["batch_size"].max()]
    return np.log(d.groupby(KEYS)["band_fraction"].mean())


def prop2_ratio(stat: str):
    """The metric for ``stat`` = ``"mu"`` or ``"sigma2"``."""

    def metric(df: pd.DataFrame) -> pd.Series:
        d = _applicable(df)
        d = d[d["layer"].astype(str) != "boundary"]
        if d.empty:
            return pd.Series(dtype=float)
        d = d[d["layer_index"] == d.groupby(KEYS)["layer_index"].transform("min")]
        d = d[d["samples_per_stat"] == d["batch_size_effective"]]  # fully connected layers
        r = d[f"ratio_{stat}"]
        d = d[np.isfinite(r) & (r > 0)]
        return np.log(d.groupby(KEYS)[f"ratio_{stat}"].mean())

    return metric
