"""The throwaway measure's figure and report section (tests/test_extension.py)."""

from __future__ import annotations

from bnstudy import lazy
from bnstudy.plots import Family, Section, figure, finish, register, register_section

sns = lazy.module("seaborn")


def draw(frames, options):
    df = frames[0]
    fig, axes = figure(1, 1, height=3.5)
    sns.lineplot(df, x="step", y="weight_norm", hue="norm", style="layer_name", ax=axes[0][0])
    return finish(fig)


register(Family("weight_norms", draw, tables=("weight_norms",), module="weight_norms",
                caption="Weight norm of each layer over training, by normalizer."))
register_section(Section("weight_norms", "Weight norms", "Per-layer weight norms.",
                         table="weight_norms", families=("weight_norms",),
                         summary_columns=("weight_norm",), rank=95))
