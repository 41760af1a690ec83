"""Loss-landscape smoothness per experiment (Santurkar Fig. 4 and Fig. 11): loss variation,
gradient predictiveness, effective beta-smoothness and top Hessian eigenvalue over training; the
loss and gradient change along the gradient direction at each checkpoint."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
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

# imported on first use (bnstudy.lazy): importing this module stays cheap
sns = lazy.module("seaborn")


def _finite(df: pd.DataFrame, col: str) -> pd.DataFrame:
    return df[np.isfinite(df[col].astype(float))]


def _log_if_wide(ax, values, axis: str = "y") -> None:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) and v.min() > 0 and v.max() / v.min() > 30:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def draw_landscape(frames, options):
    df = frames[0]
    order = norm_order(df)
    palette = norm_palette(order)
    metrics = ["grad_pred_max", "beta_eff"]
    if np.isfinite(df["hessian_top"].astype(float)).any():
        metrics.append("hessian_top")
    n = 1 + len(metrics)
    fig, axes = figure(1, n, height=3.9)
    ax = axes[0, 0]
    for norm in order:
        g = df[df["norm"] == norm].groupby("step")
        lo = g["loss_min"].mean().replace([np.inf, -np.inf], np.nan)
        hi = g["loss_max"].mean().replace([np.inf, -np.inf], np.nan)
        ax.fill_between(lo.index, lo.values, hi.values, color=palette[norm], alpha=0.25)
        ax.plot(g["loss"].mean(), color=palette[norm], label=norm)
    _log_if_wide(ax, pd.concat([df["loss_min"], df["loss_max"]]))
    step_axis(ax, df["step"].unique())
    ax.set_title("loss variation along −g\n(band: min–max over probes)")
    ax.set_ylabel("mini-batch loss")
    handles, names = ax.get_legend_handles_labels()
    for ax, col in zip(axes[0, 1:], metrics, strict=True):
        d = _finite(df, col)
        if len(d):
            kw, log = band(d[col], ratio=30.0) if col != "hessian_top" else band([])
            sns.lineplot(d, x="step", y=col, hue="norm", hue_order=order, palette=palette,
                         **kw, marker="o", ax=ax, legend=False)
            if log:
                ax.set_yscale("log")
        step_axis(ax, df["step"].unique())
        ax.set_title(label(col))
        ax.set_ylabel(label(col).split("\n")[0])
    axes[0, -1].legend(handles, names, title=label("norm"), fontsize="small")
    fig.suptitle(title(df, "loss-landscape smoothness along the gradient"))
    return finish(fig)


def draw_probes(frames, options):
    df = frames[0]
    order = norm_order(df)
    steps = sorted(df["step"].unique())
    fig, axes = figure(2, len(steps), height=3.2, sharex=True)
    for j, step in enumerate(steps):
        d = df[df["step"] == step]
        for i, (col, ylab) in enumerate((("loss", "loss L(w − ηg)"),
                                          ("grad_diff", "‖∇L(w − ηg) − g‖₂"))):
            ax = axes[i, j]
            f = _finite(d, col)
            if len(f):
                kw, log = band(f[col], ratio=30.0)
                sns.lineplot(f, x="multiplier", y=col, hue="norm", hue_order=order,
                             palette=norm_palette(order), **kw, marker="o", ax=ax,
                             legend=(i == 0 and j == len(steps) - 1))
                if log:
                    ax.set_yscale("log")
            _log_if_wide(ax, d["multiplier"], axis="x")
            ax.set_title(f"step {step}" if i == 0 else "")
            ax.set_ylabel(ylab if j == 0 else "")
            ax.set_xlabel(label("multiplier") if i == 1 else "")
    fig.suptitle(title(df, "loss and gradient change along the gradient direction"))
    return finish(fig)


register(Family(
    "smoothness_landscape", draw_landscape, tables=("smoothness",), module="smoothness",
    caption=(
        "Smoothness of the mini-batch loss along the negative gradient at each checkpoint "
        "(Santurkar Fig. 4). Left: loss at w (line) and the range of losses over the probes "
        "w − ηg, η = m·lr (band; both averaged over seeds). Then the largest gradient change "
        "‖∇L(w−ηg) − g‖₂ over the probes, the effective β-smoothness (largest gradient change "
        "per unit distance moved) and, when measured, the top Hessian eigenvalue at w; lines are "
        "seed means, bands are 95% Student-t CIs over seeds (" + GEOMETRY + "). Lower and "
        "flatter means a smoother, more predictive "
        "landscape; look for the gap between normalized and unnormalized networks, especially "
        "early in training."),
))

register(Family(
    "smoothness_probes", draw_probes, tables=("smoothness_probes",), module="smoothness",
    caption=(
        "Per checkpoint (columns): the loss (top) and the ℓ2 distance between the gradient at "
        "the probe and the gradient at w (bottom) as a function of the step multiplier m = η/lr "
        "(Santurkar Fig. 11); lines are seed means, bands are 95% Student-t CIs over seeds ("
        + GEOMETRY + "). A "
        "gradient that stays "
        "close to g over a wide range of step sizes is predictive: larger learning rates are "
        "safe."),
))


def _phase_means(g: pd.DataFrame, col: str) -> tuple[float, float, float]:
    """Seed means at the first and last checkpoint step, and the median over all rows."""
    v = g[col].astype(float).replace(np.inf, np.nan)
    first, last = g["step"] == g["step"].min(), g["step"] == g["step"].max()
    return v[first].mean(), v[last].mean(), v.median()


def findings(frames: dict[str, pd.DataFrame]) -> str:
    df = frames.get("smoothness")
    if df is None or df.empty:
        return "No smoothness measurements."
    df = df.assign(loss_variation=df["loss_max"] - df["loss_min"])
    parts = []
    for exp, e in df.groupby("experiment", sort=True):
        first = e.iloc[0]
        steps = sorted(e["step"].unique())
        items, beta = [], {}
        for norm in norm_order(e):
            g = e[e["norm"] == norm]
            beta[norm] = _phase_means(g, "beta_eff")
            cols = ["beta_eff", "grad_pred_max", "loss_variation"]
            if np.isfinite(g["hessian_top"].astype(float)).any():
                cols.append("hessian_top")
            text = norm + ": " + ", ".join(
                "{} {:.3g} → {:.3g} (median {:.3g})".format(c, *_phase_means(g, c)) for c in cols)
            nonfinite = int(g["nonfinite_probes"].sum())
            if nonfinite:
                text += f", {nonfinite} non-finite probes"
            items.append(text)
        s = (f"{exp} ({first['dataset']} / {first['model']}; {e['seed'].nunique()} seed(s), "
             f"checkpoints {steps[0]}…{steps[-1]} ({len(steps)}), {int(e['n_probes'].iloc[0])} "
             f"probes each; first → last checkpoint, seed means): " + "; ".join(items) + ".")
        on = e[e["hessian_iterations"] > 0]
        if len(on) and not on["hessian_converged"].all():
            s += (f" {int((~on['hessian_converged']).sum())} of {len(on)} Hessian estimates did "
                  "not reach the tolerance within hessian_iters.")
        ratios = []
        for n, (b0, b1, _) in beta.items():
            n0, n1, _ = beta.get("none", (np.nan,) * 3)
            if n != "none" and all(np.isfinite([b0, b1, n0, n1])) and n0 > 0 and n1 > 0:
                ratios.append(f"{n} {b0 / n0:.2g}x at step {steps[0]}, {b1 / n1:.2g}x at step "
                              f"{steps[-1]}")
        if ratios:
            s += " beta_eff relative to no normalization: " + "; ".join(ratios) + "."
        parts.append(s)
    return " ".join(parts)


register_section(Section(
    "smoothness", "Loss-landscape smoothness", (
        "Santurkar et al. (2018, §3.2, App. A.2.2): at every checkpoint step t, with w the "
        "weights before update t and g the gradient of the mini-batch loss L on that step's "
        "recorded batch (weight decay excluded), we probe w − ηg for η = m·lr with m over a "
        "configured range (by default [0.5, 4] for nonlinear networks and [0.01, 30] for the "
        "deep linear network, as in the paper; log-spaced, endpoints included). Per "
        "checkpoint: the loss range over the probes (loss_min, loss_max; the 'loss "
        "variation'), gradient predictiveness max‖∇L(w−ηg) − g‖₂ (grad_pred_max), the "
        "effective β-smoothness max‖∇L(w−ηg) − g‖₂/‖ηg‖₂ (beta_eff) and, when enabled and the "
        "model is small enough, the top Hessian eigenvalue of L at w by the Lanczos iteration "
        "on Hessian-vector products, with full re-orthogonalization (the largest Ritz value; "
        "hessian_converged says whether the eigen-residuals of the top and the dominant Ritz "
        "pairs reached hessian_tol times their own magnitudes; NaN when off). Norms are "
        "global ℓ2 norms over all trainable parameters. BatchNorm runs in train mode, i.e. "
        "with the mini-batch statistics of that step's batch recomputed at each probe "
        "(bn_statistics = batch), on a private copy of the model so that its weights and "
        "running statistics are never touched. The probe direction is the plain mini-batch "
        "gradient, not the momentum update. The summary table shows each run's last "
        "checkpoint; the findings compare the first and last checkpoints."),
    table="smoothness", families=("smoothness_landscape", "smoothness_probes"),
    summary_columns=("loss", "loss_min", "loss_max", "grad_pred_max", "beta_eff",
                     "hessian_top"),
    summary_filter={"last_step": True},
    findings=findings,
    rank=30,
))
