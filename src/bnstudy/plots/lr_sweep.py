"""Learning-rate sweep: the final training loss of every run against its learning rate.

Santurkar et al. (Fig. 1, §1) show that BN lets a network train at learning rates where the
standard network diverges. Experiments of the same dataset and model that differ only in the
training setup's lr give that range here; diverged runs are drawn at the top of their panel.
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
    norm_order,
    norm_palette,
    register,
    register_section,
)
from bnstudy.plots.bands import band

# imported on first use (bnstudy.lazy): importing this module stays cheap
sns = lazy.module("seaborn")
mticker = lazy.module("matplotlib.ticker")


def final_losses(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run: lr, final train loss (inf when the run diverged), diverged."""
    keys = ["experiment", "dataset", "model", "norm", "seed"]
    rows = []
    for key, g in df.groupby(keys):
        train = g[g["split"] == "train"]
        last = train[train["step"] == train["step"].max()]
        diverged = bool(g["diverged"].any())
        loss = np.inf if diverged or last.empty else float(last["loss"].iloc[0])
        rows.append({**dict(zip(keys, key, strict=True)), "lr": float(g["lr"].iloc[0]),
                     "final_train_loss": loss, "diverged": diverged})
    return pd.DataFrame(rows)


def swept(config: dict) -> bool:
    """Whether some dataset/model/normalizer is trained at two or more learning rates."""
    lrs: dict[tuple, set] = {}
    for e in config["experiments"].values():
        lr = config["trainings"][e["training"]]["lr"]
        for norm in e["norms"]:
            lrs.setdefault((e["dataset"], e["model"], norm), set()).add(lr)
    return any(len(v) > 1 for v in lrs.values())


def draw(frames, options):
    runs = final_losses(frames[0])
    n_lr = runs.groupby(["dataset", "model", "norm"])["lr"].nunique()
    panels = sorted({k[:2] for k in n_lr[n_lr >= 2].index})  # only the swept dataset/models
    if not panels:
        raise ValueError("no dataset/model/normalizer is trained at two or more learning rates")
    fig, axes = figure(1, len(panels), height=4.0)
    order = norm_order(runs)
    for ax, (ds, model) in zip(axes[0], panels, strict=True):
        d = runs[(runs["dataset"] == ds) & (runs["model"] == model)].copy()
        finite = d.loc[np.isfinite(d["final_train_loss"]), "final_train_loss"]
        top = finite.max() * 2 if len(finite) else 1.0
        d["plotted"] = d["final_train_loss"].where(np.isfinite(d["final_train_loss"]), top)
        kw, log = band(finite, ratio=0.0)  # log axis for any all-positive final loss
        sns.lineplot(d[~d["diverged"]], x="lr", y="plotted", hue="norm", hue_order=order,
                     palette=norm_palette(order), marker="o", **kw, ax=ax,
                     legend=(ax is axes[0, -1]))
        div = d[d["diverged"]]
        if len(div):
            sns.scatterplot(div, x="lr", y="plotted", hue="norm", hue_order=order,
                            palette=norm_palette(order), marker="X",
                            s=90, legend=False, ax=ax)
            ax.axhline(top, color="grey", lw=0.8, ls=":")
            ax.text(ax.get_xlim()[0], top, " diverged", va="bottom", fontsize=8, color="grey")
        ax.set_xscale("log")
        lrs = sorted(d["lr"].unique())  # every learning rate labelled, not only the decades
        ax.set_xticks(lrs, [f"{lr:g}" for lr in lrs])
        ax.xaxis.set_minor_locator(mticker.NullLocator())
        if log:
            ax.set_yscale("log")
        ax.set_title(f"{ds} / {model}")
        ax.set_ylabel(label("final_train_loss"))
        ax.set_xlabel(label("lr"))
    fig.suptitle("learning-rate sweep: final training loss by learning rate")
    return finish(fig)


def findings(frames) -> str:
    runs = final_losses(frames["training"])
    parts = []
    for (ds, model, norm), g in runs.groupby(["dataset", "model", "norm"]):
        lrs = sorted(g["lr"].unique())
        if len(lrs) < 2:
            continue
        ok = sorted(g.loc[~g["diverged"], "lr"].unique())
        parts.append(f"{ds}/{model} {norm}: trained at {len(ok)} of {len(lrs)} learning rates "
                     f"(largest without divergence: {max(ok) if ok else 'none'})")
    if not parts:
        return "No dataset/model was trained at more than one learning rate in this study."
    return "; ".join(parts) + "."


register(Family(
    "lr_sweep", draw, tables=("training",), module="lr_sweep", scope="study", in_study=swept,
    seeds_by="lr",
    caption=("Final training loss of every run against its learning rate, one panel per "
             "dataset/model, lines are means over seeds with 95% Student-t CIs; crosses at the "
             "top mark "
             "runs that diverged. The range of learning rates a normalizer trains at is the "
             "span of its line."),
))

register_section(Section(
    "lr_sweep", "Learning-rate range", (
        "Experiments that share a dataset and a model but differ in the training lr form a "
        "learning-rate sweep (Santurkar et al.: BN allows larger learning rates)."),
    table="training", families=("lr_sweep",), findings=findings,
    rank=70,
))
