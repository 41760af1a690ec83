"""Batch size, gamma decay and dropout: Luo et al. §5 (Fig. 2a-b, e-h) across experiments.

Luo et al. train the same network with BN at a normal batch size (M = 128), at a large one
(M = 1024, the learning rate scaled with M), at the large one with dropout after each residual
block, and with population normalization + gamma decay; larger batches weaken the regularization
of the batch statistics, so gamma^2 grows and the validation loss rises. These runs are separate
experiments, so the per-experiment figures cannot set them side by side: this figure does, for
every dataset and architecture trained with the learning rate scaled with the batch size at two
or more (batch size, dropout) settings. An *arm* is one (normalizer, batch size, dropout).
"""

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
    register,
    register_section,
    seed_ci,
)
from bnstudy.plots.bands import band
from bnstudy.plots.colors import other_colors
from bnstudy.tables.intervals import mean_ci

sns = lazy.module("seaborn")

RUN = ["experiment", "dataset", "model", "norm", "seed"]


def arm_name(norm: str, batch: int, dropout: float) -> str:
    return f"{norm}, M={int(batch)}" + (f", dropout {dropout:g}" if dropout else "")


def arms(gen: pd.DataFrame) -> pd.DataFrame:
    """One row per run of the compared groups (lr scaled with the batch; a dataset and
    architecture with two or more batch-size/dropout settings): its final row and ``arm``."""
    if gen.empty or not {"train_batch_size", "dropout", "lr_batch_scaled", "arch"} <= set(gen):
        return gen.iloc[0:0].assign(arm=[])
    d = gen[gen["lr_batch_scaled"].astype(bool)]
    last = d.groupby(RUN)["step"].transform("max")
    d = d[d["step"] == last].copy()
    settings = d.groupby(["dataset", "arch"])[["train_batch_size", "dropout"]].apply(
        lambda g: len(g.drop_duplicates()))
    keep = settings[settings >= 2].index
    d = d[pd.MultiIndex.from_frame(d[["dataset", "arch"]]).isin(keep)].copy()
    d["arm"] = [arm_name(n, b, p) for n, b, p in zip(d["norm"], d["train_batch_size"],
                                                     d["dropout"], strict=True)]
    return d.sort_values(["dataset", "arch", "train_batch_size", "dropout", "norm", "seed"])


def compared(config: dict) -> bool:
    """Whether a study trains some dataset and architecture, with the learning rate scaled with
    the batch, at two or more (batch size, dropout) settings, and measures generalization."""
    if "generalization" not in config:
        return False
    settings: dict[tuple, set] = {}
    for e in config["experiments"].values():
        train, model = config["trainings"][e["training"]], config["models"][e["model"]]
        if train.get("lr_reference_batch") is None or "generalization" not in e.get(
                "measures", ["generalization"]):
            continue
        settings.setdefault((e["dataset"], model["arch"]), set()).add(
            (train.get("batch_size"), float(model.get("dropout", 0.0))))
    return any(len(v) > 1 for v in settings.values())


def _curves(train: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Train- and test-loss histories of ``runs``, against samples seen (step x batch size):
    the generalization gap is Fig. 2's point. Only the history's own columns are taken: a
    study's sweep axes are columns of every table, and one may be named like the figure's
    (luo.yaml's ``arm``)."""
    d = train.loc[train["split"].isin(["train", "test"]), [*RUN, "step", "split", "loss"]].merge(
        runs[[*RUN, "arm", "train_batch_size"]].drop_duplicates(RUN), on=RUN)
    d["samples"] = d["step"] * d["train_batch_size"] / 1000.0
    return d


def draw(frames, options):
    gen, train = frames
    runs = arms(gen)
    if runs.empty:
        raise ValueError("no dataset/architecture trained with the lr scaled with the batch at "
                         "two or more batch-size/dropout settings")
    groups = list(runs.groupby(["dataset", "arch"], sort=False))
    fig, axes = figure(len(groups), 3, height=3.9)
    for row, ((ds, arch), g) in zip(axes, groups, strict=True):
        # arms are numbered: the x ticks of the right panels, the legend's labels
        names = {a: f"{i + 1}: {a}" for i, a in enumerate(dict.fromkeys(g["arm"]))}
        g = g.assign(arm=g["arm"].map(names))
        order = list(names.values())
        palette = dict(zip(order, other_colors(len(order)), strict=True))  # no norms
        curves = _curves(train, g)
        kw, log = band(curves["loss"], ratio=0.0)
        sns.lineplot(curves, x="samples", y="loss", hue="arm", hue_order=order,
                     palette=palette, style="split", style_order=["train", "test"], **kw,
                     ax=row[0], legend=False)
        if log:
            row[0].set_yscale("log")
        row[0].set(xlabel="samples seen (thousands)", ylabel="loss",
                   title=f"{ds} / {arch}: train (solid) and test (dashed) loss")
        for ax, col in ((row[1], "test_loss"), (row[2], "gamma_sq")):
            sns.pointplot(g, x="arm", y=col, hue="arm", order=order, hue_order=order,
                          palette=palette, errorbar=seed_ci, linestyle="none", ax=ax,
                          legend=ax is row[2])
            sns.stripplot(g, x="arm", y=col, order=order, color="black", size=3, ax=ax)
            if (g[col] > 0).any():
                ax.set_yscale("log")
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels([str(i + 1) for i in range(len(order))])
            ax.set(xlabel="arm (numbered in the legend)", ylabel=label(col),
                   title=f"final {label(col)}")
    fig.suptitle("Batch size, gamma decay and dropout (Luo et al. §5): mean and 95% Student-t "
                 "CI over seeds")
    return finish(fig)


def findings(frames) -> str:
    runs = arms(frames.get("generalization", pd.DataFrame()))
    if runs.empty:
        return ""
    parts = []
    for (ds, arch), g in runs.groupby(["dataset", "arch"], sort=False):
        items = []
        for arm, a in g.groupby("arm", sort=False):
            m, lo, hi, n = mean_ci(a["test_loss"].to_numpy())
            gm = np.nanmean(a["gamma_sq"]) if a["gamma_sq"].notna().any() else np.nan
            items.append(f"{arm}: test loss {m:.3g} [{lo:.3g}, {hi:.3g}] (n={n})"
                         + (f", gamma² {gm:.3g}" if np.isfinite(gm) else ""))
        parts.append(f"{ds} / {arch}: " + "; ".join(items))
    return ". ".join(parts) + "."


register(Family(
    "batch_regularization", draw, tables=("generalization", "training"),
    module="batch_regularization", scope="study", in_study=compared,
    caption=("Luo et al. §5 across experiments, one row per dataset/architecture trained with "
             "the learning rate scaled with the batch size: train (solid) and test (dashed) loss "
             "during training against the samples seen (left; log scale: the gap between them "
             "is the generalization gap of Luo's Fig. 2), the final test loss (middle) and the "
             "normalizers' gamma² (right: mean over layers of the mean over units; none for "
             "normalizers without a learned scale) per arm (normalizer, batch size M, dropout); "
             "means with 95% Student-t CIs over seeds, dots are single seeds."),
))

register_section(Section(
    "batch_regularization", "Batch size, gamma decay and dropout (Luo §5)", (
        "BN's regularization comes from the noise of its batch statistics (Luo et al.: BN = "
        "population normalization + gamma decay), so it weakens as the batch grows: gamma² "
        "should grow and the validation loss rise from M = 128 to M = 1024, population "
        "normalization + gamma decay should generalize like BN, and dropout after each "
        "residual block should restore some of the lost regularization at M = 1024. The "
        "ledger's luo_large_batch, luo_gamma_batch, luo_dropout and luo_pn rows test these."),
    table="generalization", families=("batch_regularization",), findings=findings,
    rank=50,
))
