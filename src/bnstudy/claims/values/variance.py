"""Where a per-run statistic's noise comes from: seeds, or the within-run sample.

A ledger row's per-run value is a mean over the rows a run contributes (checkpoints, layers,
probe points). Its variance over seeds, in a one-way random-effects model ``y_ij = mu + b_i +
e_ij`` (run ``i``, row ``j``; ``b_i`` with variance ``between_var``, ``e_ij`` with variance
``within_var``), is ``between_var + within_var / m`` for ``m`` rows per run. The first part
shrinks only with more seeds; the second also with a larger within-run sample (more probe points,
more checkpoints). :func:`anova_split` estimates both by the ANOVA (method of moments) estimators
from the rows, per cell (experiment, dataset, model, normalizer): ``within_var = MSW``,
``between_var = max(0, (MSB - MSW) / n0)`` with ``n0`` the usual unbalanced-group size.

Rows that differ systematically within every run (checkpoints at the same steps, layers) are a
fixed factor, not noise: name it in ``within`` and its main effect is removed first (the
two-way mixed model without replication, runs random and that factor fixed; the residual is the
run-by-factor interaction and its degrees of freedom are reduced by the factor's levels). Such
rows are not replicates: more checkpoints or layers would change the quantity averaged, not its
precision. What can lower that part is a less noisy value at each row (more probes per
checkpoint, a larger probe batch), which reduces the probe noise inside the interaction, or more
seeds; the advice says so (``more probes per <factor>``) instead of "more within-run samples".

:func:`summary_split` does the same from per-row summaries (a mean, its within-row standard
deviation and sample count, as the partition-density table gives per point set: ``boundaries``,
``boundaries_std``, ``n_points``): the within part of a run's value is ``sd^2 / n`` and the
between part is what the spread of the values over seeds leaves above it.

Both return one row per cell with ``n_runs``, ``m`` (within-run samples per run), ``between_var``,
``within_var``, ``within_var_of_mean`` (``within_var / m``), ``within_share`` (its fraction of
the per-run variance) and ``advice`` (``more seeds`` when the between part dominates, ``more
within-run samples`` otherwise, or ``more probes per <factor>`` where the rows are levels of a
fixed factor). :func:`split_measure` applies them to a measure's table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["experiment", "dataset", "model", "norm", "seed"]
CELL = KEYS[:-1]
COLUMNS = ["quantity", *CELL, "n_runs", "m", "between_var", "within_var", "within_var_of_mean",
           "within_share", "advice"]


WITHIN_SAMPLES = "more within-run samples"


def within_advice(within: list[str]) -> str:
    """The advice where the within-run part dominates: more within-run samples when the rows are
    replicates, more probes per level when they are a fixed factor's levels (checkpoints)."""
    return f"more probes per {' x '.join(within)}" if within else WITHIN_SAMPLES


def _finish(rows: list[dict], within: list[str] | None = None) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "quantity"])
    total = out["between_var"] + out["within_var_of_mean"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["within_share"] = np.where(total > 0, out["within_var_of_mean"] / total, np.nan)
    out["advice"] = np.where(out["within_share"] > 0.5, within_advice(list(within or [])),
                             "more seeds")
    out.loc[out["within_share"].isna(), "advice"] = "no spread"
    return out


def _need(df: pd.DataFrame, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df]
    if missing:
        raise ValueError(f"the table has no column {', '.join(missing)}; "
                         f"its columns: {', '.join(map(str, df))}")


def anova_split(df: pd.DataFrame, value: str, within: list[str] | None = None,
                keys: list[str] = KEYS) -> pd.DataFrame:
    """The seeds / within-run variance split of ``value`` per cell (``keys`` minus the last,
    the run's seed), from the rows (see the module docstring); non-finite values are left out."""
    within = list(within or [])
    _need(df, [*keys, value, *within])
    d = df[np.isfinite(df[value].astype(float))]
    cell_keys, run_key = keys[:-1], keys[-1]
    rows = []
    for cell, g in d.groupby(cell_keys, observed=True, sort=True):
        y = g[value].astype(float)
        levels = 1
        if within:
            y = y - g.groupby(within, observed=True)[value].transform("mean") + y.mean()
            levels = g.groupby(within, observed=True).ngroups
        sizes = y.groupby(g[run_key], observed=True).size()
        a, n = len(sizes), int(sizes.sum())
        df_w = n - a - (levels - 1)
        if a < 2 or df_w < 1:
            continue
        means = y.groupby(g[run_key], observed=True).transform("mean")
        msw = float(((y - means) ** 2).sum()) / df_w
        run_means = y.groupby(g[run_key], observed=True).mean()
        msb = float((sizes * (run_means - y.mean()) ** 2).sum()) / (a - 1)
        n0 = (n - float((sizes ** 2).sum()) / n) / (a - 1)
        m = n / a
        rows.append({**dict(zip(cell_keys, cell, strict=True)), "n_runs": a, "m": m,
                     "between_var": max(0.0, (msb - msw) / n0), "within_var": msw,
                     "within_var_of_mean": msw / m})
    return _finish(rows, within)


def summary_split(df: pd.DataFrame, mean: str, sd: str, count: str,
                  keys: list[str] = KEYS) -> pd.DataFrame:
    """The split from one summary row per run and cell: ``mean`` over ``count`` within-run
    samples with standard deviation ``sd`` (ddof=1). ``within_var`` is the pooled ``sd^2``;
    ``between_var = max(0, var over runs of mean - mean of sd^2 / count)``."""
    _need(df, [*keys, mean, sd, count])
    d = df[np.isfinite(df[mean].astype(float)) & np.isfinite(df[sd].astype(float))
           & (df[count] > 1)]
    rows = []
    for cell, g in d.groupby(keys[:-1], observed=True, sort=True):
        if g[keys[-1]].duplicated().any():
            raise ValueError(f"summary_split needs one row per run of cell {cell}; group the "
                             f"table to one row per {', '.join(keys)} first")
        if len(g) < 2:
            continue
        k = g[count].astype(float)
        wvm = float((g[sd].astype(float) ** 2 / k).mean())
        within = float(((k - 1) * g[sd].astype(float) ** 2).sum() / (k - 1).sum())
        between = max(0.0, float(g[mean].astype(float).var(ddof=1)) - wvm)
        rows.append({**dict(zip(keys[:-1], cell, strict=True)), "n_runs": len(g),
                     "m": float(k.mean()), "between_var": between, "within_var": within,
                     "within_var_of_mean": wvm})
    return _finish(rows)


def _log_ratio(df: pd.DataFrame, col: str, per: str | None) -> pd.Series:
    v = (df["loss_max"] - df["loss_min"]) if col == "loss_variation" else df[col].astype(float)
    if per is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = v / df[per].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(v.where(np.isfinite(v) & (v > 0)))


# per measure: (quantity, how to get a row-level value, the systematic within-run factor)
SMOOTHNESS = (("log(loss_variation / loss)", "loss_variation", "loss"),
              ("log(grad_pred_max / grad_norm)", "grad_pred_max", "grad_norm"),
              ("log(beta_eff)", "beta_eff", None))


def split_measure(measure: str, df: pd.DataFrame) -> pd.DataFrame:
    """The split for the per-run quantities the ledger reads from ``measure``'s table:
    ``smoothness`` (the three smoothness quantities, rows = checkpoints, the step a fixed
    factor; blow-ups left out), ``ics`` (``1 - cos``, rows = layers 2.. by checkpoint, both
    fixed factors) and ``partition_density`` (``boundaries`` per point set, radius, layer and
    step, from its per-point mean, standard deviation and ``n_points``)."""
    parts = []
    if measure == "smoothness":
        for name, col, per in SMOOTHNESS:
            if col in df or col == "loss_variation" and "loss_max" in df:
                d = df.assign(_v=_log_ratio(df, col, per))
                parts.append(anova_split(d, "_v", within=["step"]).assign(quantity=name))
    elif measure == "ics":
        d = df[df["layer_index"] != 1] if "layer_index" in df else df
        d = d.assign(_v=1.0 - d["grad_cosine"].astype(float))
        within = [c for c in ("layer_index", "step") if c in d]
        parts.append(anova_split(d, "_v", within=within).assign(quantity="1 - cos(G, G')"))
    elif measure == "partition_density":
        _need(df, ["point_set", "radius", "layer", "step"])
        for (ps, r, layer, step), g in df.groupby(["point_set", "radius", "layer", "step"],
                                                  observed=True, sort=True):
            split = summary_split(g, "boundaries", "boundaries_std", "n_points")
            parts.append(split.assign(quantity=f"boundaries ({ps} points, radius {r:g}, "
                                               f"layer {layer}, step {step})"))
    else:
        raise ValueError(f"no variance split for measure {measure!r}; valid: smoothness, ics, "
                         f"partition_density")
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(parts, ignore_index=True)[COLUMNS]
