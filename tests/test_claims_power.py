"""The ledger's power columns (seeds_needed, detectable_effect) against a simulation, and its
Holm-adjusted verdicts."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bnstudy.claims import ledger as claims
from bnstudy.claims.decide import multiplicity, power, rules

CONTRA = "contradicted at this setting"  # the outcome words (claims/decide/outcomes.py)

LEVEL = 0.95


def _decisive_rate(mu, sd, n, rule, margin, reps=4000, seed=0):
    """The fraction of simulated studies of n paired seeds whose CI verdict is decisive."""
    x = np.random.default_rng(seed).normal(mu, sd, (reps, n))
    m, s = x.mean(1), x.std(1, ddof=1)
    half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * s / np.sqrt(n)
    verdicts = [rules.verdict(rule, lo, hi, margin) for lo, hi in zip(m - half, m + half,
                                                                      strict=True)]
    return np.mean([v != "undecided" for v in verdicts])


@pytest.mark.parametrize("rule, mu, sd, margin", [
    ("less", -0.5, 1.0, 0.0), ("more", 0.8, 1.0, 0.0), ("no_more", -0.2, 0.5, 0.1),
    ("equivalent", 0.35, 0.3, 0.1),  # outside the margin: CONTRA is the decision
])
def test_seeds_needed_resolves_four_in_five_studies(rule, mu, sd, margin):
    n = int(power.seeds_needed(rule, mu, sd, margin, LEVEL))
    assert 3 <= n < 100
    assert _decisive_rate(mu, sd, n, rule, margin) == pytest.approx(0.8, abs=0.035)
    assert _decisive_rate(mu, sd, n - 1, rule, margin, seed=1) < 0.8 + 0.02  # the smallest n


@pytest.mark.parametrize("n", [3, 5, 12])
def test_detectable_effect_is_resolved_four_in_five_times(n):
    delta = power.detectable_effect(1.0, n, LEVEL)
    assert _decisive_rate(delta, 1.0, n, "more", 0.0) == pytest.approx(0.8, abs=0.03)
    assert power.detectable_effect(2.0, n, LEVEL) == pytest.approx(2 * delta)  # sd units


def test_an_effect_on_the_boundary_needs_infinitely_many_seeds():
    assert power.seeds_needed("equivalent", 0.1, 1.0, 0.1, LEVEL) == np.inf
    assert power.seeds_needed("less", 0.0, 1.0, 0.0, LEVEL) == np.inf
    assert np.isnan(power.detectable_effect(np.nan, 1, LEVEL))


def _smoothness(bn, none):
    return pd.DataFrame([{"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                          "seed": s, "step": 0, "beta_eff": b, "grad_pred_max": b,
                          "loss_min": 1.0, "loss_max": 1.0 + b, "loss": 1.0, "grad_norm": 1.0}
                         for norm, vals in (("batchnorm", bn), ("none", none))
                         for s, b in enumerate(vals)])


def test_every_measured_row_has_its_power_from_the_paired_differences():
    bn, none = [1.0, 1.5, 0.9, 1.3], [2.0, 1.8, 2.6, 2.1]
    ledger = claims.evaluate({"smoothness": _smoothness(bn, none)})
    measured = ledger[ledger["verdict"] != "not measured"]
    assert len(measured) == 5 and measured["seeds_needed"].notna().all()  # 2 relative rows
    directional = measured["rule"].str.contains("absent")
    assert directional.all() and measured["seeds_needed_margin"].notna().all()
    assert measured["detectable_effect"].notna().all()
    row = measured.set_index("claim_id").loc["beta_smooth"]
    d = np.log(bn) - np.log(none)
    assert row["effect_sd"] == pytest.approx(d.std(ddof=1))
    assert row["seeds_needed"] == power.seeds_needed("less", d.mean(), d.std(ddof=1), 0.0, LEVEL)
    assert row["detectable_effect"] == pytest.approx(power.detectable_effect(d.std(ddof=1), 4,
                                                                             LEVEL))
    unmeasured = ledger[ledger["verdict"] == "not measured"]
    assert unmeasured["seeds_needed"].isna().all()


@pytest.mark.parametrize("rule", rules.RULES)
def test_a_rule_p_value_is_below_alpha_exactly_when_the_interval_decides(rule):
    """The rule's own p-values (rules.outcome_p: the skew-corrected t and the exact signed-rank
    parts, Bonferroni-combined) agree with its interval (robust.bounds): each outcome is reached
    exactly when its one-sided p-value is below alpha / 2, at any level."""
    rng = np.random.default_rng(3)
    alpha = 1 - LEVEL
    for i in range(400):  # normal differences, skewed ones, and blow-ups
        n, margin = int(rng.integers(2, 14)), float(rng.uniform(0.05, 0.5))
        d = rng.normal(rng.normal(0, 0.5), rng.uniform(0.05, 1.0), n)
        if i % 2:
            d = rng.normal(0, 0.3) + rng.choice([-1, 1]) * rng.lognormal(-1.0, 1.0, n)
        if i % 5 == 0:
            d[0] += rng.choice([-15, 15])
        eff = rules.paired_effect(pd.Series(d), pd.Series(np.zeros(n)), LEVEL)
        ps = rules.outcome_p(rule, d, margin)
        lo, hi = eff["ci_low"], eff["ci_high"]
        sup = {"less": hi < 0, "more": lo > 0, "no_less": lo > -margin, "no_more": hi < margin,
               "equivalent": -margin < lo and hi < margin}[rule]
        con = {"less": lo > 0, "more": hi < 0, "no_less": hi < -margin,
               "no_more": lo > margin, "equivalent": hi < -margin or lo > margin}[rule]
        assert (ps["p_supported"] < alpha / 2) == bool(sup), (rule, d, margin, ps, lo, hi)
        if rule != "equivalent":  # (its contradicted is one of two one-sided tests)
            assert (ps["p_contradicted"] < alpha / 2) == bool(con), (rule, d, margin, ps)
        if rule in ("less", "more"):
            gone = lo > -margin if rule == "less" else hi < margin
            assert (ps["p_absent"] < alpha / 2) == bool(gone), (rule, d, margin, ps)


def test_rule_p_value_is_the_paired_t_test():
    d = np.array([0.3, 0.5, 0.1, 0.4])
    p = multiplicity.rule_p_value("less", d.mean(), d.std(ddof=1), 4, 0.0)
    assert p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    p = multiplicity.rule_p_value("no_more", d.mean(), d.std(ddof=1), 4, 0.2)
    assert p == pytest.approx(stats.ttest_1samp(d, 0.2).pvalue)


def _ledger(ps, roles=None):
    """Rows whose one-sided evidence has the given two-sided p-values (rule 'more', n = 5)."""
    rows = []
    for i, p in enumerate(ps):
        t = stats.t.isf(p / 2, 4)
        rows.append({"claim_id": f"c{i}", "effect": t * 1.0 / np.sqrt(5), "effect_sd": 1.0,
                     "n_seeds": 5, "role": (roles or {}).get(i, "test"),
                     "verdict": "supported" if p < 0.05 else "undecided"})
    return pd.DataFrame(rows)


def test_holm_adjusted_verdicts():
    ps = [0.001, 0.02, 0.03, 0.04]  # each decisive alone
    rules_of = {f"c{i}": ("more", 0.0) for i in range(5)}
    out = multiplicity.adjust(_ledger(ps), LEVEL, rules_of)
    assert out["p_value"].to_numpy() == pytest.approx(ps, rel=1e-6)
    assert out["p_adjusted"].to_numpy() == pytest.approx([0.004, 0.06, 0.06, 0.06], rel=1e-6)
    assert list(out["adjusted_verdict"]) == ["supported"] + ["undecided"] * 3
    assert (out["verdict"] == "supported").all()
    # an implementation check is no member of the family: it keeps its verdict, the others
    # their adjusted p-values
    with_check = multiplicity.adjust(_ledger([*ps, 0.03], {4: "implementation check"}), LEVEL,
                                     rules_of)
    assert with_check["p_adjusted"].iloc[:4].to_numpy() == pytest.approx(out["p_adjusted"])
    assert with_check["adjusted_verdict"].iloc[4] == "supported"
    assert np.isnan(with_check["p_adjusted"].iloc[4])


@pytest.mark.parametrize("ps", [[0.001, 0.02, 0.03, 0.04], [0.5], [0.04, 0.01, 0.04, 0.3, 0.01],
                                [0.9, 0.8, 0.7, 1.0, 0.0], np.random.default_rng(0).uniform(
                                    0, 0.2, 37).tolist()], ids=["steps", "one", "ties",
                                                                "capped", "random"])
def test_holm_is_statsmodels_holm_bit_for_bit(ps):
    """Holm's adjustment (multiplicity.holm) against the reference implementation,
    statsmodels' multipletests: the same values to the last bit, ties and the cap at 1 too."""
    from statsmodels.stats.multitest import multipletests

    got = multiplicity.holm(ps)
    want = multipletests(ps, alpha=0.05, method="holm")[1]
    assert got.tobytes() == want.tobytes(), (got, want)


def test_a_ledger_adjustment_runs_no_full_garbage_collection(monkeypatch):
    """statsmodels' multipletests calls gc.collect() on every call: a full collection, 0.13 s
    in a process holding torch, on every ledger (each claims job, replication round and ledger
    a test computes). The adjustment calls none."""
    import gc

    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a, **k: calls.append(a) or 0)
    out = multiplicity.adjust(_ledger([0.001, 0.02, 0.03, 0.04]), LEVEL,
                              {f"c{i}": ("more", 0.0) for i in range(4)})
    assert out["p_adjusted"].notna().all()
    assert calls == []


def test_the_ledger_carries_adjusted_verdicts():
    ledger = claims.evaluate({"smoothness": _smoothness([1.0, 1.5, 0.9, 1.3],
                                                        [2.0, 1.8, 2.6, 2.1])})
    assert {"p_value", "p_adjusted", "adjusted_verdict"} <= set(ledger)
    nm = ledger[ledger["verdict"] == "not measured"]
    assert (nm["adjusted_verdict"] == "not measured").all()


def test_the_report_counts_adjusted_verdicts_and_shows_the_power_columns():
    from bnstudy.report import summary

    ledger = pd.DataFrame([
        {"claim_id": "beta_smooth", "claim": "c", "experiment": "e", "norm": "batchnorm",
         "baseline": "none", "verdict": "supported", "adjusted_verdict": "undecided",
         "effect": -1.0, "ci_low": -1.5, "ci_high": -0.5, "n_seeds": 3, "seeds_needed": 7.0,
         "detectable_effect": 0.81, "role": "test"},
        {"claim_id": "lipschitz", "claim": "c", "experiment": "e", "norm": "batchnorm",
         "baseline": "none", "verdict": "undecided", "adjusted_verdict": "undecided",
         "effect": 0.0, "ci_low": -1.0, "ci_high": 1.0, "n_seeds": 3,
         "seeds_needed": np.inf, "detectable_effect": 1.2, "role": "test"}])
    shown = summary.rows(ledger, {}, set())
    # (verdict, count, the words the page shows)
    assert [(v, n) for v, n, _ in summary.found(shown)["counts"]] == [("undecided", 2)]
    assert [(r["verdict"], r["adjusted"], r["seeds_needed"], r["detectable"]) for r in shown] == [
        ("supported", "undecided", "7", "0.81"), ("undecided", "undecided", "inf", "1.2")]
