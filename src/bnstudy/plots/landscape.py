"""Loss landscapes (Li et al. 2018) and Hessian spectra (PyHessian) per experiment, every
normalizer side by side: 1-D slices with their seeds' band, 2-D contours on one colour scale
with the same levels, spectral densities overlaid."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.plots import (
    Family,
    Section,
    figure,
    finish,
    norm_order,
    norm_palette,
    register,
    register_section,
    title,
)
from bnstudy.plots.bands import band

sns = lazy.module("seaborn")
plt = lazy.module("matplotlib.pyplot")
colors = lazy.module("matplotlib.colors")

DIRECTIONS = ("directions: Gaussian, filter-normalized (Li et al. 2018, §4: each filter of "
              "the direction rescaled to the norm of the same filter of the weights; normalizer "
              "parameters and biases zero in the direction unless bias: weights)")
SAMPLE = ("the loss is the mean training loss over the measure's fixed sample of the training "
          "set (its size n in the title), BN statistics as the title's bn_statistics says")
LINES = {"random": "along a filter-normalized random direction: L(w + a d)",
         "interpolation": "from the initialization (a = 0) to the checkpoint (a = 1): "
                          "L(w0 + a (w − w0))"}


def _setting(df: pd.DataFrame) -> str:
    return f"n = {int(df['sample_size'].iloc[0])}, bn_statistics = {df['bn_statistics'].iloc[0]}"


def draw_lines(frames, options):
    df = frames[0]
    order, steps = norm_order(df), sorted(df["step"].unique())
    kinds = [k for k in LINES if k in set(df["line"])]
    fig, axes = figure(len(kinds), len(steps), height=3.2)
    for i, kind in enumerate(kinds):
        for j, step in enumerate(steps):
            ax = axes[i, j]
            d = df[(df["line"] == kind) & (df["step"] == step)]
            d = d[np.isfinite(d["loss"].astype(float))]
            if len(d):
                kw, log = band(d["loss"], ratio=30.0)
                sns.lineplot(d, x="coord", y="loss", hue="norm", hue_order=order,
                             palette=norm_palette(order), **kw, ax=ax,
                             legend=(i == 0 and j == len(steps) - 1))
                if log:
                    ax.set_yscale("log")
            else:
                ax.text(0.5, 0.5, "no line at this checkpoint", ha="center", va="center",
                        transform=ax.transAxes, color="#666")
            ax.set_title(f"step {step}: {kind}")
            ax.set_xlabel("a")
            ax.set_ylabel("training loss" if j == 0 else "")
    fig.suptitle(title(df, f"1-D loss landscape ({_setting(df)})"))
    return finish(fig)


def _mean_grid(d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = d.groupby(["coord_1", "coord_2"])["loss"].mean().unstack("coord_2")
    return g.index.to_numpy(), g.columns.to_numpy(), g.to_numpy().T


def levels(values, n: int = 14) -> np.ndarray:
    """Contour levels shared by every panel: log-spaced over the positive finite losses when
    they span more than a factor 10, else evenly spaced."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = float(v.min()), float(v.max())
    if lo > 0 and hi / lo > 10:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi if hi > lo else lo + 1.0, n)


def draw_grid(frames, options):
    df = frames[0]
    order = norm_order(df)
    step = int(df["step"].max())
    d = df[df["step"] == step]
    lv = levels(d.groupby(["norm", "coord_1", "coord_2"])["loss"].mean())
    log = lv[0] > 0 and lv[-1] / lv[0] > 10 and np.allclose(lv, np.geomspace(lv[0], lv[-1],
                                                                            len(lv)))
    norm = colors.LogNorm(lv[0], lv[-1]) if log else colors.Normalize(lv[0], lv[-1])
    fig, axes = figure(1, len(order), height=3.6, layout="constrained")
    cs = None
    for ax, name in zip(axes[0], order, strict=True):
        a, b, z = _mean_grid(d[d["norm"] == name])
        z = np.clip(np.where(np.isfinite(z), z, lv[-1]), lv[0], lv[-1])
        cs = ax.contourf(a, b, z, levels=lv, norm=norm, cmap="viridis")
        ax.contour(a, b, z, levels=lv, colors="white", linewidths=0.4)
        ax.plot([0], [0], marker="*", color="red", markersize=9)
        ax.set_title(f"{name} ({d[d['norm'] == name]['seed'].nunique()} seeds, mean)")
        ax.set_xlabel("a (direction 1)")
        ax.set_ylabel("b (direction 2)")
        ax.set_aspect("equal")
    if cs is not None:
        bar = fig.colorbar(cs, ax=list(axes[0]), shrink=0.9,
                           label="training loss (same levels in every panel)")
        ticks = lv[:: max(1, len(lv) // 5)]
        bar.set_ticks(ticks)
        bar.set_ticklabels([f"{t:.3g}" for t in ticks])
        bar.minorticks_off()
    fig.suptitle(title(df, f"2-D loss landscape at step {step} ({_setting(d)})"))
    return fig


def densities(df: pd.DataFrame, grid: np.ndarray, sigma: float) -> pd.Series:
    """Per normalizer: the Gaussian-smoothed SLQ density, averaged over its runs and seeds."""
    from bnstudy.measures.landscape.curvature import smoothed

    out = {}
    for name, d in df.groupby("norm", sort=False):
        curves = [smoothed(r["eigenvalue"], r["weight"], grid, sigma)
                  for _, r in d.groupby(["seed", "run"])]
        out[name] = np.mean(curves, axis=0)
    return pd.Series(out)


def draw_spectrum(frames, options):
    df = frames[0]
    dens = df[df["kind"] == "density"]
    order = norm_order(df)
    steps = sorted(dens["step"].unique())
    fig, axes = figure(1, max(len(steps), 1), height=3.4)
    palette = norm_palette(order)
    for ax, step in zip(axes[0], steps, strict=False):
        d = dens[dens["step"] == step]
        lo, hi = float(d["eigenvalue"].min()), float(d["eigenvalue"].max())
        span = max(hi - lo, 1e-12)
        grid = np.linspace(lo - 0.05 * span, hi + 0.05 * span, 400)
        curves = densities(d, grid, sigma=0.01 * span)
        for name in order:
            if name in curves:
                ax.plot(grid, np.maximum(curves[name], 1e-12), color=palette[name], label=name)
        ax.set_yscale("log")
        ax.set_ylim(bottom=1e-6 / span)
        ax.set_title(f"step {step}")
        ax.set_xlabel("Hessian eigenvalue")
        ax.set_ylabel("density" if step == steps[0] else "")
    axes[0, -1].legend(title="norm", fontsize="small")
    fig.suptitle(title(df, f"Hessian eigenvalue density (SLQ; {_setting(df)})"))
    return finish(fig)


register(Family(
    "landscape_lines", draw_lines, tables=("landscape",), module="landscape",
    caption=(
        "1-D loss landscapes at each measured checkpoint (columns). Top: the loss " + LINES[
            "random"] + ", a from the configured line_range; bottom: the loss " + LINES[
            "interpolation"] + ". Every normalizer on the same axes; lines are seed means, "
        "bands are 95% Student-t CIs over seeds (log axis: geometric). " + DIRECTIONS + "; "
        + SAMPLE + ". A flatter, wider basin around a = 0 is what 'smoother' means here."),
))

register(Family(
    "landscape_grid", draw_grid, tables=("landscape_grid",), module="landscape",
    caption=(
        "2-D loss landscape at the last checkpoint measured: the loss at w + a d1 + b d2 over "
        "the configured grid_range squared (red star: the checkpoint), one panel per "
        "normalizer, mean over seeds, drawn on one colour scale with the same contour levels "
        "in every panel (log-spaced when the losses span more than a factor 10). " + DIRECTIONS
        + "; the two directions are independent draws from the run's seed. " + SAMPLE + "."),
))

register(Family(
    "landscape_spectrum", draw_spectrum, tables=("landscape_spectrum",), module="landscape",
    caption=(
        "Hessian eigenvalue density at each checkpoint measured (columns), every normalizer "
        "overlaid: stochastic Lanczos quadrature (PyHessian's density): per Rademacher start "
        "vector, the Lanczos Ritz values weighted by the squared first components of their "
        "vectors, each node smoothed by a Gaussian of width 1% of the panel's eigenvalue range, "
        "averaged over runs and seeds. The Hessian is that of the training loss over the "
        "measure's fixed sample (" + SAMPLE + "); log density axis, as PyHessian draws it."),
))


def findings(frames: dict[str, pd.DataFrame]) -> str:
    curv = frames.get("landscape_curvature")
    if curv is None or curv.empty:
        return "No curvature measurements."
    parts = []
    for exp, e in curv.groupby("experiment", sort=True):
        first = int(e["step"].min())
        items = []
        for name in norm_order(e):
            g = e[(e["norm"] == name) & (e["step"] == first)]
            top = g["hessian_top"].astype(float)
            text = f"{name}: trace {g['trace'].mean():.3g} (mean SE {g['trace_se'].mean():.2g})"
            if np.isfinite(top).any():
                text += f", top eigenvalue {top.mean():.3g}"
            items.append(text)
        parts.append(f"{exp} at step {first} ({e['seed'].nunique()} seed(s), seed means, sample "
                     f"of {int(e['sample_size'].iloc[0])}): " + "; ".join(items) + ".")
    return " ".join(parts)


register_section(Section(
    "landscape", "Loss landscapes and the Hessian's spectrum", (
        "The pictures the field draws of 'a smoother landscape' (beyond Santurkar et al.): "
        "Li et al. (2018)'s filter-normalized 1-D and 2-D slices of the training loss and the "
        "line from the initialization to each checkpoint, and PyHessian's (Yao et al. 2020) "
        "Hessian trace (Hutchinson's estimator over Rademacher vectors, with its standard "
        "error), top eigenvalues (Lanczos with full re-orthogonalization) and eigenvalue "
        "density (stochastic Lanczos quadrature). The loss is the mean training loss over a "
        "fixed sample of the training set drawn from the run's seed; the directions are drawn "
        "from the run's seed too, so the same config gives the same picture. Filter "
        "normalization makes a slice's scale the weights' own, so that the scale-invariant "
        "(BN) and the plain networks are compared on one footing; normalizer parameters do "
        "not move. The summary table shows the trace and top eigenvalue at each run's last "
        "measured checkpoint; the findings give them at the first."),
    table="landscape_curvature", families=("landscape_lines", "landscape_grid",
                                           "landscape_spectrum"),
    summary_columns=("trace", "trace_se", "hessian_top"),
    summary_filter={"last_step": True},
    findings=findings,
    rank=35,
))
