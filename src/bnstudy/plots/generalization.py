"""Generalization per experiment: final train/test loss and accuracy, and their gaps."""

from __future__ import annotations

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
    seed_ci,
    title,
)

# imported on first use (bnstudy.lazy): importing this module stays cheap
sns = lazy.module("seaborn")


def draw(frames, options):
    df = frames[0]
    classification = df["test_accuracy"].notna().any()
    cols = ["loss_gap", "test_loss"] + (["accuracy_gap", "test_accuracy"] if classification else [])
    fig, axes = figure(1, len(cols), height=3.8)
    order = norm_order(df)
    for ax, col in zip(axes[0], cols, strict=True):
        sns.barplot(df, x="norm", y=col, order=order, hue="norm", hue_order=order,
                    palette=norm_palette(order), errorbar=seed_ci, ax=ax, alpha=0.6,
                    legend=False)
        sns.stripplot(df, x="norm", y=col, order=order, color="black", size=4, ax=ax)
        ax.tick_params(axis="x", rotation=30)
        ax.set_title(label(col))
        ax.set_xlabel("")
        ax.set_ylabel(label(col))
    fig.suptitle(title(df, "generalization"))
    return finish(fig)


register(Family(
    "generalization_gap", draw, tables=("generalization",), module="generalization",
    # teacher-student runs: one per data draw; the teacher_student figures show them pooled
    skip_datasets=("teacher_student",),
    caption=(
        "Final generalization by normalizer: loss gap (test - train), test loss, and for "
        "classification the accuracy gap (train - test) and test accuracy; bars are means with "
        "95% Student-t CIs over seeds, dots are single seeds. Diverged runs have no bar."),
))

register_section(Section(
    "generalization", "Generalization", (
        "Measured at each run's last checkpoint on the whole train and test sets, in eval mode; "
        "the BN statistics used are recorded in the table's bn_statistics column."),
    table="generalization", families=("generalization_gap",),
    summary_columns=("train_loss", "test_loss", "loss_gap", "test_accuracy", "accuracy_gap"),
    rank=40,
))
