"""Internal covariate shift figures (Santurkar Figs. 3 and 8) and the report section.

- ``ics_gradient``: gradient ICS over training (||G - G'||, relative difference, cosine) for
  representative layers (the first layer with preceding layers, the middle one, the head);
- ``ics_depth``: the same quantities against depth, one panel per checkpoint step;
- ``ics_distribution``: distributional ICS, the change of the per-unit mean and variance of the
  layers' inputs on the fixed probe batch, over one update and since the previous checkpoint.

Hue = normalizer, bands = 95% Student-t CI over seeds in each quantity's geometry
(:mod:`bnstudy.plots.bands`), one figure per experiment.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import columns, lazy
from bnstudy.plots import (
    Family,
    Section,
    figure,
    finish,
    label,
    norm_order,
    norm_palette,
    register,
    register_section,
    step_axis,
    title,
)
from bnstudy.plots.bands import GEOMETRY, band
from bnstudy.tables import intervals

# imported on first use (bnstudy.lazy): importing this module stays cheap
sns = lazy.module("seaborn")
mticker = lazy.module("matplotlib.ticker")

GRAD = tuple((c, label(c)) for c in ("grad_l2_diff", "grad_rel_diff", "grad_cosine"))


def _steps(df: pd.DataFrame) -> list[int]:
    return sorted(int(s) for s in df["step"].unique())


def representative_layers(df: pd.DataFrame) -> list[int]:
    """Up to three layers: the first with preceding layers, the middle one and the last."""
    layers = sorted(int(v) for v in df["layer_index"].unique())
    inner = [v for v in layers if v > 1] or layers
    picks = [inner[0], inner[len(inner) // 2], inner[-1]]
    return sorted(set(picks))


def _layer_label(df: pd.DataFrame, layer: int) -> str:
    name = df.loc[df["layer_index"] == layer, "layer_name"].iloc[0]
    return f"layer {layer} ({name})"


def _band(col: str, values) -> tuple[dict, bool]:
    """The seed band of ``col`` in its geometry (cos(G, G') lives in [-1, 1])."""
    return band(values, bounds=(-1.0, 1.0) if col == "grad_cosine" else None)


def _scale(ax, log: bool, steps=None) -> None:
    """Symlog step axis ticked at 0, 1, 10, ...; log y where the band is drawn on one."""
    if steps is not None:
        step_axis(ax, steps)
    if log:
        ax.set_yscale("log")
    else:
        ax.ticklabel_format(axis="y", useOffset=False)  # cosines near 1 stay readable


def _ics(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``layer_index`` the layer's position (tables written before bnstudy.columns
    held it in ``layer``)."""
    return columns.normalize("ics", df)


def draw_gradient(frames, options):
    df = _ics(frames[0])
    layers, order = representative_layers(df), norm_order(df)
    fig, axes = figure(len(GRAD), len(layers), height=3.0, sharex=True)
    for c, layer in enumerate(layers):
        d = df[df["layer_index"] == layer]
        for r, (col, ylab) in enumerate(GRAD):
            ax = axes[r, c]
            kw, log = _band(col, d[col])
            sns.lineplot(d, x="step", y=col, hue="norm", hue_order=order,
                         palette=norm_palette(order), marker="o", **kw, ax=ax,
                         legend=(r == 0 and c == len(layers) - 1))
            _scale(ax, log, _steps(df))
            ax.set_ylabel(ylab if c == 0 else "")
            if r == 0:
                ax.set_title(_layer_label(df, layer))
    fig.suptitle(title(df, "gradient ICS (Santurkar Def. 2.1) over training"))
    return finish(fig)


def draw_depth(frames, options):
    df = _ics(frames[0])
    steps, order = _steps(df), norm_order(df)
    if (df["layer_index"] > 1).any():
        df = df[df["layer_index"] > 1]  # layer 1 has no preceding layers: G' = G by definition
    rows = GRAD[1:]
    bands = [_band(col, df[col]) for col, _ in rows]  # one geometry per row (shared y)
    fig, axes = figure(len(rows), len(steps), height=3.0, sharex=True, sharey="row")
    for c, step in enumerate(steps):
        d = df[df["step"] == step]
        for r, (col, ylab) in enumerate(rows):
            ax = axes[r, c]
            sns.lineplot(d, x="layer_index", y=col, hue="norm", hue_order=order,
                         palette=norm_palette(order), marker=".", **bands[r][0], ax=ax,
                         legend=(r == 0 and c == len(steps) - 1))
            ax.set_ylabel(ylab if c == 0 else "")
            ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
            if r == 0:
                ax.set_title(f"step {step}")
    for r, (_, log) in enumerate(bands):
        _scale(axes[r, 0], log)
    for ax in axes[-1]:
        ax.set_xlabel(label("layer"))
    fig.suptitle(title(df, "gradient ICS by layer"))
    return finish(fig)


def _shift_long(d: pd.DataFrame, stat: str) -> pd.DataFrame:
    parts = []
    for col, interval in ((f"step_{stat}_shift", "one update t -> t+1"),
                          (f"{stat}_shift", "since previous checkpoint")):
        part = d[["step", "norm", "seed", col]].rename(columns={col: "shift"})
        parts.append(part.assign(interval=interval))
    return pd.concat(parts, ignore_index=True).dropna(subset=["shift"])


def draw_distribution(frames, options):
    df = _ics(frames[0])
    layers, order = representative_layers(df), norm_order(df)
    stats = (("mean", "mean |Δμ| of layer input"), ("var", "mean |Δσ²| of layer input"))
    fig, axes = figure(2, len(layers), height=3.0, sharex=True)
    for c, layer in enumerate(layers):
        d = df[df["layer_index"] == layer]
        for r, (stat, ylab) in enumerate(stats):
            ax, long = axes[r, c], _shift_long(d, stat)
            kw, log = band(long["shift"])
            sns.lineplot(long, x="step", y="shift", hue="norm", hue_order=order,
                         palette=norm_palette(order), style="interval",
                         style_order=["one update t -> t+1", "since previous checkpoint"],
                         marker="o", **kw, ax=ax, legend=(r == 0 and c == len(layers) - 1))
            _scale(ax, log, _steps(df))
            ax.set_ylabel(ylab if c == 0 else "")
            if r == 0:
                ax.set_title(_layer_label(df, layer))
    fig.suptitle(title(df, "distributional ICS of layer inputs (probe batch, cf. Fig. 8)"))
    return finish(fig)


def _run_means(df: pd.DataFrame, col: str) -> pd.Series:
    """Per run (experiment, norm, seed): the mean of ``col`` over layers >= 2 and checkpoints."""
    d = df[df["layer_index"] > 1] if (df["layer_index"] > 1).any() else df
    return d.groupby(["experiment", "norm", "seed"])[col].mean()


def _fmt(values) -> str:
    m, lo, hi, n = intervals.mean_ci(values)
    if not np.isfinite(m):
        return "n/a"
    return f"{m:.3g}" if not np.isfinite(lo) else f"{m:.3g} ± {(hi - lo) / 2:.2g}"


def findings(frames: dict[str, pd.DataFrame]) -> str:
    df = frames.get("ics")
    if df is None or df.empty:
        return "No ICS rows."
    df = _ics(df)
    df = df.assign(grad_misalignment=1.0 - df["grad_cosine"])
    cols = {"grad_misalignment": "1 - cos(G, G')", "grad_rel_diff": "||G - G'||/||G||",
            "step_mean_shift": "per-update |Δμ| of layer inputs"}
    means = {c: _run_means(df, c) for c in cols}
    parts, bn_more, compared = [], [], []
    for exp in sorted(df["experiment"].unique()):
        first = df[df["experiment"] == exp].iloc[0]
        norms = norm_order(df[df["experiment"] == exp])
        stats = "; ".join(
            f"{what}: " + ", ".join(f"{n} {_fmt(means[c].loc[(exp, n)])}" for n in norms)
            for c, what in cols.items())
        parts.append(f"{exp} ({first['dataset']} / {first['model']}): {stats}.")
        if {"none", "batchnorm"} <= set(norms):
            mis = means["grad_misalignment"]
            if mis.loc[(exp, "batchnorm")].mean() > mis.loc[(exp, "none")].mean():
                bn_more.append(exp)
            compared.append(exp)
    text = ("Means over layers 2..k and all checkpoints, then mean ± 95% CI half-width over "
            "seeds. " + " ".join(parts))
    if compared:
        which = f" ({', '.join(bn_more)})" if bn_more else ""
        text += (f" BatchNorm has a lower mean cos(G, G') than the unnormalized network, i.e. "
                 f"more gradient ICS, in {len(bn_more)} of {len(compared)} experiments{which}.")
    replay = df.dropna(subset=["update_replay_error"])
    if len(replay):
        pairs = replay.groupby(["experiment", "norm", "seed", "step"]).ngroups
        text += (f" Replay check: the recomputed update W^(t+1) matched the next checkpoint's "
                 f"weights to max |difference| {replay['update_replay_error'].max():.3g} over "
                 f"{pairs} consecutive-step checkpoint pairs.")
    return text


register(Family(
    "ics_gradient", draw_gradient, tables=("ics",), module="ics",
    caption=(
        "Gradient internal covariate shift (Santurkar Def. 2.1, cf. their Fig. 3) at each "
        "checkpoint step (symlog axis): l2 difference, relative difference and cosine between a "
        "layer's gradient G before and G' after the preceding layers take the optimizer's actual "
        "update on the step's batch; columns are the first layer that has preceding layers, the "
        "middle layer and the head. No ICS means difference 0 and cosine 1. Lines are means over "
        "seeds with 95% Student-t CI bands (" + GEOMETRY + ")."),
))
register(Family(
    "ics_depth", draw_depth, tables=("ics",), module="ics",
    caption=(
        "Gradient ICS against depth: relative difference ||G - G'||/||G|| (top) and cos(G, G') "
        "(bottom) per layer, one panel per checkpoint step. Layer 1 has no preceding layers "
        "(G' = G by definition). Look for whether the shift grows with depth and how the "
        "normalizers differ."),
))
register(Family(
    "ics_distribution", draw_distribution, tables=("ics",), module="ics",
    caption=(
        "Distributional ICS (cf. Santurkar Fig. 8): mean over units of the absolute change of "
        "each unit's mean (top) and variance (bottom) of a layer's input on a fixed probe batch, "
        "over one optimizer update t -> t+1 (solid) and since the previous checkpoint (dashed); "
        "train-mode forward, so BN uses the probe batch's statistics. Bands: 95% Student-t CI "
        "over seeds (" + GEOMETRY + ")."),
))

register_section(Section(
    "ics", "Internal covariate shift", (
        "Gradient ICS follows Santurkar et al. Definition 2.1: at each checkpoint step t, on "
        "that step's recorded mini-batch, G_i is the gradient of the training loss with respect "
        "to layer i's parameters at W^t, and G'_i the same gradient after layers 1..i-1 take "
        "their actual update W^(t+1) (a copy of the saved SGD state, momentum and weight decay "
        "included, stepping on the full gradient G) while layers i..k stay at W^t. Layer i is "
        "the i-th hidden block's linear/conv weight and bias together with its normalizer's "
        "parameters (BN's gamma, beta; weight norm's g, v); the head is the last layer. All "
        "passes run in train mode on a copy of the model, so BN normalizes with the step's "
        "mini-batch statistics (bn_statistics = batch) and the running buffers of the measured "
        "model are untouched. Distributional ICS takes the inputs of every layer on a fixed "
        "probe batch (the first probe_size training points, train-mode forward), per-unit "
        "(per-channel for conv) means and biased variances averaged over units, and the mean "
        "absolute change of those per-unit moments over one update and between consecutive "
        "checkpoints. The activation-distribution figure (ics_activations, cf. Santurkar Fig. "
        "2) shows the quantiles of one sampled unit's normalizer output on that probe batch "
        "over training, per normalizer, so BN, noisy BN and no normalizer are compared by the "
        "distributions themselves."),
    table="ics",
    families=("ics_gradient", "ics_depth", "ics_distribution", "ics_activations"),
    findings=findings,
    rank=20,
))
