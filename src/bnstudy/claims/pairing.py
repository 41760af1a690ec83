"""A ledger claim (:class:`Claim`) and its measured rows: normalizers paired inside one
experiment (:func:`norm_rows`, each row computed from the compared pair's runs alone) or
experiments paired by a contrast (:func:`contrast_rows`). :mod:`bnstudy.claims.ledger` lists
the claims and states the rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from bnstudy.claims import words
from bnstudy.claims.contrast import Contrast, pairs
from bnstudy.claims.rules import paired_effect, verdict

IDS = ["experiment", "dataset", "model"]


@dataclass(frozen=True)
class Levels:
    """The level of a row's interval: ``base`` (the study's ``ci``), or, for a row whose runs
    come from an experiment that added seeds in replication rounds, that experiment's stopping
    look's level ``1 - alpha_k`` (higher: a wider interval;
    :func:`bnstudy.claims.sequential.interval_levels`). A row over several experiments takes
    the highest of theirs."""

    base: float = 0.95
    by_experiment: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, base: float, by_experiment: dict | None = None) -> Levels:
        return cls(float(base), tuple(sorted((by_experiment or {}).items())))

    def at(self, experiments) -> float:
        own = dict(self.by_experiment)
        return max([self.base, *(own[e] for e in map(str, experiments) if e in own)])


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str
    claim: str
    table: str
    quantity: str
    metric: Callable[[pd.DataFrame], pd.Series]  # table -> one value per (experiment, norm, seed)
    norms: tuple[str, ...]
    baseline: str | None = "none"  # None: the values themselves are the effect (one-sample)
    rule: str = "less"
    margin: float = 0.0
    role: str = "test"  # or "implementation check", "beyond the paper": see the docstring
    curve: Callable[[pd.DataFrame, str, str], str] | None = None  # (table, norm, experiment)
    contrast: Contrast | None = None  # pairs experiments instead of normalizers (contrast.py)
    # the row in words (claims/words.py): the quantity's short name, the effect's scale, and
    # the compared side where it is not "<baseline>'s" (a contrast's other experiment)
    what: str = ""
    scale: str = "log"
    versus: str = ""


def measured_row(base: dict, c: Claim, level: float, arm: pd.Series, against: pd.Series,
                 **where) -> dict:
    """A measured ledger row: the paired effect of ``arm`` against ``against`` (per seed), its
    interval at ``level`` (``interval_level``)."""
    eff = paired_effect(arm, against, level)
    sides = {"scale": c.scale, "what": c.what, "norm": where.get("norm", ""),
             "baseline": c.versus or c.baseline}
    return {**base, **where, "value": float(arm.mean()), "baseline_value": float(against.mean()),
            **eff, "verdict": verdict(c.rule, eff["ci_low"], eff["ci_high"], c.margin),
            "in_words": words.effect_words(eff["effect"], eff["ci_low"], eff["ci_high"],
                                           **sides),
            "verdict_means": words.rule_words(c.rule, c.margin, **sides),
            "note": "" if eff["n_seeds"] >= 2 else "fewer than 2 paired seeds",
            "interval_level": float(level)}


def _pair_values(c: Claim, df: pd.DataFrame, values: pd.Series):
    """``(experiment, dataset, model, norm, values of the pair)`` for each normalizer of the claim
    and experiment: the metric computed on the table's rows of that experiment and the compared
    normalizers alone. A metric that pools experiments under a name of its own (Luo's loads)
    is computed once on the whole table."""
    v = values.rename("value").reset_index()
    own = set(df["experiment"].astype(str)) if "experiment" in df else set()
    if not set(v["experiment"].astype(str)) <= own:  # pooled
        for (exp, ds, model), g in v.groupby(IDS):
            for norm in c.norms:
                yield exp, ds, model, norm, g, sorted(own)
        return
    for _, rows in df.groupby(df["experiment"].astype(str)):
        for norm in (n for n in c.norms if n in set(rows["norm"])):
            pair = {norm} if c.baseline is None else {norm, c.baseline}
            pv = c.metric(rows[rows["norm"].isin(pair)])
            if pv.empty:  # nothing this pair can be compared on (e.g. a set not measured)
                continue
            pv = pv.rename("value").reset_index()
            for (e, ds, model), g in pv.groupby(IDS):
                yield e, ds, model, norm, g, [e]


def norm_rows(c: Claim, base: dict, df: pd.DataFrame, values: pd.Series,
              levels: Levels) -> list[dict]:
    """Rows of a claim that pairs normalizers inside each experiment."""
    rows = []
    for exp, ds, model, norm, g, runs_of in _pair_values(c, df, values):
        by_norm = {n: s.set_index("seed")["value"] for n, s in g.groupby("norm")}
        if norm not in by_norm or (c.baseline is not None and c.baseline not in by_norm):
            continue
        against = 0.0 * by_norm[norm] if c.baseline is None else by_norm[c.baseline]
        rows.append(measured_row(base, c, levels.at(runs_of), by_norm[norm], against,
                                 experiment=exp,
                                 dataset=ds, model=model, norm=norm,
                                 curve=c.curve(df, norm, exp) if c.curve else ""))
    return rows


def contrast_rows(c: Claim, base: dict, df: pd.DataFrame, values: pd.Series,
                  levels: Levels) -> list[dict] | str:
    """Rows of a claim that pairs experiments (:mod:`bnstudy.claims.contrast`)."""
    found = pairs(c.contrast, values, df, c.norms)
    if isinstance(found, str):
        return found
    return [measured_row({**base, "baseline": p.baseline}, c,
                         levels.at([p.experiment, p.baseline]), p.arm_values,
                         p.base_values, experiment=p.experiment, dataset=p.dataset,
                         model=p.model, norm=p.norm)
            for p in found]


def unmeasured(c: Claim) -> str:
    if c.contrast is not None:
        return (f"no two experiments of {', '.join(c.norms)} that differ in "
                f"{c.contrast.describe()}")
    runs = (f"both {c.baseline} and one of" if c.baseline is not None
            else "any of") + " " + ", ".join(c.norms)
    return f"no experiment runs {runs}"
