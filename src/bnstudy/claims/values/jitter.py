"""Per-run metrics of BN-Explained §5's jitter claims, from the ``bn_jitter`` table.

Each function maps the table to one value per (experiment, dataset, model, norm, seed), as the
ledger's other metrics do (:mod:`bnstudy.claims.ledger` states the verdict rules):

- :func:`jitter_batch_ratio`: ``log(band_fraction at the smallest batch size / at the largest)``,
  mean over checkpoints. ``band_fraction`` is the fraction of the decision boundary's
  neighbourhood that the mini-batch realizations disagree on (:mod:`bnstudy.measures.jitter.maps`);
  Fig. 6: smaller batches jitter more, so the claim expects a positive value.
- :func:`jitter_band`: ``log(band_fraction)`` at the largest batch size, mean over checkpoints
  (of the logs, as for every metric here):
  compared between noise-controlled (ghost) BN and BN at the same real batch size.
- :func:`prop2_ratio`: the log of ``empirical / predicted variance`` of ``mu_B`` or
  ``sigma_B^2`` in fully connected nets, its mean taken over checkpoints and batch sizes, at the
  first BN layer or (``deeper=True``) over the BN layers after it. At the first layer the batch
  is an exact sample of the population the prediction uses, so the prediction is exact and the
  ratio only checks the measurement (the ledger's implementation check). At deeper layers the
  layer's inputs are normalized by the same batch's statistics of earlier layers, so the
  batch is not an iid sample of the layer's input population (the population pass normalizes
  with whole-set statistics): Proposition 2's i.i.d. assumption does not hold there, so the
  ledger's deeper-layer rows go beyond the paper. A run whose deeper layers' empirical
  variance of ``mu_B`` is below ``FIXED_MEAN_RATIO`` times the prediction (median over its
  deeper rows) is left out of them: with no nonlinearity between BN layers (a deep linear net)
  the next layer's batch mean is fixed by beta, and the ratio is a rounding error.
  Conv layers count correlated positions of one image as samples and are left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["experiment", "dataset", "model", "norm", "seed"]
# below this, a deeper layer's empirical variance of mu_B is rounding error: no nonlinearity
# between BN layers, so the layer after BN sees a batch mean fixed by beta (a linear net)
FIXED_MEAN_RATIO = 1e-6


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
    return np.log(d["band_fraction"]).groupby([d[k] for k in KEYS]).mean()


def prop2_ratio(stat: str, deeper: bool = False):
    """The metric for ``stat`` = ``"mu"`` or ``"sigma2"``: at the first BN layer, or at the
    later ones (``deeper``; a net with one BN layer then gives no value)."""
    if stat not in ("mu", "sigma2"):
        raise ValueError(f"unknown statistic {stat!r}; valid choices: mu, sigma2")

    def metric(df: pd.DataFrame) -> pd.Series:
        d = _applicable(df)
        d = d[d["layer"].astype(str) != "boundary"]
        if d.empty:
            return pd.Series(dtype=float)
        first = d["layer_index"] == d.groupby(KEYS)["layer_index"].transform("min")
        d = d[~first if deeper else first]
        d = d[d["samples_per_stat"] == d["batch_size_effective"]]  # fully connected layers
        if deeper:  # a layer whose batch mean is fixed by the BN before it (a linear net)
            fixed = d.groupby(KEYS)["ratio_mu"].transform("median") < FIXED_MEAN_RATIO
            d = d[~fixed]
        r = d[f"ratio_{stat}"]
        d = d[np.isfinite(r) & (r > 0)]
        return np.log(d[f"ratio_{stat}"]).groupby([d[k] for k in KEYS]).mean()

    return metric
