"""Claims that compare runs of *different* experiments (Luo et al. §5: BN at a large vs a normal
batch size, with vs without dropout).

A normalizer claim pairs two normalizers inside one experiment, seed by seed. A
:class:`Contrast` pairs two experiments instead: the arm is the runs whose table ``column`` has
the value ``value``, the baseline those with ``baseline``, both named in the contrast (the values
the paper compares, e.g. batch sizes 1024 and 128): a run at any other value is no side of the
contrast, so adding one (a larger batch, another dropout rate) leaves every row as it was. The
two sides agree on everything else that matters: the dataset, the normalizer and every ``match``
column (e.g. the architecture and the dropout rate when the batch size is contrasted; the
architecture, the batch size and the training schedule, ``training_schedule``, when the dropout
rate is), so that a row pairs only runs that differ in what the contrast varies. ``where`` keeps
only runs whose columns have the given values (e.g. runs whose learning rate was scaled with the
batch size, Luo's protocol, so that an unrelated pair of batch sizes elsewhere in a study is not
read as a test of the claim). Runs are paired by seed, as in every claim; the row names the
arm's experiment and the baseline's (``baseline``); an arm experiment with several baseline
experiments that match it has a row for each.

The columns come from the claim's table, one value per run (the generalization table's ``arch``,
``dropout``, ``train_batch_size``, ``lr_batch_scaled``, ``training_schedule``; sweep axes are
columns too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

KEYS = ["experiment", "dataset", "model", "norm", "seed"]


@dataclass(frozen=True)
class Contrast:
    column: str
    value: object
    baseline: object
    match: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)

    def __post_init__(self):
        for side in ("value", "baseline"):
            v = getattr(self, side)
            if v is None or isinstance(v, str) and v in ("largest", "smallest"):
                raise ValueError(f"contrast {side}={v!r}: name the {self.column} the paper "
                                 "compares (a value, not whatever extreme a study has)")
        if _equal(self.value, self.baseline):
            raise ValueError(f"contrast {self.column}: value and baseline are both "
                             f"{self.value!r}; allowed: two different values")

    def describe(self) -> str:
        text = f"{self.column} {self.value} vs {self.baseline}"
        if self.match:
            text += f", same dataset, normalizer, {', '.join(self.match)}"
        if self.where:
            text += " (runs with " + ", ".join(f"{k} = {v}" for k, v in self.where.items()) + ")"
        return text


@dataclass(frozen=True)
class Pair:
    """One arm experiment against one baseline experiment, for one dataset and normalizer."""

    experiment: str
    baseline: str
    dataset: str
    model: str
    norm: str
    arm_values: pd.Series  # per seed
    base_values: pd.Series  # per seed


def _equal(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def pairs(contrast: Contrast, values: pd.Series, table: pd.DataFrame,
          norms: tuple[str, ...]) -> list[Pair] | str:
    """The contrast's pairs among per-run ``values`` (indexed by :data:`KEYS`) of ``norms``, the
    run columns read from ``table``; a string saying why there are none when the table lacks a
    column the contrast needs."""
    needed = [contrast.column, *contrast.match, *contrast.where]
    missing = [c for c in needed if c not in table]
    if missing:
        return f"the table has no column {', '.join(missing)}"
    runs = table.groupby(KEYS, observed=True)[list(dict.fromkeys(needed))].first()
    df = values.rename("value").to_frame().join(runs, how="inner").reset_index()
    for col, want in contrast.where.items():
        df = df[[_equal(v, want) for v in df[col]]]
    df = df[df["norm"].isin(norms) & df[contrast.column].notna()]
    out = []
    for _, g in df.groupby(["dataset", "norm", *contrast.match], dropna=False, observed=True):
        arm = g[[_equal(v, contrast.value) for v in g[contrast.column]]]
        base = g[[_equal(v, contrast.baseline) for v in g[contrast.column]]]
        for exp, a in arm.groupby("experiment"):
            for bexp, b in base.groupby("experiment"):
                out.append(Pair(str(exp), str(bexp), str(a["dataset"].iloc[0]),
                                str(a["model"].iloc[0]), str(a["norm"].iloc[0]),
                                a.set_index("seed")["value"], b.set_index("seed")["value"]))
    return out
