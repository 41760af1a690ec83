"""The look every figure shares: sizes, axis labels in words, the seed band, legends outside the
data, colour-blind-safe class colours, step axes (re-exported by :mod:`bnstudy.plots`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.tables.intervals import mean_ci

plt = lazy.module("matplotlib.pyplot")
sns = lazy.module("seaborn")
mcolors = lazy.module("matplotlib.colors")
mticker = lazy.module("matplotlib.ticker")
mtransforms = lazy.module("matplotlib.transforms")


def seed_ci(values) -> tuple[float, float]:
    """The band every figure draws: the 95% Student-t interval of the mean over seeds (runs),
    the interval the report's tables and the claims ledger print (seaborn's ``errorbar``
    callable). Deterministic, unlike seaborn's bootstrap; one value gives a zero-width band."""
    m, lo, hi, n = mean_ci(values)
    return (m, m) if n == 1 else (lo, hi)


# Every figure is FULL_WIDTH inches wide (panels are scaled by their height only), so that fonts
# keep one size across the report's figures. ``plots: {width: W}`` sets another width for a
# study's figures (a paper's text or column width), heights scaled alike (:func:`set_width`).
FULL_WIDTH = 13.0
_WIDTH = {"inches": FULL_WIDTH}


def set_width(inches: float | None) -> None:
    """The width of the figures drawn from now on (None: :data:`FULL_WIDTH`)."""
    inches = FULL_WIDTH if inches is None else float(inches)
    if not 2.0 <= inches <= 30.0:
        raise ValueError(f"figure width {inches!r} inches is outside [2, 30]")
    _WIDTH["inches"] = inches


def _size(height: float) -> tuple[float, float]:
    w = _WIDTH["inches"]
    return w, height * w / FULL_WIDTH

# Axis labels in words, with units, for table columns that the figures plot.
LABELS = {
    "step": "training step",
    "epochs": "training epochs",
    "loss": "loss",
    "accuracy": "accuracy (fraction correct)",
    "norm": "normalizer",
    "split": "split",
    "loss_gap": "loss gap (test − train)",
    "test_loss": "test loss",
    "train_loss": "train loss",
    "accuracy_gap": "accuracy gap (train − test)",
    "test_accuracy": "test accuracy (fraction correct)",
    "train_accuracy": "train accuracy (fraction correct)",
    "boundaries": "boundaries per point",
    "fraction": "fraction of the layer's units",
    "layer_index": "hidden layer (1 = first)",
    "layer": "layer (1 = first)",
    "point_set": "point set",
    "radius": "radius r (input units)",
    "grad_pred_max": "gradient predictiveness\nmax ‖∇L(w−ηg) − g‖₂",
    "beta_eff": "effective β-smoothness\nmax ‖∇L(w−ηg) − g‖₂ / ‖ηg‖₂",
    "hessian_top": "top Hessian eigenvalue at w",
    "grad_diff": "‖∇L(w − ηg) − g‖₂",
    "multiplier": "step multiplier η / lr",
    "grad_l2_diff": "‖G − G′‖₂",
    "grad_rel_diff": "‖G − G′‖₂ / ‖G‖₂",
    "grad_cosine": "cos(G, G′)",
    "input_mean": "mean of layer input",
    "input_var": "variance of layer input",
    "step_mean_shift": "per-update |Δμ| of layer input",
    "step_var_shift": "per-update |Δσ²| of layer input",
    "mean_shift": "|Δμ| of layer input since previous checkpoint",
    "var_shift": "|Δσ²| of layer input since previous checkpoint",
    "batch_size": "batch size M",
    "lr": "learning rate",
    "final_train_loss": "final train loss",
    "alpha": "load alpha = P / N",
    "err": "generalization error",
    "gamma2": "gamma² = ‖w̃‖² / N",
    "gamma_sq": "γ² (mean over layers and units)",
    "ratio": "empirical / predicted variance",
    "x0": "input x₀",
    "x1": "input x₁",
}


def label(column: str) -> str:
    """The axis label for a table column: words with units; unknown columns lose their
    underscores."""
    return LABELS.get(column, column.replace("_", " "))


def figure(nrows: int = 1, ncols: int = 1, height: float = 3.2, **kw):
    """``plt.subplots`` at the full width, ``height`` inches per row (at :data:`FULL_WIDTH`;
    scaled with the width), axes always 2-D."""
    return plt.subplots(nrows, ncols, figsize=_size(height * nrows), squeeze=False, **kw)


def message(text: str, heading: str | None = None) -> plt.Figure:
    """A full-width figure that only says ``text`` (nothing to draw)."""
    fig, ax = plt.subplots(figsize=_size(1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    if heading:
        fig.suptitle(heading)
    return fig


def step_axis(ax, steps, what: str = "training step") -> None:
    """A symmetric-log step axis (step 0 kept) ticked at 0, 1, 10, 100, ... with plain labels
    (the last step too when it is at least half a decade beyond the last power of ten), so that
    neighbouring labels never collide."""
    s = np.asarray([v for v in steps if np.isfinite(v)], dtype=float)
    top = float(s.max()) if len(s) else 1.0
    ax.set_xscale("symlog", linthresh=1.0)
    ticks = [0.0]
    if top >= 1:
        k = int(np.floor(np.log10(top)))
        ticks += [10.0 ** i for i in range(k + 1)]
        if np.log10(top) - k >= 0.5:
            ticks.append(top)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(mticker.NullLocator())
    ax.set_xlim(left=0, right=max(top * 1.15, 1.0))
    ax.set_xlabel(what)


def class_cmap(n: int) -> mcolors.ListedColormap:
    """Class colours for data points: the first ``n`` (n >= 2) colours of the colour-blind-safe
    scheme for hues that are not normalizers (:data:`bnstudy.plots.colors.OTHER`)."""
    from bnstudy.plots.colors import other_colors

    return mcolors.ListedColormap(other_colors(max(n, 2)))


def _column_label(text: str) -> bool:
    return bool(text) and " " not in text and "\n" not in text


def _outside(ax) -> None:
    """Move ``ax``'s legend outside its data area: right of the axes in the figure's last
    column, below the axes elsewhere."""
    leg = ax.get_legend()
    title = leg.get_title().get_text()
    if title in LABELS:
        leg.set_title(label(title))
    for text in leg.get_texts():  # seaborn's sub-titles of hue and style ("norm", "split")
        if text.get_text() in ("norm", "point_set", "batch_size", "layer_index"):
            text.set_text(label(text.get_text()))
    anchor = leg.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    if anchor.x0 >= 1.0 and getattr(leg, "_loc", None) in (2, 3, 6):  # left edge anchored
        return  # already right of the axes (moving it would redraw its handles plainer)
    try:
        spec = ax.get_subplotspec().get_topmost_subplotspec()
        last_col = spec.is_last_col()
    except AttributeError:
        last_col = True
    if last_col:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        # below the tick labels and the x label: 3 lines of text under the axes
        below = mtransforms.offset_copy(ax.transAxes, fig=ax.figure,
                                        y=-3.2 * plt.rcParams["font.size"], units="points")
        sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below,
                        frameon=False, ncol=-(-len(leg.get_texts()) // 4))


SPARSE = 25  # a line with at most this many points is drawn with markers at its samples
CLIP_NOTE = "band clipped"  # the panel's note (the captions say what it means)
CLIP_REACH = 1.0  # a band reaching this many line spans beyond the lines is clipped


def _data_lines(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_transform() == ax.transData
            and ln.get_linestyle() not in ("None", "", " ")]


def mark_sparse(ax) -> None:
    """Markers on the lines sampled at few points (at most :data:`SPARSE`), so that a line does
    not suggest data between two evaluations (e.g. between step 0 and the first one)."""
    for ln in _data_lines(ax):
        n = np.isfinite(np.asarray(ln.get_xdata(), dtype=float)).sum()
        if 2 < n <= SPARSE and ln.get_marker() in (None, "None", "", " "):
            ln.set_marker("o")
            ln.set_markersize(3.5)


def clip_bands(ax) -> bool:
    """On a linear y axis, limit the axis to the lines' range (plus half its span) where a seed
    band reaches more than :data:`CLIP_REACH` spans beyond it (3-seed Student-t bands can
    stretch an axis to thousands), and say so in the panel; True when it clipped."""
    if ax.get_yscale() != "linear":
        return False
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ln in _data_lines(ax)]
    ys = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.array([])
    bands = [c for c in ax.collections if type(c).__name__ in ("PolyCollection",
                                                              "FillBetweenPolyCollection")]
    if len(ys) < 2 or not bands:
        return False
    lo, hi = float(ys.min()), float(ys.max())
    span = hi - lo if hi > lo else max(abs(hi), 1e-12)
    edges = np.concatenate([np.asarray(p.vertices)[:, 1] for c in bands for p in c.get_paths()
                            if len(p.vertices)] or [np.array([lo, hi])])
    edges = edges[np.isfinite(edges)]
    if not len(edges) or (edges.min() >= lo - CLIP_REACH * span
                          and edges.max() <= hi + CLIP_REACH * span):
        return False
    ax.set_ylim(lo - 0.5 * span, hi + 0.5 * span)
    note = ax.text(0.01, 0.01, CLIP_NOTE, transform=ax.transAxes, fontsize="x-small",
                   color="#555", ha="left", va="bottom")
    note.set_in_layout(False)  # inside the panel: the layout need not make room for it
    return True


def finish(fig: plt.Figure, rect=(0, 0, 1, 1)) -> plt.Figure:
    """The common last step of every draw function: axis labels that are still column names
    become words (:func:`label`), sparse lines get markers (:func:`mark_sparse`), bands that
    would stretch an axis are clipped, saying so (:func:`clip_bands`), legends leave the data
    area, and the layout is tightened (unless the figure uses constrained layout)."""
    for ax in fig.axes:
        mark_sparse(ax)
        clip_bands(ax)
        for get, put in ((ax.get_xlabel, ax.set_xlabel), (ax.get_ylabel, ax.set_ylabel)):
            if _column_label(get()):
                put(label(get()))
        if ax.get_legend() is not None:
            _outside(ax)
    if fig.get_layout_engine() is None:
        fig.tight_layout(rect=rect)
    return fig


def title(df: pd.DataFrame, what: str) -> str:
    """'<experiment>: <what> (<dataset> / <model>)' for a one-experiment frame."""
    first = df.iloc[0]
    return f"{first['experiment']}: {what} ({first['dataset']} / {first['model']})"


def norm_order(df: pd.DataFrame) -> list[str]:
    """Normalizers in a stable order: 'none' first, then alphabetical."""
    names = sorted(df["norm"].unique())
    return sorted(names, key=lambda n: (n != "none", n))
