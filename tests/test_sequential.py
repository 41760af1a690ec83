"""Sequential verdicts over planned rounds of seeds (bnstudy.claims.decide.sequential)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

from bnstudy.claims.decide import robust, skew
from bnstudy.claims.decide import sequential as sq
from bnstudy.claims.decide import simulation as mc
from bnstudy.claims.decide.rules import RULES, paired_effect, verdict

ROUNDS = [3, 6, 12, 24]
MARGIN = 0.5
REPS = 40_000
# a rate at 0.05 has Monte Carlo standard error sqrt(0.05 * 0.95 / REPS) ~ 0.0011
MC_TOL = 3 * math.sqrt(0.05 * 0.95 / REPS)


def test_alpha_split_sums_to_alpha():
    for spending in sq.SPENDING:
        a = sq.look_alphas(ROUNDS, 0.95, spending)
        assert a.sum() == pytest.approx(0.05) and len(a) == 4
    assert sq.look_alphas(ROUNDS, 0.95, "equal") == pytest.approx([0.0125] * 4)
    assert sq.look_alphas(ROUNDS, 0.95, "linear") == pytest.approx(
        [0.05 * 3 / 24, 0.05 * 3 / 24, 0.05 * 6 / 24, 0.05 * 12 / 24])
    # Lan-DeMets O'Brien-Fleming: 2 - 2 Phi(z_{0.975} / sqrt(t)) spent by t = n_k / n_K
    spent = [2 * stats.norm.sf(1.959964 / math.sqrt(t)) for t in (1 / 8, 1 / 4, 1 / 2)]
    assert sq.look_alphas(ROUNDS, 0.95, "obf") == pytest.approx(
        np.diff([0, *spent, 0.05]), rel=1e-5, abs=1e-12)
    assert sq.look_alphas(ROUNDS)[0] < 1e-6 < sq.look_alphas(ROUNDS)[-1] - 0.04  # the default


@pytest.mark.parametrize("bad", [[], [3, 3], [6, 3], [1, 4], [3, 4.5], "abc", None])
def test_bad_rounds_are_named(bad):
    with pytest.raises(ValueError, match="rounds"):
        sq.check_rounds(bad)


def test_bad_spending_rule_level_and_too_few_seeds():
    with pytest.raises(ValueError, match="valid: obf, equal, linear"):
        sq.look_alphas(ROUNDS, 0.95, "pocock")
    with pytest.raises(ValueError, match="level"):
        sq.look_alphas(ROUNDS, 1.5)
    with pytest.raises(ValueError, match="valid: less, more"):
        sq.decide("smaller", np.zeros(3), ROUNDS)
    with pytest.raises(ValueError, match="first planned round"):
        sq.decide("less", np.zeros(2), ROUNDS)


def test_decide_looks_at_the_last_completed_round_only():
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, 10)
    d = sq.decide("less", x, ROUNDS, spending="equal")
    assert (d.look, d.n_seeds) == (1, 6)  # 10 seeds: the look at 6, the 4 extra ones unused
    assert d.effect == pytest.approx(robust.hodges_lehmann(x[:6]))
    # the ledger's interval: the skew-corrected t one at half the look's alpha (at 6 seeds the
    # signed-rank part cannot close at 1 - 0.0125 / 2: 1/64 > 0.003)
    assert (d.ci_low, d.ci_high) == pytest.approx(skew.bounds(
        x[:6].mean(), x[:6].std(ddof=1), skew.sample_skew(x[:6]), 6, 1 - 0.0125 / 2))
    assert d.skew == pytest.approx(stats.skew(x[:6]))
    assert d.look_level == pytest.approx(1 - 0.0125)
    assert d.verdict == "undecided" and not d.stop and d.next_seeds == 12
    assert "look 2 of 4" in d.guarantee()


def test_decide_stops_when_decided_or_at_the_last_round():
    # the default spending puts ~3e-8 on the first look: 3 seeds decide only an overwhelming
    # effect (t = 87 is not enough, t = 8700 is)
    assert sq.decide("less", -5 + 0.1 * np.arange(3), ROUNDS).verdict == "undecided"
    assert sq.decide("less", -5 + 0.1 * np.arange(3), ROUNDS, spending="equal").stop
    decided = sq.decide("less", -5 + 0.001 * np.arange(3), ROUNDS)
    assert decided.verdict == "supported" and decided.stop and decided.next_seeds is None
    last = sq.decide("less", np.random.default_rng(2).normal(0, 1, 24), ROUNDS)
    assert last.final and last.stop and last.next_seeds is None


def test_failed_runs_are_dropped_within_the_look():
    x = np.array([-1.0, np.nan, -1.2, -0.9, np.inf, -1.1, 7.0])
    d = sq.decide("less", x, ROUNDS)
    assert (d.look, d.n_seeds) == (1, 4)


def test_one_planned_round_is_the_ledgers_fixed_interval():
    rng = np.random.default_rng(3)
    for rule in RULES:
        x = rng.normal(0.3, 1.0, 8)
        d = sq.decide(rule, x, [8], MARGIN)
        ref = paired_effect(pd.Series(x), pd.Series(np.zeros(8)), 0.95)
        assert (d.ci_low, d.ci_high) == pytest.approx((ref["ci_low"], ref["ci_high"]))
        assert d.verdict == verdict(rule, ref["ci_low"], ref["ci_high"], MARGIN)


def test_vectorized_verdicts_match_the_ledgers_rule():
    rng = np.random.default_rng(4)
    lo = rng.normal(0, 1, 2000)
    hi = lo + rng.exponential(1.0, 2000)
    lo[:5] = np.nan
    for rule in RULES:
        codes = sq.verdict_codes(rule, lo, hi, MARGIN)
        assert [sq.CODES[int(c)] for c in codes] == [
            verdict(rule, a, b, MARGIN) for a, b in zip(lo, hi, strict=True)]


def _naive_error(rounds, reps, seed=0):
    """Stop at the first round whose ordinary 95% interval excludes 0 (true effect 0)."""
    x = np.random.default_rng(seed).normal(0.0, 1.0, size=(reps, rounds[-1]))
    hit = np.zeros(reps, dtype=bool)
    for n in rounds:
        m, s = x[:, :n].mean(1), x[:, :n].std(1, ddof=1)
        hit |= np.abs(m) > stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    return hit.mean()


def test_looking_every_round_at_a_fixed_level_inflates_the_error():
    assert _naive_error(ROUNDS, REPS) > 0.05 + MC_TOL  # the problem the alpha split solves


@pytest.mark.parametrize("spending", sq.SPENDING)
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("side", [1, -1])
def test_wrong_decisive_rate_at_the_margin_is_at_most_alpha(rule, spending, side):
    effect = mc.boundary(rule, MARGIN) if rule != "equivalent" else side * MARGIN
    r = mc.simulate(rule, effect, 1.0, ROUNDS, MARGIN, 0.95, spending, REPS, seed=11)
    # at 0, a less / more rule's "absent" (inside the margin) is right, not an error
    assert r["supported"] + r["not_supported"] <= 0.05 + MC_TOL, r
    assert r["stop_at"].sum() == pytest.approx(r["decisive"])
    if rule in ("less", "more"):  # at the margin in the paper's direction: absent is wrong
        edge = -MARGIN if rule == "less" else MARGIN
        m = mc.simulate(rule, edge, 1.0, ROUNDS, MARGIN, 0.95, spending, REPS, seed=12)
        assert m["absent"] + m["not_supported"] <= 0.05 + MC_TOL, m


def test_real_effect_decides_with_fewer_seeds_than_a_fixed_design_of_equal_power():
    effect, sd = -1.0, 1.0  # "less" with a true effect of one standard deviation
    r = mc.simulate("less", effect, sd, ROUNDS, 0.0, 0.95, "equal", REPS, seed=5)
    power = r["supported"]
    assert power > 0.95
    # the fixed design: one look at level 0.95, i.e. one-sided t at alpha/2, at the same power
    n_fixed = math.ceil(TTestPower().solve_power(effect_size=abs(effect) / sd, alpha=0.025,
                                                 power=power, alternative="larger"))
    tol = 3 * math.sqrt(power * (1 - power) / REPS)
    # the t-test's count, raised until the rule itself reaches that power in one look (the
    # Bonferroni split costs a seed or two: bnstudy.claims.decide.robust)
    while mc.simulate("less", effect, sd, [n_fixed], 0.0, 0.95, "equal", REPS,
                      seed=6)["supported"] < power - tol:
        n_fixed += 1
    # (0.85 with the plain Student-t interval; its skew-corrected hull is a little wider)
    assert r["expected_seeds"] < 0.9 * n_fixed, (r["expected_seeds"], n_fixed)


def test_simulation_is_deterministic():
    a = mc.simulate("more", 0.5, 1.0, ROUNDS, reps=1000, seed=9)
    b = mc.simulate("more", 0.5, 1.0, ROUNDS, reps=1000, seed=9)
    assert a["expected_seeds"] == b["expected_seeds"] and a["supported"] == b["supported"]


def test_summary_decision_matches_the_raw_one():
    x = np.random.default_rng(7).normal(-0.8, 1.0, 12)
    raw = sq.decide("less", x, ROUNDS)
    summ = sq.decide_summary("less", x.mean(), x.std(ddof=1), 12, ROUNDS, 2,
                             skew=stats.skew(x))
    # a summary has no ranks: its interval is the t part's alone, at the look's level (what a
    # ledger without the rule's own verdict is continued on: bnstudy.replication.policy)
    t_part = skew.bounds(x.mean(), x.std(ddof=1), stats.skew(x), 12, raw.look_level)
    assert (summ.ci_low, summ.ci_high) == pytest.approx(t_part)
    assert sq.decide_summary("less", -1.0, np.nan, 3, ROUNDS, 0).verdict == "undecided"
    with pytest.raises(ValueError, match="not a planned look"):
        sq.decide_summary("less", -1.0, 1.0, 3, ROUNDS, 4)
    with pytest.raises(ValueError, match="exceed"):
        sq.decide_summary("less", -1.0, 1.0, 7, ROUNDS, 1)
