"""The ledger's rule against the rule it replaced (issue 46), on one study's ledger: the same
per-seed differences decided by today's rule (bnstudy.claims.decide.robust: skew-corrected t and
exact signed-rank, each at half the level) and by the old one (the skew-corrected t interval of the
mean alone, at the full level), each with Holm over the same family. Prints the decided counts
of the directional paper tests (rules less / more) and the rows whose outcome differs.

    python benchmarks/ledger_rules.py results/tables/claims.parquet [--old OLD_LEDGER]

``--old`` adds the ledger the previous code wrote from the same tables (its quantities and roles
as they were), row by row beside today's.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from bnstudy import io
from bnstudy.claims import ledger as claims
from bnstudy.claims.decide import multiplicity, rules, skew
from bnstudy.claims.decide import outcomes as O


def old_rule(ledger: pd.DataFrame, level: float = 0.95) -> pd.Series:
    """Each row's adjusted verdict under the old rule, from its summary columns."""
    spec = {c.key: (c.rule, c.margin) for c in claims.CLAIMS}
    alpha = 1 - level
    out, p = [], []
    for _, r in ledger.iterrows():
        rule = spec.get(r["claim_id"])
        n = r.get("n_seeds")
        if rule is None or pd.isna(n) or n < 2 or pd.isna(r.get("effect_sd")):
            out.append(O.outcome(r["verdict"]))
            p.append(np.nan)
            continue
        lv = float(r.get("interval_level", level))
        m = r.get("effect_mean", r["effect"])
        g = r.get("effect_skew", 0.0)
        lo, hi = skew.bounds(m, r["effect_sd"], g, int(n), lv)
        margin = rule[1] if rule[0] not in rules.DIRECTIONAL else 0.0
        out.append(rules.verdict(rule[0], lo, hi, margin))
        p.append(min(1.0, multiplicity.rule_p_value(rule[0], m, r["effect_sd"], int(n), margin,
                                                    g) * alpha / (1 - lv)))
    p = np.asarray(p)
    fam = np.isfinite(p) & (ledger["role"] != "implementation check").to_numpy()
    adj = np.full(len(p), np.nan)
    adj[fam] = multiplicity.holm(p[fam])
    return pd.Series([v if not fam[i] or adj[i] < alpha else O.UNDECIDED
                      for i, v in enumerate(out)], index=ledger.index)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ledger")
    ap.add_argument("--old", help="the previous code's ledger of the same tables")
    a = ap.parse_args()
    led = io.read_table(a.ledger)
    led = led[led["verdict"] != O.NOT_MEASURED].copy()
    spec = {c.key: c.rule for c in claims.CLAIMS}
    led["old_rule"] = old_rule(led)
    directional = led["claim_id"].map(spec).isin(rules.DIRECTIONAL) & (led["role"] == "test")
    d = led[directional]
    print(f"{len(d)} directional paper tests (rules less / more), family of "
          f"{int(led['p_adjusted'].notna().sum())} rows; decided after Holm:")
    print(f"  old rule (skew-corrected t alone): {int(d['old_rule'].isin(O.DECIDED).sum())}"
          f" {d['old_rule'].value_counts().to_dict()}")
    print(f"  new rule (t or signed-rank, each at half the level): "
          f"{int(d['adjusted_verdict'].isin(O.DECIDED).sum())}"
          f" {d['adjusted_verdict'].value_counts().to_dict()}")
    changed = led[led["old_rule"] != led["adjusted_verdict"]]
    for _, r in changed.iterrows():
        print(f"  {r['claim_id']} [{r.get('experiment')}: {r.get('norm')} vs {r.get('baseline')}]"
              f" n={r['n_seeds']}: old {r['old_rule']} -> new {r['adjusted_verdict']}"
              f" (HL {r['effect']:+.3g} [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}],"
              f" mean {r['effect_mean']:+.3g})")
    if a.old:
        old = io.read_table(a.old)
        key = ["claim_id", "experiment", "norm", "baseline"]
        m = old.merge(led, on=key, how="outer", suffixes=("_old", ""))
        for _, r in m.iterrows():
            before = r.get("adjusted_verdict_old")
            now = r.get("adjusted_verdict")
            before = O.outcome(before) if isinstance(before, str) else "(no row)"
            now = now if isinstance(now, str) else "(no row / not measured)"
            if before != now:
                print(f"  code: {r['claim_id']} [{r['experiment']}: {r['norm']}]"
                      f" {before} -> {now}")


if __name__ == "__main__":
    main()
