"""A claim's measured rows, one row passed through the rooms (:mod:`bnstudy.claims`): a claim
(:class:`bnstudy.claims.declare.claim.Claim`) whose per-run values are paired, normalizers inside
one experiment (:func:`norm_rows`, each row computed from the compared pair's runs alone) or
experiments paired by a contrast (:func:`contrast_rows`), decided by the claim's rule
(:mod:`bnstudy.claims.decide`) and put in words (:mod:`bnstudy.claims.say`).
:mod:`bnstudy.claims.ledger` states the rules."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bnstudy.claims.decide import skew
from bnstudy.claims.decide.rules import outcome_p, paired_effect, verdict
from bnstudy.claims.decide.sequential import row_look
from bnstudy.claims.declare.claim import Claim
from bnstudy.claims.declare.contrast import pairs
from bnstudy.claims.say import words

IDS = ["experiment", "dataset", "model"]


@dataclass(frozen=True)
class Levels:
    """The level of a row's interval: ``base`` (the study's ``ci``), or, for a row whose runs
    come from an experiment that added seeds in replication rounds, the level ``1 - alpha_k`` of
    the look the row's own seeds were taken at (:func:`bnstudy.claims.decide.sequential.row_look` of
    its paired seeds: a row whose arms stopped at look 1 while other arms of the experiment went
    on is read at look 1's level, not the experiment's last). ``by_experiment`` holds each
    experiment's stopping look's level, ``looks`` its planned rounds and every look's level up
    to the stopping one (:func:`bnstudy.claims.decide.sequential.interval_levels`). A row over
    several
    experiments takes the highest of theirs."""

    base: float = 0.95
    by_experiment: tuple[tuple[str, float], ...] = ()
    looks: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...] = ()

    @classmethod
    def of(cls, base: float, by_experiment: dict | None = None) -> Levels:
        looks = getattr(by_experiment, "looks", {})
        return cls(float(base), tuple(sorted((by_experiment or {}).items())),
                   tuple((e, tuple(r), tuple(lv)) for e, (r, lv) in sorted(looks.items())))

    def at(self, experiments, n_seeds: int | None = None) -> float:
        """The level of a row over ``experiments``' runs with ``n_seeds`` paired seeds (None:
        each experiment's stopping look)."""
        own, plans = dict(self.by_experiment), {e: (r, lv) for e, r, lv in self.looks}
        out = [self.base]
        for e in map(str, experiments):
            if e in plans and n_seeds is not None:
                rounds, levels = plans[e]
                out.append(levels[min(row_look(rounds, n_seeds), len(levels) - 1)])
            elif e in own:
                out.append(own[e])
        return max(out)


def paired_seeds(arm: pd.Series, against: pd.Series) -> int:
    """The seeds both sides ran (failed runs included): the count that fixes a row's look."""
    return len(arm.index.intersection(against.index))


def measured_row(base: dict, c: Claim, level: float | Levels, arm: pd.Series,
                 against: pd.Series, runs_of=(), **where) -> dict:
    """A measured ledger row: the paired effect of ``arm`` against ``against`` (per seed), its
    interval at ``level`` (``interval_level``; a :class:`Levels` gives the level of the look of
    the row's paired seeds over the experiments ``runs_of``), the differences' skewness
    (``effect_skew``) and whether it is beyond normal differences' (``skew_flag``)."""
    if isinstance(level, Levels):
        level = level.at(runs_of, paired_seeds(arm, against))
    eff = paired_effect(arm, against, level)
    diff = (arm - against).dropna()
    eff.update(outcome_p(c.rule, diff.to_numpy(dtype=float), c.margin))
    flag = bool(eff["n_seeds"] >= 3 and skew.skew_flag(eff["effect_skew"], eff["n_seeds"]))
    note = "" if eff["n_seeds"] >= 2 else "fewer than 2 paired seeds"
    if flag:
        note = (f"paired differences skewed (skewness {eff['effect_skew']:.2g} at "
                f"{eff['n_seeds']} seeds, beyond normal's ±{skew.skew_limit(eff['n_seeds']):.2g})"
                f": the interval rests on its skewness correction")
    sides = {"scale": c.scale, "what": c.what, "norm": where.get("norm", ""),
             "baseline": c.versus or c.baseline}
    return {**base, **where, "value": float(arm.mean()), "baseline_value": float(against.mean()),
            **eff, "verdict": verdict(c.rule, eff["ci_low"], eff["ci_high"], c.margin),
            "in_words": words.effect_words(eff["effect"], eff["ci_low"], eff["ci_high"],
                                           **sides) + words.beside_paper(
                c.rule, eff["effect"], eff["ci_low"], eff["ci_high"], c.margin,
                c.paper_words, scale=c.scale),
            "verdict_means": words.rule_words(c.rule, c.margin, **sides),
            "note": note, "skew_flag": flag, "interval_level": float(level)}


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
        rows.append(measured_row(base, c, levels, by_norm[norm], against, runs_of,
                                 experiment=exp,
                                 dataset=ds, model=model, norm=norm,
                                 curve=c.curve(df, norm, exp) if c.curve else ""))
    return rows


def contrast_rows(c: Claim, base: dict, df: pd.DataFrame, values: pd.Series,
                  levels: Levels) -> list[dict] | str:
    """Rows of a claim that pairs experiments (:mod:`bnstudy.claims.declare.contrast`)."""
    found = pairs(c.contrast, values, df, c.norms)
    if isinstance(found, str):
        return found
    return [measured_row({**base, "baseline": p.baseline}, c, levels, p.arm_values,
                         p.base_values, [p.experiment, p.baseline], experiment=p.experiment,
                         dataset=p.dataset, model=p.model, norm=p.norm)
            for p in found]


def unmeasured(c: Claim) -> str:
    if c.contrast is not None:
        return (f"no two experiments of {', '.join(c.norms)} that differ in "
                f"{c.contrast.describe()}")
    runs = (f"both {c.baseline} and one of" if c.baseline is not None
            else "any of") + " " + ", ".join(c.norms)
    return f"no experiment runs {runs}"
