"""Dannemann & Junike's counterexample (study scope): GD paths in the (w1, w2) plane, the BN loss
over directions, convergence to the line 3 w1 = 5 w2, and the numbers behind Lemma 4.5's failure.

Everything drawn or stated comes from the ``dannemann`` analysis table (bnstudy.analyses.dannemann).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.plots import Family, Section, figure, finish, register, register_section

# imported on first use (bnstudy.lazy): importing this module stays cheap
plt = lazy.module("matplotlib.pyplot")


def _rec(df: pd.DataFrame, record: str) -> pd.DataFrame:
    return df[df["record"] == record]


def _wrap(a):
    return (np.asarray(a, float) + 180.0) % 360.0 - 180.0


def _target_angle(df: pd.DataFrame) -> float:
    scan = _rec(df, "optimum")
    scan = scan[scan["method"] == "bn_angle_scan"]
    return float(scan.loc[scan["loss"].idxmin(), "angle_deg"])


def _loss_at(land: pd.DataFrame):
    """C^ at any point (eps = 0: a function of the direction only), interpolated in angle."""
    a = land["angle_deg"].to_numpy()
    v = land["loss"].to_numpy()
    return lambda w1, w2: np.interp(np.degrees(np.arctan2(w2, w1)) % 360.0, a % 360.0, v,
                                    period=360.0)


def _plane(ax, df: pd.DataFrame) -> None:
    traj = _rec(df, "trajectory")
    bn, plain = traj[traj["objective"] == "bn"], traj[traj["objective"] == "plain"]
    w_star = _rec(df, "optimum").query("method == 'plain_least_squares'").iloc[0]
    pts = np.concatenate([bn[["w1", "w2"]].to_numpy(), [[w_star["w1"], w_star["w2"]]]])
    lim = 1.15 * float(np.abs(pts).max())
    g = np.linspace(-lim, lim, 300)
    g1, g2 = np.meshgrid(g, g)
    loss = _loss_at(_rec(df, "landscape"))(g1, g2)
    levels = np.unique(np.quantile(loss, np.linspace(0, 1, 16)))
    cs = ax.contourf(g1, g2, loss, levels=levels, cmap="Greys", alpha=0.55)
    plt.colorbar(cs, ax=ax, fraction=0.046, pad=0.02, label="BN loss C^ (eps = 0)")
    t = np.radians(_target_angle(df))
    ax.plot([0, lim * math.cos(t) * 2], [0, lim * math.sin(t) * 2], color="black", lw=2,
            label="BN minima: 3 w1 = 5 w2, w1 > 0")
    ax.plot([0, -lim * math.cos(t) * 2], [0, -lim * math.sin(t) * 2], color="black", lw=1,
            ls="--", label="3 w1 = 5 w2, w1 < 0 (maxima)")
    ts = math.atan2(w_star["w2"], w_star["w1"])
    ax.plot([0, lim * math.cos(ts) * 2], [0, lim * math.sin(ts) * 2], color="tab:red", lw=1,
            ls=":", label="ray of W* (the lemma's premise)")
    for _, p in plain.groupby("init"):
        ax.plot(p["w1"], p["w2"], color="tab:red", lw=0.7, alpha=0.5)
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(bn["init"].nunique(), 1)))
    for c, (_i, p) in zip(colors, bn.groupby("init"), strict=True):
        p = p.sort_values("step")
        ax.plot(p["w1"], p["w2"], color=c, lw=1.2, marker=".", ms=2)
        ax.plot(p["w1"].iloc[0], p["w2"].iloc[0], "o", color=c, mec="black", ms=6)
        ax.plot(p["w1"].iloc[-1], p["w2"].iloc[-1], "X", color=c, mec="black", ms=8)
    ax.plot(w_star["w1"], w_star["w2"], "*", color="tab:red", mec="black", ms=16,
            label="W* (plain optimum) = paper's W0", zorder=5)
    grad = _rec(df, "gradient").query("method == 'autograd_batchnorm1d'")
    if len(grad):
        gv = grad.iloc[0][["grad_w1", "grad_w2"]].to_numpy(float)
        gv = -gv / np.linalg.norm(gv) * 0.25 * lim
        ax.annotate("", xy=(w_star["w1"] + gv[0], w_star["w2"] + gv[1]),
                    xytext=(w_star["w1"], w_star["w2"]),
                    arrowprops={"arrowstyle": "->", "color": "tab:red", "lw": 2})
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.set_xlabel("weight w1")
    ax.set_ylabel("weight w2")
    ax.set_title("GD on the BN loss (o start, X end); red: GD on C")
    ax.legend(fontsize=7, loc="lower left")


def _directions(ax, df: pd.DataFrame) -> None:
    land = _rec(df, "landscape").copy()
    land["angle"] = _wrap(land["angle_deg"])
    land = land.sort_values("angle")
    ax.plot(land["angle"], land["loss"], color="black", lw=1.2)
    ax.axvline(_target_angle(df), color="black", lw=1, label="scan minimum (BN optimum)")
    w_star = _rec(df, "optimum").query("method == 'plain_least_squares'").iloc[0]
    ax.axvline(w_star["angle_deg"], color="tab:red", ls=":", label="direction of W*")
    fin = _rec(df, "final").query("objective == 'bn'")
    ax.plot(_wrap(fin["angle_deg"]), fin["loss"], "X", color="tab:blue", ms=7,
            label="GD end points")
    ax.set_xlabel("direction of w (degrees)")
    ax.set_ylabel("BN loss C^")
    ax.set_title("BN loss by direction (scale invariant)")
    ax.legend(fontsize=7)


def _convergence(ax, df: pd.DataFrame) -> None:
    traj = _rec(df, "trajectory").query("objective == 'bn'")
    target = _target_angle(df)
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(traj["init"].nunique(), 1)))
    for c, (i, p) in zip(colors, traj.groupby("init"), strict=True):
        p = p.sort_values("step")
        err = np.maximum(np.abs(_wrap(p["angle_deg"] - target)), 1e-14)
        ax.plot(p["step"] + 1, err, color=c, lw=1.2,
                label="paper W0 = W*" if i == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("GD step + 1")
    ax.set_ylabel("|angle to the line 3 w1 = 5 w2| (degrees)")
    ax.set_title("convergence of the direction")
    ax.legend(fontsize=7)


def draw(frames, options):
    df = frames[0]
    fig, axes = figure(1, 3, height=6.0)
    axes = axes[0]
    _plane(axes[0], df)
    _directions(axes[1], df)
    _convergence(axes[2], df)
    fig.suptitle("Dannemann & Junike: a linear neuron with BN (gamma = 1, beta = 0) on three "
                 "samples")
    return finish(fig)


register(Family(
    "dannemann_counterexample", draw, tables=("dannemann",), module="dannemann",
    scope="study",
    caption=(
        "Left: the (w1, w2) plane shaded by the BN loss C^ (which depends only on the direction "
        "of w), full-batch GD paths on C^ through torch's BatchNorm1d from the paper's W0 = W* "
        "and seeded random inits (o start, X end), GD paths on the plain loss C (red, all "
        "ending at the star W*), the ray 3 w1 = 5 w2, w1 > 0 (solid) and the arrow of -grad C^ "
        "at W* (normalized length). Middle: C^ over directions with the scan minimum, W*'s "
        "direction and the GD end points. Right: the angle between each GD iterate and the "
        "line, log-log. Look for: the arrow at W* is nonzero and tangent to the circle through "
        "W* (scale invariance), and every BN path ends on the solid ray, not on W*'s ray."),
))


def findings(frames: dict[str, pd.DataFrame]) -> str:
    df = frames.get("dannemann")
    if df is None or df.empty:
        return "No dannemann table."
    grad = _rec(df, "gradient").set_index("method")
    opt = _rec(df, "optimum")
    ws = opt.query("method == 'plain_least_squares'").iloc[0]
    cls = opt.query("method == 'bn_centered_least_squares'").iloc[0]
    scan = opt.query("method == 'bn_angle_scan'")
    best = scan.loc[scan["loss"].idxmin()]
    fin = _rec(df, "final")
    bn, plain = fin.query("objective == 'bn'"), fin.query("objective == 'plain'")
    lem = _rec(df, "lemma")
    paper = lem.query("init == 0").iloc[0]
    hyp = lem[(lem["init"] != 0) & lem["hypothesis"].astype(bool)]
    a, c = grad.loc["autograd_batchnorm1d"], grad.loc["closed_form"]
    fd, rep = grad.loc["finite_difference_paper_formula"], grad.loc["paper_reported"]
    d_auto = max(abs(a["grad_w1"] - c["grad_w1"]), abs(a["grad_w2"] - c["grad_w2"]))
    d_fd = max(abs(fd["grad_w1"] - c["grad_w1"]), abs(fd["grad_w2"] - c["grad_w2"]))
    return (
        f"At the plain least-squares optimum W* = ({ws['w1']:.4f}, {ws['w2']:.4f}) "
        f"(C(W*) = {ws['loss']:.4f}) the BN loss gradient is ({a['grad_w1']:.4f}, "
        f"{a['grad_w2']:.4f}), norm {a['grad_norm']:.4f}, by autograd through "
        f"nn.BatchNorm1d; the analytic closed form differs from it by at most {d_auto:.1e} "
        f"per component and central differences of the paper's printed formula by {d_fd:.1e} "
        f"(the paper prints ({rep['grad_w1']:.2f}, {rep['grad_w2']:.2f})). "
        f"<grad, W*> = {c['grad_dot_w']:.1e}: the gradient is orthogonal to W*, as scale "
        f"invariance requires, so W* is not a stationary point of C^ (C^(W*) = "
        f"{c['loss']:.4f}). A scan of C^ over {len(_rec(df, 'landscape'))} directions finds "
        f"{len(scan)} local minimum direction(s), the best at {best['angle_deg']:.6f} deg "
        f"(3 w1 - 5 w2 = {best['line_residual']:.1e} on the unit vector, C^ = "
        f"{best['loss']:.4f}), matching the centered least-squares direction "
        f"({cls['w1']:.4f}, {cls['w2']:.4f}) at {cls['angle_deg']:.6f} deg. GD on C^ "
        f"(lr {bn['lr'].iloc[0]:g}, {int(bn['step'].iloc[0])} steps) from {len(bn)} inits (the "
        f"paper's W0 = W* and {len(bn) - 1} random) ends with max |angle error| "
        f"{np.abs(bn['angle_error_deg']).max():.1e} deg, max |3 w1 - 5 w2| "
        f"{np.abs(bn['line_residual']).max():.1e} (normalized by sqrt(34)||w||: "
        f"{np.abs(bn['line_residual_normalized']).max():.1e}), w1 > 0 in "
        f"{int((bn['w1'] > 0).sum())}/{len(bn)}, loss {bn['loss'].min():.4f} to "
        f"{bn['loss'].max():.4f}; GD on C from the same inits ends within "
        f"{plain['dist_to_wstar'].max():.1e} of W*. Lemma 4.5 at W0 = W*: right side "
        f"||W0 - W*||^2 - (||W*||^2 - <W*, W0>)^2 / ||W*||^2 = {paper['rhs']:.4f}, left side "
        f"||W0 - Wbn||^2 = {paper['lhs_closest']:.4f} for the closest BN optimum "
        f"({paper['lhs_reached']:.4f} for the one GD reaches), so the inequality "
        f"{'holds' if paper['holds_closest'] else 'fails'}. Among the {len(hyp)} random inits "
        f"with <W0, W*> > 0 it fails for {int((~hyp['holds_closest'].astype(bool)).sum())}.")


register_section(Section(
    "dannemann", "BN does not improve initialization (Dannemann & Junike)", (
        "Santurkar et al.'s Lemma 4.5 claims that, for any init W0 with <W0, W*> > 0, the "
        "closest BN optimum is nearer than the plain one: ||W0 - Wbn||^2 <= ||W0 - W*||^2 - "
        "(||W*||^2 - <W*, W0>)^2 / ||W*||^2. Dannemann & Junike's counterexample: samples "
        "(1,1), (1,2), (2,3) with labels 2, 5, 13, one linear neuron without bias followed by "
        "BN over the whole set (biased variance, gamma = 1, beta = 0, summed squared error), "
        "initialized at the plain optimum W0 = W*, where the right side is 0. We compute W* by "
        "least squares, the BN gradient at W* three ways (autograd through torch's "
        "BatchNorm1d(affine=False) in train mode, the analytic closed form, finite differences "
        "of the paper's printed formula), the BN optima by a scan over directions and by "
        "centered least squares, and run full-batch GD (float64, seeded random inits "
        "N(0, init_std^2 I) plus W0 = W*) on both losses. Choices the paper leaves open: torch "
        "needs eps > 0 in train mode (autograd and GD use eps = 1e-12 by default), the closed "
        "form, the scan and the lemma use eps = 0; 'closest BN optimum' is the projection of W0 "
        "on the optimal ray(s); GD step size, length and inits are ours (analysis options)."),
    table="dannemann", families=("dannemann_counterexample",), findings=findings,
    rank=100,
))
