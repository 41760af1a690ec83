"""Partition density figures: over training, train vs test vs random, per layer, 2-D maps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.plots import (
    Family,
    Section,
    class_cmap,
    figure,
    finish,
    label,
    message,
    norm_order,
    norm_palette,
    register,
    register_section,
    seed_ci,
    step_axis,
    title,
)
from bnstudy.plots.bands import band
from bnstudy.plots.partition_scope import has_partition, maps_measured

# imported on first use (bnstudy.lazy): importing this module stays cheap
plt = lazy.module("matplotlib.pyplot")
sns = lazy.module("seaborn")
mcolors = lazy.module("matplotlib.colors")
mticker = lazy.module("matplotlib.ticker")

SETS = ["train", "test", "random"]
STAGES = ["init", "final"]


def _applicable(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["applicable"].astype(bool)] if "applicable" in df else df


def _not_applicable(df: pd.DataFrame, what: str) -> plt.Figure:
    return message("not applicable: the network has no kinked activation (linear), so its\n"
                   "input space has no partition and there are no boundaries to count",
                   title(df, what))


def _r(df: pd.DataFrame, r: float) -> str:
    """'r = 0.03', with the method and, for the polytope, the epsilon-ball it stands for."""
    method = df["method"].iloc[0] if "method" in df and len(df) else "polytope"
    if method == "distance":
        return f"r = {r:g}"
    eff = df.loc[df["radius"] == r, "effective_radius"] if "effective_radius" in df else []
    return f"polytope r = {r:g}" + (f" (ball {eff.mean():.2g})" if len(eff) else "")


def _mid_radius(df: pd.DataFrame) -> float:
    radii = np.sort(df["radius"].unique())
    return float(radii[(len(radii) - 1) // 2])


def _stages(df: pd.DataFrame) -> pd.DataFrame:
    """Rows at step 0 ('init') and at each run's last step ('final')."""
    last = df.groupby(["norm", "seed"])["step"].transform("max")
    init = df[df["step"] == 0].assign(stage="init")
    final = df[(df["step"] == last) & (last > 0)].assign(stage="final")
    return pd.concat([init, final], ignore_index=True)


def draw_steps(frames, options):
    df = frames[0]
    ok = _applicable(df)
    if ok.empty:
        return _not_applicable(df, "partition density over training")
    ok = ok[ok["layer"] == "all"]
    radii = sorted(ok["radius"].unique())
    sets = [s for s in SETS if s in set(ok["point_set"])]
    fig, axes = figure(len(radii), len(sets), height=3.0, sharex=True, sharey="row")
    order = norm_order(ok)
    for i, r in enumerate(radii):
        for j, s in enumerate(sets):
            ax = axes[i, j]
            sub = ok[(ok["radius"] == r) & (ok["point_set"] == s)]
            sns.lineplot(sub, x="step", y="boundaries", hue="norm", hue_order=order,
                         palette=norm_palette(order), marker="o",
                         errorbar=seed_ci, ax=ax, legend=(i == 0 and j == len(sets) - 1))
            step_axis(ax, ok["step"].unique())
            ax.set_title(f"{s} points, {_r(ok, r)}")
            ax.set_ylabel(label("boundaries") if j == 0 else "")
    fig.suptitle(title(ok, "partition density over training (all layers)"))
    return finish(fig)


def draw_sets(frames, options):
    df = frames[0]
    ok = _applicable(df)
    if ok.empty:
        return _not_applicable(df, "partition density by point set")
    ok = _stages(ok[ok["layer"] == "all"])
    radii = sorted(ok["radius"].unique())
    fig, axes = figure(len(radii), 2, height=3.0)
    order = norm_order(ok)
    for i, r in enumerate(radii):
        for j, stage in enumerate(STAGES):
            ax = axes[i, j]
            sub = ok[(ok["radius"] == r) & (ok["stage"] == stage)]
            if sub.empty:
                ax.axis("off")
                continue
            sns.barplot(sub, x="point_set", y="boundaries", hue="norm", hue_order=order,
                        palette=norm_palette(order),
                        order=[s for s in SETS if s in set(sub["point_set"])],
                        errorbar=seed_ci, ax=ax, legend=(i == 0 and j == 1))
            step = int(sub["step"].max())
            ax.set_title(f"{stage} (step {step}), {_r(ok, r)}")
            ax.set_xlabel("")
            ax.set_ylabel(label("boundaries") if j == 0 else "")
    fig.suptitle(title(df, "partition density: train vs test vs random points (all layers)"))
    return finish(fig)


def draw_layers(frames, options):
    df = frames[0]
    ok = _applicable(df)
    if ok.empty:
        return _not_applicable(df, "partition density per layer")
    r = _mid_radius(ok)
    ok = _stages(ok[(ok["layer"] != "all") & (ok["radius"] == r)])
    sets = [s for s in SETS if s in set(ok["point_set"])]
    fig, axes = figure(1, len(sets), height=3.6, sharey=True)
    for ax, s in zip(axes[0], sets, strict=True):
        sns.lineplot(ok[ok["point_set"] == s], x="layer_index", y="fraction", hue="norm",
                     hue_order=norm_order(ok), palette=norm_palette(norm_order(ok)),
                     style="stage", style_order=STAGES, marker="o",
                     **band([], bounds=(0.0, 1.0))[0], ax=ax, legend=(s == sets[-1]))
        ax.set_title(f"{s} points, {_r(ok, r)}")
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.set_xlabel(label("layer_index"))
        ax.set_ylabel(label("fraction"))
    fig.suptitle(title(df, "partition density per layer (init vs final)"))
    return finish(fig)


def draw_maps(frames, options):
    df = frames[0]
    seed = int(df["seed"].min())
    df = df[df["seed"] == seed]
    data = df[df["group"] == "data"]
    grid = _stages(df[df["group"] != "data"])
    order = norm_order(grid)
    groups = [g for g in ("first", "middle", "last", "all") if g in set(grid["group"])]
    panels = [(n, s) for n in order for s in STAGES if not grid[(grid["norm"] == n)
                                                                & (grid["stage"] == s)].empty]
    fig, axes = figure(len(panels), len(groups), height=2.7, layout="constrained")
    n_cls = int(data["label"].max()) + 1 if len(data) else 2
    for j, g in enumerate(groups):
        # one colour scale per column (layer group): its panels are compared across rows
        col_max = grid.loc[grid["group"] == g, "boundaries"].max()
        vtop = max(float(col_max), 1e-12) if np.isfinite(col_max) else 1.0
        image = None
        for i, (norm, stage) in enumerate(panels):
            ax = axes[i, j]
            sub = grid[(grid["norm"] == norm) & (grid["stage"] == stage) & (grid["group"] == g)]
            img = sub.pivot_table(index="x1", columns="x0", values="boundaries")
            vmax = float(np.nanmax(img.values)) if img.size else 0.0
            if img.size:
                image = ax.imshow(img.values, origin="lower", cmap="Greys",
                                  norm=mcolors.PowerNorm(0.5, vmin=0, vmax=vtop),
                                  extent=(img.columns.min(), img.columns.max(), img.index.min(),
                                          img.index.max()), aspect="auto",
                                  interpolation="nearest")
            pts = data[data["norm"] == norm]
            ax.scatter(pts["x0"], pts["x1"], c=pts["label"], cmap=class_cmap(n_cls), vmin=0,
                       vmax=max(n_cls - 1, 1), s=5, alpha=0.9, linewidths=0.3,
                       edgecolors="white")
            layer = int(sub["layer_index"].iloc[0]) if len(sub) else 0
            which = "all layers" if g == "all" else f"{g} (layer {layer})"
            ax.set_title(f"{which}\nmax {vmax:.0f}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                step = int(sub["step"].iloc[0]) if len(sub) else 0
                ax.set_ylabel(f"{norm}\n{stage} (step {step})", fontsize=8)
        if image is not None:
            fig.colorbar(image, ax=axes[:, j], orientation="horizontal", shrink=0.8,
                         label="boundaries (√ scale)")
    radius = float(grid["radius"].iloc[0]) if len(grid) else float("nan")
    fig.suptitle(title(df, f"partition density maps, seed {seed}, {_r(grid, radius)}"))
    return finish(fig)


register(Family(
    "partition_density_steps", draw_steps, tables=("partition_density",),
    module="partition_density", in_experiment=has_partition, caption=(
        "Partition density over training: the mean number of hidden units (all hidden layers) "
        "whose boundary passes within distance r of a point (method distance; polytope: whose "
        "pre-activation changes sign over a cross-polytope, the epsilon-ball it stands for in "
        "brackets), for training, test and random Gaussian points (columns) and each radius "
        "(rows); bands are "
        "95% Student-t CIs over seeds, the x axis is symmetric-log in steps (step 0 = "
        "initialization). "
        "Look for whether BatchNorm concentrates more boundaries around the data than the "
        "other normalizers, and how training moves them."),
))
register(Family(
    "partition_density_sets", draw_sets, tables=("partition_density",),
    module="partition_density", in_experiment=has_partition, caption=(
        "Partition density around training, test and random points at initialization (left) "
        "and at the last checkpoint (right), all hidden layers, one row per radius; bars are "
        "means with 95% Student-t CIs over seeds. BN-Explained's claim (Fig. 4): with BN the "
        "boundaries "
        "concentrate around the data (train > random)."),
))
register(Family(
    "partition_density_layers", draw_layers, tables=("partition_density",),
    module="partition_density", in_experiment=has_partition, caption=(
        "Fraction of each hidden layer's units whose folded hyperplane passes within the middle "
        "configured radius of the point, at initialization (solid) and at the last "
        "checkpoint (dashed); bands are 95% Student-t CIs over seeds."),
))
register(Family(
    "partition_density_maps", draw_maps, tables=("partition_density_maps",),
    module="partition_density", datasets=("star2d",), in_experiment=maps_measured, caption=(
        "The picture of BN-Explained Fig. 3: partition density over a grid covering the 2-D "
        "data (darker = more boundaries within map_radius of that location, square-root colour "
        "scale), "
        "for the first, middle and last hidden layer and all layers (columns), per normalizer "
        "at initialization and at the last checkpoint (rows), first seed; the panels of a column "
        "share one colour scale (colour bar below it; each panel's maximum is printed). Dots "
        "are the training points by class."),
))


def findings(frames: dict[str, pd.DataFrame]) -> str:
    df = frames.get("partition_density")
    if df is None or df.empty:
        return "No partition-density rows."
    parts = []
    for exp, e in df.groupby("experiment", sort=True):
        name = f"{exp} ({e['dataset'].iloc[0]} / {e['model'].iloc[0]})"
        ok = _applicable(e)
        if ok.empty:
            parts.append(f"{name}: not applicable (linear network, no partition).")
            continue
        r = _mid_radius(ok)
        st = _stages(ok[(ok["layer"] == "all") & (ok["radius"] == r)])
        neurons = int(st["neurons"].iloc[0])
        seeds = st.groupby("norm")["seed"].nunique()
        stats = ", ".join(sorted(set(st["bn_statistics"]) - {"n/a"})) or "none used"
        items = []
        for norm in norm_order(st):
            m = st[st["norm"] == norm].groupby(["point_set", "stage"])["boundaries"].mean()
            sets = [s for s in SETS if (s, "init") in m.index]
            txt = ", ".join(
                f"{s} {m[(s, 'init')]:.1f}" + (f"→{m[(s, 'final')]:.1f}"
                                               if (s, "final") in m.index else "")
                for s in sets)
            ratio = ""
            if ("train", "init") in m.index and ("random", "init") in m.index:
                ratio = m[("train", "init")] / m[("random", "init")]
                ratio = f" (train/random at init {ratio:.2f})"
            items.append(f"{norm} ({seeds[norm]} seeds): {txt}{ratio}")
        parts.append(f"{name}, {_r(st, r)}, all layers, BN statistics {stats}: boundaries per "
                     f"point out of {neurons} neurons (init→final, mean over seeds): "
                     + "; ".join(items) + ".")
    return " ".join(parts)


register_section(Section(
    "partition_density", "Partition density (BN-Explained §3.3)", (
        "How densely the input-space partition of a ReLU network concentrates around a point: "
        "the number of hidden units whose boundary (the zero set of the pre-activation, after "
        "the normalizer and before the activation) crosses the epsilon-ball of radius r around "
        "it, as BN-Explained counts. Default method distance: a unit counts when |h(x)| < "
        "r·||∇h(x)||, with exact input gradients (forward-mode AD), which is exactly the "
        "epsilon-ball count for first-layer units in any input dimension and a first-order "
        "estimate for deeper units whose boundary folds within r. Method polytope (if "
        "configured): a unit counts when its pre-activation changes sign over the vertices "
        "x ± r·v_k of a cross-polytope along a fixed seeded orthonormal frame of "
        "min(n_vertices/2, input dim) directions; it stands for a smaller ball (the "
        "effective_radius column: about 0.9 r for 2-D inputs, 0.27 r for 64-D digits, 0.04 r for "
        "CIFAR), so its counts are not comparable across input dimensions. "
        "Points: training and test subsets and Gaussian points with the training data's "
        "per-feature mean and standard deviation, the same for every run. BatchNorm layers are "
        "frozen as fixed affine maps with the statistics named in the bn_statistics column "
        "(default train_set: mean and biased variance over the whole training set at the "
        "checkpoint's weights, as in BN-Explained), so a point's count does not depend on the "
        "other points. Measured at every checkpoint (step 0 = initialization). Linear networks "
        "(the DLN) have no partition and are reported as not applicable. For 2-D data the "
        "boundaries themselves are drawn as lines too, each layer's and all layers' (exact "
        "sign changes of the pre-activations on a fine grid, BN frozen the same way)."),
    table="partition_density",
    families=("partition_density_steps", "partition_density_sets", "partition_density_layers",
              "partition_density_maps", "partition_boundaries"),
    findings=findings, rank=10,
))
