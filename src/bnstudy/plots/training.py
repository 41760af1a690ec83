"""Training curves per experiment: loss (and accuracy) over steps, hue = normalizer, seed bands."""

from __future__ import annotations

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
    step_axis,
    title,
)
from bnstudy.plots.bands import GEOMETRY, band

# imported on first use (bnstudy.lazy): importing this module stays cheap
sns = lazy.module("seaborn")


def draw(frames, options):
    df = frames[0]
    df = df[df["split"].isin(["train", "test"])]
    classification = df["accuracy"].notna().any()
    ncols = 2 if classification else 1
    fig, axes = figure(1, ncols, height=4.2)
    order = norm_order(df)
    ax = axes[0, 0]
    kw, log = band(df["loss"])
    sns.lineplot(df, x="step", y="loss", hue="norm", hue_order=order,
                 palette=norm_palette(order), style="split",
                 style_order=["train", "test"], **kw, ax=ax, legend=not classification)
    if log:
        ax.set_yscale("log")
    ax.set_title("loss (mean over seeds, 95% Student-t CI band)" if not log else
                 "loss (geometric mean over seeds, 95% CI band of the log)")
    if classification:
        sns.lineplot(df, x="step", y="accuracy", hue="norm", hue_order=order,
                     palette=norm_palette(order), style="split",
                     style_order=["train", "test"], **band([], bounds=(0.0, 1.0))[0],
                     ax=axes[0, 1], legend=True)
        axes[0, 1].set_title("accuracy")
    for a in axes[0]:
        step_axis(a, df["step"].unique())
    fig.suptitle(title(df, "training curves"))
    return finish(fig)


register(Family(
    "training_curves", draw, tables=("training",), module="training",
    # teacher-student runs: one per data draw; the teacher_student figures show them pooled
    skip_datasets=("teacher_student",),
    caption=(
        "Loss (left) and accuracy (right, classification only) on the whole train (solid) and "
        "test (dashed) sets, evaluated in eval mode at the evaluation steps; bands are 95% "
        "Student-t CIs over seeds (" + GEOMETRY + "). Look for which normalizers train faster "
        "and to a lower loss "
        "at the same learning rate, and whether any diverge (their curves stop)."),
))

register_section(Section(
    "training", "Training", (
        "Every run is trained with plain SGD (the experiment's learning rate, momentum, weight "
        "decay and batch size) from the same seeded initialization and batch order for every "
        "normalizer. Losses are evaluated on the full train and test sets in eval mode, so BN "
        "uses its running statistics."),
    table="training", families=("training_curves",),
    summary_columns=("loss", "accuracy"), summary_filter={"last_step": True},
    rank=60,
))
