"""Figure families and report sections, by name.

A :class:`Family` draws one figure from one or more aggregated tables, optionally restricted to
one experiment. A :class:`Section` groups families in the report with the text that says what the
figures measure and what to look for, and names the table columns summarized over seeds.
Each module of this package registers its families and its section; :func:`render` (one figure)
and :func:`render_all` (every figure of a family, its tables read once) are what the ``plot``
CLI verb calls. Importing this package and its modules imports neither matplotlib nor seaborn
(see :mod:`bnstudy.lazy`): the workflow reads the registry when it parses the Snakefile.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.io import atomic_path
from bnstudy.tables import mean_ci

# Imported on first use (Agg backend), so that the registry is cheap to import: the workflow
# reads it when it parses the Snakefile. See bnstudy.lazy.
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


@dataclass(frozen=True)
class Family:
    """A figure drawn from ``tables``.

    ``scope="experiment"``: one figure per experiment, from the tables restricted to it
    (``figures/<experiment>/<name>.png``); ``datasets`` limits it to those dataset kinds (None:
    all), ``skip_datasets`` leaves out kinds whose study figures already show it;
    ``in_experiment(config, experiment)`` (None: always) says whether the study's options give
    that experiment's tables the rows the figure draws (e.g. ``partition_density: {maps:
    false}`` leaves the map table empty), so that no figure is scheduled over an empty table.
    ``scope="study"``: one figure from the whole tables (``figures/study/<name>.png``), for
    analyses and cross-experiment comparisons; ``in_study(config)`` (None: always) says whether
    a study's config gives the figure anything to show, so that no study gets an empty figure.
    ``module``: the module of this package that draws it (its hash joins the plot rule's code
    version).
    """

    name: str
    draw: Callable[[list[pd.DataFrame], dict], plt.Figure]
    caption: str
    tables: tuple[str, ...]
    module: str
    datasets: tuple[str, ...] | None = None
    scope: str = "experiment"
    skip_datasets: tuple[str, ...] = ()
    in_study: Callable[[dict], bool] | None = None
    in_experiment: Callable[[dict, str], bool] | None = None


@dataclass(frozen=True)
class Section:
    """A report section. ``findings(frames)`` may return HTML-safe text stating the numbers
    (``frames`` maps table names to aggregated tables)."""

    key: str
    title: str
    text: str
    table: str
    families: tuple[str, ...]
    summary_columns: tuple[str, ...] = ()
    summary_filter: dict = field(default_factory=dict)
    findings: Callable[[dict[str, pd.DataFrame]], str] | None = None


FAMILIES: dict[str, Family] = {}
SECTIONS: dict[str, Section] = {}
# Report order: training, the core measures, then the papers' experiments.
MODULES = ("training", "lr_sweep", "generalization", "partition_density", "ics", "smoothness",
           "bn_jitter", "teacher_student", "teacher_student_findings", "dannemann")


def register(family: Family) -> Family:
    FAMILIES[family.name] = family
    return family


def register_section(section: Section) -> Section:
    SECTIONS[section.key] = section
    return section


def load_all() -> None:
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")


def get(name: str) -> Family:
    load_all()
    if name not in FAMILIES:
        raise ValueError(f"unknown figure family {name!r}; valid choices: {sorted(FAMILIES)}")
    return FAMILIES[name]


def style(options: dict) -> None:
    sns.set_theme(context=options.get("context", "notebook"), style="whitegrid",
                  palette=options.get("palette", "colorblind"))


def _restrict(frames: list[pd.DataFrame], experiment, tables) -> list[pd.DataFrame]:
    """``frames`` restricted to ``experiment``'s rows (all of them when it is None)."""
    if experiment is None:
        return frames
    frames = [f[f["experiment"] == experiment] if "experiment" in f else f for f in frames]
    if all(len(f) == 0 for f in frames):
        raise ValueError(f"no rows for experiment {experiment!r} in {tables}")
    return frames


def _save(family: Family, frames: list[pd.DataFrame], out, options: dict) -> None:
    style(options)
    fig = family.draw(frames, options)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=options.get("dpi", 110), bbox_inches="tight",
                    format=str(out).rsplit(".", 1)[-1])
    plt.close(fig)


def render(name: str, tables: list[str], out: str, options: dict, experiment=None) -> None:
    """Draw family ``name`` from ``tables`` (restricted to ``experiment`` unless None) to
    ``out``."""
    family = get(name)
    frames = [pd.read_parquet(t) for t in tables]
    _save(family, _restrict(frames, experiment, tables), out, options)


def render_all(name: str, tables: list[str], outs: dict, options: dict) -> None:
    """Every figure of family ``name`` in one process: ``outs`` maps an experiment to its
    figure's path (an experiment-scope family) or ``None`` to the one figure of a study-scope
    family. The tables are read once; each figure is the one :func:`render` draws for that
    experiment, byte for byte. Nothing is drawn unless every experiment has rows."""
    family = get(name)
    if not isinstance(outs, dict) or not outs:
        raise ValueError(f"outs must be a non-empty mapping experiment -> output path, "
                         f"got {outs!r}")
    if family.scope == "study" and list(outs) != [None]:
        raise ValueError(f"figure family {name!r} is drawn once for the study: outs must be "
                         f"{{None: path}}, got experiments {list(outs)}")
    if family.scope != "study" and not all(isinstance(e, str) and e for e in outs):
        raise ValueError(f"figure family {name!r} is drawn per experiment: outs must map "
                         f"experiment names to paths, got {list(outs)}")
    paths = [str(o) for o in outs.values()]
    if len(set(paths)) != len(paths):
        raise ValueError(f"two experiments of figure family {name!r} share an output path: "
                         f"{paths}")
    frames = [pd.read_parquet(t) for t in tables]
    restricted = {e: _restrict(frames, e, tables) for e in outs}
    for experiment, out in outs.items():
        _save(family, restricted[experiment], out, options)


# Every figure is FULL_WIDTH inches wide (panels are scaled by their height only), so that fonts
# keep one size across the report's figures.
FULL_WIDTH = 13.0

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
    "ratio": "empirical / predicted variance",
    "x0": "input x₀",
    "x1": "input x₁",
}


def label(column: str) -> str:
    """The axis label for a table column: words with units; unknown columns lose their
    underscores."""
    return LABELS.get(column, column.replace("_", " "))


def figure(nrows: int = 1, ncols: int = 1, height: float = 3.2, **kw):
    """``plt.subplots`` at the full width, ``height`` inches per row, axes always 2-D."""
    return plt.subplots(nrows, ncols, figsize=(FULL_WIDTH, height * nrows), squeeze=False, **kw)


def message(text: str, heading: str | None = None) -> plt.Figure:
    """A full-width figure that only says ``text`` (nothing to draw)."""
    fig, ax = plt.subplots(figsize=(FULL_WIDTH, 1.6))
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
    """Class colours for data points: the first ``n`` colours of seaborn's colour-blind
    palette (n >= 2)."""
    return mcolors.ListedColormap(sns.color_palette("colorblind", n_colors=max(n, 2)))


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


def finish(fig: plt.Figure, rect=(0, 0, 1, 1)) -> plt.Figure:
    """The common last step of every draw function: axis labels that are still column names
    become words (:func:`label`), legends leave the data area, and the layout is tightened
    (unless the figure uses constrained layout)."""
    for ax in fig.axes:
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
