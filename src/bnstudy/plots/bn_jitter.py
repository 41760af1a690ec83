"""BN mini-batch jitter figures (BN-Explained Figs. 6-7, Prop. 2) and the report section.

- ``bn_jitter_boundaries``: Fig. 6: decision-boundary realizations under different mini-batches'
  BN statistics, for each measured batch size at the first and last measured checkpoint, over
  the disagreement map, with the data (2-D datasets only);
- ``bn_jitter_prop2``: empirical against predicted variance of BN's mu and sigma^2 per layer and
  batch size (log-log, identity line), and their ratio against depth.
"""

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
    register,
    register_section,
    seed_ci,
    title,
)
from bnstudy.plots import bn_jitter_lines as lines
from bnstudy.tables import intervals

# imported on first use (bnstudy.lazy): importing this module stays cheap
plt = lazy.module("matplotlib.pyplot")
sns = lazy.module("seaborn")
mlines = lazy.module("matplotlib.lines")
mticker = lazy.module("matplotlib.ticker")


def _message(df: pd.DataFrame, what: str, text: str) -> plt.Figure:
    return message(text, title(df, what))


def _layers(df: pd.DataFrame) -> pd.DataFrame:
    """Applicable per-layer rows (not the boundary summaries)."""
    return df[df["applicable"].astype(bool) & (df["layer"] != "boundary")]


def draw_boundaries(frames, options):
    df, summary = frames[0], frames[1]
    grid = df[df["kind"] != "data"]
    if grid.empty:
        return _message(df, "decision-boundary jitter", "not applicable: no BatchNorm layers in "
                        "this experiment's runs, so the boundary does not jitter")
    seed = int(grid["seed"].min())
    grid, data = grid[grid["seed"] == seed], df[(df["kind"] == "data") & (df["seed"] == seed)]
    steps = sorted(grid["step"].unique())
    steps = [steps[0], steps[-1]] if len(steps) > 1 else steps
    sizes = sorted(grid["batch_size"].unique())
    rows = [(n, s) for n in norm_order(grid) for s in steps
            if not grid[(grid["norm"] == n) & (grid["step"] == s)].empty]
    # batch sizes in columns (the paper's comparison), near-square panels
    fig, axes = figure(len(rows), len(sizes), height=min(4.6, 11.0 / len(sizes)),
                       layout="constrained")
    n_cls = int(data["label"].max()) + 1 if len(data) else 2
    image = None
    for i, (norm, step) in enumerate(rows):
        for j, b in enumerate(sizes):
            ax = axes[i, j]
            sub = grid[(grid["norm"] == norm) & (grid["batch_size"] == b) & (grid["step"] == step)]
            shown = lines.disagreement(ax, sub)
            image = shown if shown is not None else image
            lines.boundaries(ax, sub)
            ax.scatter(data["x0"], data["x1"], c=data["label"], cmap=class_cmap(n_cls), vmin=0,
                       vmax=max(n_cls - 1, 1), s=8, linewidths=0.3, edgecolors="white",
                       alpha=0.95, zorder=4)
            row = summary[(summary["norm"] == norm) & (summary["seed"] == seed)
                          & (summary["batch_size"] == b) & (summary["step"] == step)
                          & (summary["layer"] == "boundary")]
            stats = ""
            if len(row):
                r = row.iloc[0]
                stats = (f"\nband {r['band_fraction']:.0%} of grid, margin {r['margin_mean']:.3f}"
                         f" (pop. {r['margin_population']:.3f})")
            ax.set_title(f"{norm}, |B| = {b}, step {step}{stats}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    handles = [mlines.Line2D([], [], color=lines.REALIZATION, lw=0.8, alpha=0.6,
                             label="one mini-batch's statistics"),
               mlines.Line2D([], [], color=lines.POPULATION, lw=1.8,
                             label="training-set statistics")]
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.6,
                     label="fraction of realizations\ndisagreeing with the majority class")
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False,
               title="decision boundary with BN at")
    fig.suptitle(title(df, f"decision-boundary jitter across mini-batches (Fig. 6), seed {seed}"))
    return finish(fig)


def draw_prop2(frames, options):
    df = frames[0]
    ok = _layers(df)
    if ok.empty:
        return _message(df, "BN statistics jitter vs Proposition 2",
                        "not applicable: no BatchNorm layers in this experiment's runs")
    ok = ok.assign(**{"|B|": ok["batch_size"].astype(str), "layer": ok["layer_index"]})
    fig, axes = figure(1, 3, height=4.4)
    axes = axes[0]
    for ax, (stat, what) in zip(axes[:2], (("mu", "var(μ)"), ("sigma2", "var(σ²)")),
                                strict=True):
        emp, pred = f"var_{stat}_emp", f"var_{stat}_pred"
        d = ok[(ok[emp] > 0) & (ok[pred] > 0)]
        if d.empty:
            ax.axis("off")
            continue
        sns.scatterplot(d, x=pred, y=emp, hue="layer", style="|B|", palette="viridis", ax=ax,
                        legend=(stat == "mu"), s=30, alpha=0.8)
        lo, hi = np.nanmin(d[[emp, pred]].values), np.nanmax(d[[emp, pred]].values)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"predicted {what} (population)")
        ax.set_ylabel(f"empirical {what} (mini-batches)")
        ax.set_title(f"{what}, mean over units")
    long = ok.melt(id_vars=["layer", "|B|", "step", "seed", "norm"],
                   value_vars=["ratio_mu", "ratio_sigma2"], var_name="statistic",
                   value_name="ratio")
    long = long[np.isfinite(long["ratio"]) & (long["ratio"] > 0)]
    long["statistic"] = long["statistic"].map({"ratio_mu": "var(μ)", "ratio_sigma2": "var(σ²)"})
    ax = axes[2]
    if not long.empty:
        sns.lineplot(long, x="layer", y="ratio", hue="|B|", style="statistic", marker="o",
                     errorbar=seed_ci, ax=ax)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=1, ls=":")
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.set_xlabel(label("layer"))
        ax.set_ylabel(label("ratio"))
    ax.set_title("empirical / predicted (1 = Prop. 2 holds)")
    fig.suptitle(title(df, "jitter of BN's mu and sigma^2 across mini-batches vs Proposition 2"))
    return finish(fig)


register(Family(
    "bn_jitter_boundaries", draw_boundaries, tables=("bn_jitter_boundary", "bn_jitter"),
    module="bn_jitter", datasets=("star2d",), caption=(
        "BN-Explained Fig. 6: the decision boundary of the network with its BN layers frozen at "
        "the statistics of one mini-batch (thin magenta lines, one per mini-batch: the first "
        "map_realizations of the measured realizations; their spread is the jitter), and at "
        "the whole training set's statistics (thick black line), traced on a fine grid of "
        "boundary_resolution points per axis, for each measured batch size (columns) at the "
        "first and last measured checkpoint (rows), first seed, over the training points; "
        "grey: the fraction of all realizations disagreeing with the majority class on the "
        "coarse grid (white = none, grey = half). The band is the share of that grid where any "
        "realization disagrees; the margin is the mean distance of the training points to the "
        "nearest boundary, averaged over realizations. The paper's claim: smaller batches "
        "jitter the boundary more."),
))
register(Family(
    "bn_jitter_prop2", draw_prop2, tables=("bn_jitter",), module="bn_jitter", caption=(
        "Proposition 2: the variance over mini-batches of BN's per-unit batch mean mu (left) "
        "and biased batch variance sigma^2 (middle), mean over units, against its prediction "
        "from the population moments of the same layer's input (the training set, earlier BN "
        "layers at their training-set statistics); one point per BN layer (colour), batch size "
        "(marker), checkpoint and seed; dotted: identity. Right: empirical / predicted by layer "
        "(95% Student-t CI over checkpoints and seeds). The first BN layer sees an exact sample "
        "of the population, so it lies on the identity by construction (an implementation check); "
        "deeper layers see inputs already normalized by the same batch, which the prediction's "
        "iid assumption ignores: there the comparison tests Proposition 2."),
))


def _fmt(v: float, pct: bool = False) -> str:
    if not np.isfinite(v):
        return "n/a"
    return f"{v:.0%}" if pct else f"{v:.3g}"


def _mean_ci(values, pct: bool = False) -> str:
    """'mean ± CI half-width' over seeds (95% Student t), or the mean alone for one seed."""
    m, lo, hi, n = intervals.mean_ci(values)
    if not np.isfinite(m):
        return "n/a"
    if pct:
        return f"{m:.0%}" + (f" ± {(hi - lo) / 2:.0%}" if n > 1 else "")
    return f"{m:.3g}" + (f" ± {(hi - lo) / 2:.2g}" if n > 1 else "")


def _ratios(lay: pd.DataFrame) -> list[str]:
    """Per batch size: first-BN-layer ratios (mean over checkpoints, then seeds) and the range
    of the deeper layers' ratios."""
    items = []
    first = lay["layer_index"] == lay.groupby("seed")["layer_index"].transform("min")
    lay = lay.assign(printed=lay["var_sigma2_emp"] / lay["var_sigma2_prop2"])
    for b, g in lay.groupby("batch_size"):
        f, d = g[first[g.index]], g[~first[g.index]]
        per_seed = f.groupby("seed")[["ratio_mu", "ratio_sigma2", "printed"]].mean()
        txt = (f"|B|={b} (n={int(g['batch_size_effective'].iloc[0])}): first BN layer "
               f"empirical/predicted var(mu) {_mean_ci(per_seed['ratio_mu'])}, var(sigma^2) "
               f"{_mean_ci(per_seed['ratio_sigma2'])} (against eq. 13 as printed "
               f"{_mean_ci(per_seed['printed'])})")
        if len(d):
            txt += (f", deeper layers var(mu) {_fmt(d['ratio_mu'].min())}–"
                    f"{_fmt(d['ratio_mu'].max())}, var(sigma^2) "
                    f"{_fmt(d['ratio_sigma2'].min())}–{_fmt(d['ratio_sigma2'].max())}")
        items.append(txt)
    return items


def _bands(bnd: pd.DataFrame) -> list[str]:
    """Jitter band and margin per batch size at the first and the last checkpoint."""
    items = []
    last = bnd.groupby("seed")["step"].transform("max")
    first = bnd.groupby("seed")["step"].transform("min")
    for stage, s in (("init", bnd[bnd["step"] == first]), ("final", bnd[bnd["step"] == last])):
        if s.empty or (stage == "final" and (last == first).all()):
            continue
        parts = []
        for b, g in s.groupby("batch_size"):
            parts.append(f"|B|={b} band {_mean_ci(g['band_fraction'], pct=True)} of the grid, "
                         f"margin {_mean_ci(g['margin_mean'])} (training-set statistics "
                         f"{_mean_ci(g['margin_population'])})")
        items.append(f"at {stage} (step {int(s['step'].max())}): " + ", ".join(parts))
    return items


def findings(frames: dict[str, pd.DataFrame]) -> str:
    df = frames.get("bn_jitter")
    if df is None or df.empty:
        return "No bn_jitter rows."
    parts = []
    for exp, e in df.groupby("experiment", sort=True):
        name = f"{exp} ({e['dataset'].iloc[0]} / {e['model'].iloc[0]})"
        ok = e[e["applicable"].astype(bool)]
        if ok.empty:
            parts.append(f"{name}: not applicable (no BatchNorm layers).")
            continue
        for norm in norm_order(ok):
            g = ok[ok["norm"] == norm]
            seeds = g["seed"].nunique()
            items = _ratios(_layers(g)) + _bands(g[g["layer"] == "boundary"])
            parts.append(
                f"{name}, {norm} [{seeds} seed{'s' if seeds > 1 else ''}, "
                f"K={int(g['n_batches'].iloc[0])} batches drawn "
                f"{g['sampling'].iloc[0].replace('_', ' ')}, mean ± 95% Student-t CI over seeds]: "
                + "; ".join(items) + ".")
    return " ".join(parts)


register_section(Section(
    "bn_jitter", "Mini-batch jitter of BN (BN-Explained §5, Prop. 2, Fig. 6)", (
        "For each checkpoint and batch size, K seeded mini-batches (the same at every "
        "checkpoint of a run and for every normalizer of a seed, different across seeds, so "
        "the CIs over seeds include the Monte Carlo error; drawn as configured, by default "
        "without replacement like one batch of an epoch) are "
        "passed through a private train-mode copy of the network, recording each BN layer's "
        "per-unit batch mean and biased variance, i.e. exactly what training on that batch "
        "uses. Their variances over the batches are compared with Proposition 2 evaluated on "
        "the population moments of the same layer's input (the whole training set with earlier "
        "BN layers at their training-set statistics), with the exact finite-population "
        "correction when sampling without replacement and the factor ((n-1)/n)^2 because BN "
        "divides by the biased variance while eq. 13 is the variance of the unbiased one; the "
        "formula as printed is kept in the var_*_prop2 columns. The prediction is exact for the "
        "first BN layer, so agreement there checks the measurement (the ledger's prop2_mu / "
        "prop2_sigma2 rows are implementation checks); deeper, the iid assumption ignores that "
        "earlier layers are normalized by the same batch, and the ledger's prop2_deep_* rows "
        "test the proposition there. For 2-D classification data, the BN layers are frozen "
        "at each of R batches' statistics and the predicted class is evaluated on a grid: the "
        "jitter band is the share of the grid where realizations disagree, the margin the mean "
        "distance of the training points to each realization's boundary (grid-resolution "
        "limited). Ghost BN uses its virtual batch size; conv layers count H·W positions as "
        "samples (an approximation: positions of one image are correlated)."),
    table="bn_jitter", families=("bn_jitter_boundaries", "bn_jitter_prop2"),
    # no summary table: the report's summaries group by layer but not by batch size, and would
    # pool the batch sizes as if they were seeds; the findings give the numbers per batch size
    findings=findings,
    rank=80,
))
