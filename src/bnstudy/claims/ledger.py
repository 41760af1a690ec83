"""The claims ledger: each claim of the papers (:mod:`bnstudy.claims.declared`), and the study's
verdict from its own numbers.

Most claims compare a normalizer with a baseline (``none`` unless stated) in one experiment on
one quantity, paired by seed: for each seed the quantity is reduced to one number per run (the
reduction is stated in ``quantity``), the per-seed effect is ``metric(norm) - metric(baseline)``
(a log ratio where ``log`` is stated), and the ledger reports the rule's estimate (``effect``:
the Hodges-Lehmann shift of the paired differences; their mean is ``effect_mean``) and its
interval at the row's level (:mod:`bnstudy.claims.decide.robust`: the skew-corrected t interval of
the mean and the exact signed-rank interval, each at half the level, intersected). A claim with a
``contrast`` pairs two experiments instead (Luo §5's batch sizes and dropout:
:mod:`bnstudy.claims.declare.contrast`); its rows name the baseline experiment. The outcome comes
from the interval alone, by the claim's stated rule and margin (``less``, ``more``, ``no_less``,
``no_more``, ``equivalent``: :mod:`bnstudy.claims.decide.rules`), in the words of
:mod:`bnstudy.claims.decide.outcomes`. ``no_less``'s one use, Santurkar's "BN does not reduce ICS",
compares on a log scale (``log((ics_bn + 1e-4) / (ics_none + 1e-4))``, margin ``log 1.25``:
contradicted iff BN's ICS is reliably below 0.8 times the baseline's), so that it can fail
whatever the baseline's level (above the floor); an absolute margin on ``1 - cos`` could not
once the baseline's ICS fell below it.

With fewer than two seeds a row has no interval (a test row becomes a ``one-seed
illustration``); without the data a claim needs (a normalizer or measure the study did not run)
it is ``not measured`` and says so. Study-level analyses (Luo's closed forms, Dannemann-Junike's
counterexample) contribute rows of their own whose rule is stated in the same way.

Columns beyond the numbers: ``role`` is ``test`` for a claim where the paper makes a prediction
the data could contradict, ``implementation check`` where the stated result holds by
construction (Proposition 2 at the first BN layer: there the batch is an exact sample of the
population the formula uses, so agreement checks the measurement, not the proposition), and
``beyond the paper`` where the row asks more than the paper claims (the ``prop2_deep_*`` rows:
Proposition 2 assumes i.i.d. inputs, which deeper layers do not see; Santurkar's claims on a
ResNet, which the paper sets aside: :mod:`bnstudy.claims.say.annotate`, which also writes the notes
on collapsed runs and on Luo §5's schedule); ``curve`` names the closed form and constant a
Luo row is compared with (zeta, its multiple of 1/M, the ridge convention). The per-run metrics
are in :mod:`bnstudy.claims.values.metrics` (Santurkar, Luo) and
:mod:`bnstudy.claims.values.jitter`.

A row depends on the compared pair's runs only: a normalizer claim's metric is computed on the
table's rows of that experiment and those two normalizers (a metric that pools experiments under
a name of its own, Luo's loads, is computed once on the whole table). Every measured row also
carries ``effect_sd`` (the paired differences' standard deviation), ``seeds_needed`` and
``detectable_effect`` (:mod:`bnstudy.claims.decide.power`), and ``p_value``, ``p_adjusted`` and
``adjusted_verdict`` (Holm over the study's measured rows that are not implementation checks:
:mod:`bnstudy.claims.decide.multiplicity`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from bnstudy.claims.decide import multiplicity, power
from bnstudy.claims.decide.dannemann import dannemann_claim
from bnstudy.claims.decide.rules import rule_text
from bnstudy.claims.declare import protocols as P
from bnstudy.claims.declare.claim import Claim
from bnstudy.claims.declared import CLAIMS
from bnstudy.claims.pairing import IDS, Levels, contrast_rows, norm_rows, unmeasured
from bnstudy.claims.say import beside, deviations
from bnstudy.claims.say.annotate import annotate
from bnstudy.claims.values import stage
from bnstudy.replication import budget

__all__ = ["CLAIMS", "IDS", "Claim", "dannemann_claim", "evaluate"]


def with_aliases(claims, setups: dict[str, dict] | None) -> tuple[Claim, ...]:
    """The claims, each that pairs a built-in normalizer with a baseline also read on the
    user's normalizers declared ``claims_as`` that built-in (a setup's ``claims_as``,
    :func:`bnstudy.claims.say.deviations.setups`): a user's normalizer is an arm like any other."""
    aliases: dict[str, set[str]] = {}
    for s in (setups or {}).values():
        for own, builtin in (s.get("claims_as") or {}).items():
            aliases.setdefault(builtin, set()).add(own)
    out = []
    for c in claims:
        extra = sorted({n for b in c.norms for n in aliases.get(b, ())} - set(c.norms))
        out.append(dataclasses.replace(c, norms=(*c.norms, *extra))
                   if extra and c.contrast is None else c)
    return tuple(out)


def evaluate(frames: dict[str, pd.DataFrame], level: float = 0.95,
             levels: dict[str, float] | None = None,
             setups: dict[str, dict] | None = None) -> pd.DataFrame:
    """The ledger of a study's tables ``frames`` at level ``level``; ``levels`` gives the
    experiments that added seeds in replication rounds the (higher) level of their stopping look
    (:func:`bnstudy.claims.decide.sequential.interval_levels`), used by every row over their runs;
    ``setups`` each experiment's setting (:func:`bnstudy.claims.say.deviations.setups`), compared
    with the claim's paper protocol in the ``deviations`` column."""
    rows = []
    at = Levels.of(level, levels)
    for c in with_aliases(CLAIMS, setups):
        base = {"claim_id": c.key, "paper": c.paper, "claim": c.claim, "quantity": c.quantity,
                "rule": rule_text(c.rule, c.margin),
                "margin": c.margin, "margin_source": c.margin_source,
                "paper_effect": np.nan if c.paper_effect is None else c.paper_effect,
                "baseline": c.baseline if c.contrast is None else c.contrast.describe(),
                "role": c.role, "curve": ""}
        df = frames.get(c.table)
        if df is None or df.empty:
            rows.append({**base, "verdict": "not measured", "note": f"no {c.table} table"})
            continue
        values = c.metric(df)
        if values.empty:
            rows.append({**base, "verdict": "not measured", "note": "no applicable rows"})
            continue
        found = (norm_rows if c.contrast is None else contrast_rows)(c, base, df, values, at)
        if isinstance(found, str) or not found:
            rows.append({**base, "verdict": "not measured",
                         "note": found if isinstance(found, str) else unmeasured(c)})
            continue
        rows.extend(found)
    rows.extend(dannemann_claim(frames.get("dannemann")))
    ledger = annotate(pd.DataFrame(rows), frames, {c.key: c.table for c in CLAIMS},
                      {c.key for c in CLAIMS if c.contrast is not None})
    tables = {c.key: c.table for c in CLAIMS}
    ledger = stage.add_notes(ledger, frames, tables,
                             {c.key for c in CLAIMS if getattr(c.metric, "early", False)})
    ledger = deviations.add_columns(
        ledger, {"dannemann": P.DANNEMANN, **{c.key: c.protocol for c in CLAIMS}}, tables, setups)
    ledger = beside.add_absolute(ledger, frames)
    rules = {c.key: (c.rule, c.margin) for c in CLAIMS}
    ledger = multiplicity.adjust(power.add_columns(ledger, level, rules), level, rules)
    # an undecided row whose seeds_needed its experiment's budget cannot buy says so
    ledger = budget.add_shortfalls(ledger, getattr(levels, "budgets", {}),
                                   getattr(levels, "arm_budgets", {}))
    return beside.add_lr_notes(ledger, setups)
