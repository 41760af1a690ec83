"""The activation-distribution figure of the ICS measure (Santurkar et al. 2018, Figs. 2 and 6).

``ics_activations``: for one sampled unit of the first, middle and last hidden layer (rows), the
distribution of its normalizer output on the fixed probe batch over training, one column per
normalizer in the normalizer's fixed colour: the median as a line, the 25th-75th and 5th-95th
percentile ranges as two bands (the ``ics_activations`` table,
:mod:`bnstudy.measures.ics.activations`). Santurkar's question is read off it: how much each
unit's distribution moves with and without BN, and with noisy BN, whose time-varying noise moves
it at every step by construction (while, per the paper, it trains as well as BN; the training
figures say whether it does here). The figure draws the first seed and the first sampled unit
(the table's smallest unit index, the same unit in every run of an architecture), as the paper
shows example activations, not an average; each panel has its own y scale, so the unnormalized
network's larger activations do not flatten the normalized ones.
"""

from __future__ import annotations

import pandas as pd

from bnstudy import lazy
from bnstudy.measures.ics import options as ics_options
from bnstudy.plots import (
    Family,
    figure,
    finish,
    norm_order,
    norm_palette,
    register,
    step_axis,
    title,
)

mlines = lazy.module("matplotlib.lines")
mpatches = lazy.module("matplotlib.patches")

# (low, high) quantile levels of the two bands, drawn widest first, and their opacity
BANDS = (((0.05, 0.95), 0.2, "5-95%"), ((0.25, 0.75), 0.45, "25-75%"))
MEDIAN = 0.5


def shown_layers(df: pd.DataFrame) -> list[int]:
    """The first, middle and last hidden layer (fewer when the network has fewer)."""
    layers = sorted(int(v) for v in df["layer_index"].unique())
    return sorted({layers[0], layers[len(layers) // 2], layers[-1]})


def _curves(d: pd.DataFrame) -> pd.DataFrame:
    """One run's unit as ``step x quantile`` values, steps in order."""
    wide = d.pivot_table(index="step", columns="quantile", values="value", aggfunc="first")
    needed = [MEDIAN, *(q for (lo, hi), _, _ in BANDS for q in (lo, hi))]
    missing = sorted(set(needed) - set(wide.columns))
    if missing:
        raise ValueError(f"ics_activations rows lack the quantiles {missing}; the figure needs "
                         f"{sorted(needed)}")
    return wide.sort_index()


def _legend(ax) -> None:
    """What the line and the bands are, in a neutral colour (the columns give the colours)."""
    grey = "#555555"
    handles = [mlines.Line2D([], [], color=grey, marker=".", label="median")]
    handles += [mpatches.Patch(color=grey, alpha=alpha, lw=0, label=name)
                for _, alpha, name in reversed(BANDS)]
    ax.legend(handles=handles, title="over the probe batch")


def draw(frames, options):
    df = frames[0]
    if df.empty:
        raise ValueError("the ics_activations table has no rows (ics: activation_units: 0)")
    order, layers = norm_order(df), shown_layers(df)
    palette, steps = norm_palette(order), sorted(int(s) for s in df["step"].unique())
    fig, axes = figure(len(layers), len(order), height=2.6, sharex=True)
    for r, layer in enumerate(layers):
        at = df[df["layer_index"] == layer]
        unit = int(at["unit"].min())  # the first sampled unit (sorted): the same in every run
        name = at["layer_name"].iloc[0]
        for c, norm in enumerate(order):
            ax, run = axes[r, c], at[(at["norm"] == norm) & (at["unit"] == unit)]
            if run.empty:
                raise ValueError(f"no ics_activations rows for {norm}, layer {layer}, "
                                 f"unit {unit}")
            curves = _curves(run[run["seed"] == run["seed"].min()])
            x = curves.index.to_numpy(dtype=float)
            for (lo, hi), alpha, _ in BANDS:
                ax.fill_between(x, curves[lo], curves[hi], color=palette[norm], alpha=alpha,
                                lw=0)
            ax.plot(x, curves[MEDIAN], color=palette[norm], marker=".")
            step_axis(ax, steps)
            if r == 0:
                ax.set_title(norm)
            if r < len(layers) - 1:
                ax.set_xlabel("")
            ax.set_ylabel(f"layer {layer} ({name}),\nunit {unit}: activation" if c == 0
                          else "")
    _legend(axes[0, -1])
    fig.suptitle(title(df, "distribution of a unit's normalizer output over training "
                           "(probe batch, first seed; cf. Santurkar Fig. 2)"))
    return finish(fig)


def activations_measured(config: dict, experiment: str) -> bool:
    """Whether the study's ``ics`` options give the table rows: ``activation_units: 0`` turns
    them off (the default is the options class's)."""
    section = config.get("ics") or {}
    return int(section.get("activation_units",
                           ics_options.Options.activation_units)) > 0


register(Family(
    "ics_activations", draw, tables=("ics_activations",), module="ics_activations",
    in_experiment=activations_measured, caption=(
        "Distribution of one sampled unit's activation over training (cf. Santurkar Figs. 2 "
        "and 6): the output of the hidden layer's normalizer (the batch-normalized activation "
        "before the nonlinearity, noisy BN's noise included; the linear/conv output without a "
        "normalizer) on the fixed probe batch in train mode, over the batch (and height, width "
        "for conv layers), at each checkpoint step (symlog axis). Rows: the first, middle and "
        "last hidden layer; columns: normalizers; first seed, the first sampled unit. Line: "
        "the median; dark band: the 25th to 75th percentile; light band: the 5th to 95th "
        "percentile (quantiles over the probe batch, not intervals over seeds). Each panel "
        "has its own y scale. A stable distribution keeps its bands in place; noisy BN's "
        "noise moves them at every step by construction."),
))
