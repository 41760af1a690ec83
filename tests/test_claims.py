import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bnstudy.claims import ledger as claims
from bnstudy.claims.decide import rules, skew
from bnstudy.claims.values import metrics as claims_metrics

CONTRA = "contradicted at this setting"  # the outcome words (claims/decide/outcomes.py)


def test_paired_effect_is_the_paired_t_interval_widened_for_skew():
    rng = np.random.default_rng(0)
    a = pd.Series(rng.normal(1.0, 0.3, 6), index=range(6))
    b = pd.Series(rng.normal(0.2, 0.3, 6), index=range(6))
    eff = rules.paired_effect(a, b, 0.95)
    d = (a - b).to_numpy()
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert eff["effect_mean"] == pytest.approx(d.mean())
    walsh = [(d[i] + d[j]) / 2 for i in range(6) for j in range(i, 6)]
    assert eff["effect"] == pytest.approx(np.median(walsh))  # Hodges-Lehmann
    assert eff["effect_skew"] == pytest.approx(stats.skew(d))
    # the rule's interval lies inside the skew-corrected t interval at half the level
    lo2, hi2 = skew.bounds(d.mean(), d.std(ddof=1), stats.skew(d), len(d), 0.975)
    assert lo2 - 1e-12 <= eff["ci_low"] and eff["ci_high"] <= hi2 + 1e-12
    # symmetric differences at 4 seeds: the signed-rank part cannot close (1/16 > 0.0125), so
    # the interval is the Student-t one at 97.5%
    sym = rules.paired_effect(pd.Series([0.1, 0.3, 0.5, 0.7]), pd.Series([0.0] * 4), 0.95)
    lo, hi = stats.t.interval(0.975, 3, loc=0.4, scale=stats.sem([0.1, 0.3, 0.5, 0.7]))
    assert (sym["ci_low"], sym["ci_high"]) == pytest.approx((lo, hi))
    assert eff["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1))
    assert eff["n_seeds"] == 6


def test_paired_effect_pairs_by_seed_and_drops_missing():
    a = pd.Series([1.0, 2.0, 3.0], index=[0, 1, 2])
    b = pd.Series([0.0, 1.0], index=[1, 2])
    assert rules.paired_effect(a, b, 0.95)["n_seeds"] == 2


@pytest.mark.parametrize("rule, lo, hi, margin, expected", [
    ("less", -2, -1, 0, "supported"), ("less", 1, 2, 0, CONTRA),
    ("less", -1, 1, 0, "undecided"), ("more", 1, 2, 0, "supported"),
    ("more", -2, -1, 0, CONTRA), ("more", -1, 1, 0, "undecided"),
    ("no_less", -0.01, 3, 0.02, "supported"), ("no_less", -1, -0.5, 0.02, CONTRA),
    ("no_less", -1, 1, 0.02, "undecided"), ("equivalent", -0.05, 0.05, 0.1, "supported"),
    ("equivalent", 0.2, 0.3, 0.1, CONTRA), ("equivalent", -0.05, 0.3, 0.1, "undecided"),
    ("no_more", -3, 0.01, 0.02, "supported"), ("no_more", 0.5, 1, 0.02, CONTRA),
    ("no_more", -1, 1, 0.02, "undecided"),
    ("less", np.nan, np.nan, 0, "undecided"),
])
def test_verdict_rules(rule, lo, hi, margin, expected):
    assert rules.verdict(rule, lo, hi, margin) == expected


def test_unknown_rule_names_the_valid_ones():
    with pytest.raises(ValueError, match="'fewer'.*less, more, no_less, no_more, equivalent"):
        rules.verdict("fewer", 0, 1, 0)


# Paired effects (norm minus baseline, one per seed) that put the CI in each verdict's region of
# a rule with margin m: clearly inside, clearly outside, and straddling the boundary.
def _effects(rule: str, verdict: str, m: float) -> np.ndarray:
    jitter = np.array([-1.0, 0.0, 1.0, 0.5, -0.5])
    centre = {("less", "supported"): -1.0, ("less", CONTRA): 1.0,
              ("more", "supported"): 1.0, ("more", CONTRA): -1.0,
              ("no_less", "supported"): 0.0, ("no_less", CONTRA): -m - 1.0,
              ("no_more", "supported"): 0.0, ("no_more", CONTRA): m + 1.0,
              ("equivalent", "supported"): 0.0, ("equivalent", CONTRA): m + 1.0}
    if verdict == "undecided":
        edge = {"less": 0.0, "more": 0.0, "no_less": -m, "no_more": m, "equivalent": m}[rule]
        return edge + 10.0 * jitter
    spread = (0.01 * m if rule in ("no_less", "no_more", "equivalent") and verdict == "supported"
              else 0.01)
    return centre[(rule, verdict)] + spread * jitter


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda c: c.key)
@pytest.mark.parametrize("verdict", ["supported", CONTRA, "undecided"])
def test_every_ledger_claim_can_return_each_verdict(monkeypatch, claim, verdict):
    """Each claim's rule and margin, through evaluate(), on synthetic per-run values: no claim
    is impossible to support, to fail, or to leave open."""
    eff = _effects(claim.rule, verdict, claim.margin)
    seeds = range(len(eff))
    norm = claim.norms[0]
    table = pd.DataFrame({"x": [0]})
    if claim.contrast is not None:  # two experiments that differ in the contrasted column
        k = claim.contrast
        idx = [(e, "d", "m", norm, s) for e in ("arm", "base") for s in seeds]
        vals = list(1.0 + eff) + [1.0] * len(eff)
        sides = {"arm": k.value, "base": k.baseline}  # the values the contrast names
        table = pd.DataFrame([{"experiment": e, "dataset": "d", "model": "m", "norm": norm,
                               "seed": s, k.column: sides[e], **dict.fromkeys(k.match, 0),
                               **k.where} for e in sides for s in seeds])
    elif claim.baseline is not None:
        idx = [("e", "d", "m", norm, s) for s in seeds]
        idx += [("e", "d", "m", claim.baseline, s) for s in seeds]
        vals = list(1.0 + eff) + [1.0] * len(eff)
    else:
        idx, vals = [("e", "d", "m", norm, s) for s in seeds], list(eff)
    series = pd.Series(vals, index=pd.MultiIndex.from_tuples(idx, names=[*claims.IDS, "norm",
                                                                         "seed"]))
    fake = dataclasses.replace(claim, metric=lambda df: series, curve=None)
    monkeypatch.setattr(claims, "CLAIMS", (fake,))
    ledger = claims.evaluate({claim.table: table})
    row = ledger[ledger["claim_id"] == claim.key].iloc[0]
    assert row["verdict"] == verdict, (row["effect"], row["ci_low"], row["ci_high"])


def _ics(ics_bn, ics_none):
    """An ics table: layer 1 (ignored) and layer 2 at two checkpoints, 1 - cos as given."""
    rows = []
    for norm, values in (("batchnorm", ics_bn), ("none", ics_none)):
        for seed, v in enumerate(values):
            for step in (0, 10):
                for layer, ics in ((1, 0.5), (2, v)):
                    rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                                 "seed": seed, "step": step, "layer": layer,
                                 "grad_cosine": 1.0 - ics})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ics_bn, expected", [
    ([5e-4, 6e-4, 4e-4, 5e-4], CONTRA),   # BN's ICS a tenth of the baseline's
    ([5e-3, 4.2e-3, 5.9e-3, 5.1e-3], "supported"),  # as large as the baseline's
    ([1e-4, 1.5e-2, 2e-4, 1.2e-2], "undecided"),
])
def test_ics_claim_can_fail_at_a_near_zero_baseline(ics_bn, expected):
    """The DLN regime: the standard net's ICS (1 - cos) is ~0.005, below an absolute margin of
    0.02; the relative rule still tells a tenfold reduction from none."""
    ledger = claims.evaluate({"ics": _ics(ics_bn, [5e-3, 4e-3, 6e-3, 5e-3])})
    row = ledger.set_index("claim_id").loc["ics_grad"]
    assert row["verdict"] == expected
    assert row["effect_mean"] == pytest.approx(np.mean(
        np.log((np.array(ics_bn) + 1e-4) / (np.array([5e-3, 4e-3, 6e-3, 5e-3]) + 1e-4))))


def _smoothness(beta_bn, beta_none):
    rows = []
    for norm, betas in (("batchnorm", beta_bn), ("none", beta_none)):
        for seed, beta in enumerate(betas):
            for step in (0, 10):
                rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                             "seed": seed, "step": step, "beta_eff": beta, "grad_pred_max": beta,
                             "loss_min": 1.0, "loss_max": 1.0 + beta, "loss": 1.0,
                             "grad_norm": 1.0})
    return pd.DataFrame(rows)


def test_ledger_verdicts_come_from_the_data():
    smooth = _smoothness([1.0, 1.1, 0.9, 1.05], [10.0, 12.0, 9.0, 11.0])
    ledger = claims.evaluate({"smoothness": smooth}).set_index("claim_id")
    assert ledger.loc["beta_smooth", "verdict"] == "supported"
    assert ledger.loc["beta_smooth", "effect"] == pytest.approx(
        np.mean(np.log([1.0, 1.1, 0.9, 1.05]) - np.log([10.0, 12.0, 9.0, 11.0])))
    flipped = claims.evaluate({"smoothness": _smoothness([10.0, 12, 9, 11], [1.0, 1.1, 0.9, 1.05])})
    assert flipped.set_index("claim_id").loc["beta_smooth", "verdict"] == CONTRA
    assert ledger.loc["lp_smooth", "verdict"] == "not measured"
    assert ledger.loc["ics_grad", "verdict"] == "not measured"


def _smooth_steps(bn, none, steps=None):
    """A smoothness table whose beta_eff (and friends) differ across checkpoints (at ``steps``,
    default 0, 1, ...)."""
    rows = []
    for norm, runs in (("batchnorm", bn), ("none", none)):
        for seed, per_step in enumerate(runs):
            for step, beta in zip(steps or range(len(per_step)), per_step, strict=True):
                rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                             "seed": seed, "step": step, "beta_eff": beta, "grad_pred_max": beta,
                             "loss_min": 1.0 if np.isfinite(beta) else np.inf,
                             "loss_max": 1.0 + beta, "loss": 1.0, "grad_norm": 1.0})
    return pd.DataFrame(rows)


def test_smoothness_is_the_mean_over_checkpoints_of_the_log():
    bn = [[1.0, 100.0], [1.2, 90.0], [0.9, 110.0]]  # geometric mean ~10, arithmetic ~50
    none = [[10.0, 10.0], [11.0, 11.0], [9.0, 9.0]]
    by = claims.evaluate({"smoothness": _smooth_steps(bn, none)}).set_index("claim_id")
    expected = np.mean([np.mean(np.log(b)) - np.mean(np.log(n))
                        for b, n in zip(bn, none, strict=True)])
    assert by.loc["beta_smooth", "effect_mean"] == pytest.approx(expected)
    assert by.loc["beta_smooth", "verdict"] == "undecided"  # the log of the mean: "not supp."


def test_a_blow_up_counts_as_the_worst_value():
    """BN blows up from its second checkpoint on in every seed: dropping those probes would
    leave only its smooth first checkpoints and support 'BN is smoother'. The checkpoints are
    steps 0, 1 and 4: grad_pred and lipschitz read the early ones (0 and 1, <= 25% of 4),
    beta_smooth all three."""
    bn = [[1.0, np.inf, np.inf], [1.1, np.inf, np.inf], [0.9, np.inf, np.inf]]
    none = [[5.0, 5.0, 5.0], [5.5, 5.5, 5.5], [4.5, 4.5, 4.5]]
    by = claims.evaluate({"smoothness": _smooth_steps(bn, none, (0, 1, 4))}).set_index("claim_id")
    worst = np.log(10 * 5.5)  # 10 x the largest finite beta_eff of the compared pair
    for key, n in (("beta_smooth", 3), ("grad_pred", 2), ("lipschitz", 2)):
        expected = np.mean([(np.log(b[0]) + (n - 1) * worst) / n - np.log(m[0])
                            for b, m in zip(bn, none, strict=True)])
        assert by.loc[key, "effect_mean"] == pytest.approx(expected), key
        assert by.loc[key, "verdict"] == CONTRA, key
        assert "blow-up" in by.loc[key, "quantity"]


def test_the_paper_tests_read_the_absolute_quantities_and_the_relative_ones_are_beyond():
    """Issue 46: the paper tests read the quantities Santurkar et al. plot (the absolute loss
    range, Figs. 4a / 10a; the absolute l2 gradient change, Fig. 4b); an arm that interpolates
    (loss ~1e-6) is compared on its own scale by rows of their own, beyond the paper: the loss
    variation over the point's loss, the gradient change over the point's gradient norm."""
    rows = []
    for norm, loss, var, gnorm in (("batchnorm", 1.0, 0.1, 1.0), ("none", 1e-6, 1e-8, 1e-3)):
        for seed in range(3):
            rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                         "seed": seed, "step": 0, "beta_eff": 1.0, "loss": loss,
                         "loss_min": loss, "loss_max": loss + var * (1 + 0.1 * seed),
                         "grad_norm": gnorm, "grad_pred_max": 0.5 * gnorm * (1 + 0.1 * seed)})
    by = claims.evaluate({"smoothness": pd.DataFrame(rows)}).set_index("claim_id")
    assert by.loc["lipschitz_rel", "effect"] == pytest.approx(np.log(0.1 / 1e-2))
    assert by.loc["grad_pred_rel", "effect"] == pytest.approx(0.0, abs=1e-9)
    assert "relative to the point's own" in by.loc["grad_pred_rel", "quantity"]
    assert "/ loss at the checkpoint" in by.loc["lipschitz_rel", "quantity"]
    assert (by.loc[["lipschitz_rel", "grad_pred_rel"], "role"] == "beyond the paper").all()
    # the absolute ones: BN's loss range 0.1 against 1e-8, its gradient change 1000x none's
    assert by.loc["lipschitz", "effect"] == pytest.approx(np.log(0.1 / 1e-8))
    assert by.loc["grad_pred", "effect"] == pytest.approx(np.log(1000.0))
    assert (by.loc[["lipschitz", "grad_pred"], "role"] == "test").all()
    assert by.loc["grad_pred", "margin_source"].startswith("paper: Santurkar et al.")
    assert "about 0.01x" in by.loc["grad_pred", "in_words"]


def test_single_seed_is_inconclusive():
    ledger = claims.evaluate({"smoothness": _smoothness([1.0], [10.0])}).set_index("claim_id")
    assert ledger.loc["beta_smooth", "verdict"] == "undecided"
    assert "fewer than 2" in ledger.loc["beta_smooth", "note"]


def _jitter(band16, band256, ghost256, ratio_mu, conv=False, deep=(5.0, 5.0, 5.0)):
    """A bn_jitter table: boundary rows at two batch sizes, and layer rows (first layer 1)."""
    rows = []
    ids = {"experiment": "e", "dataset": "d", "model": "m", "applicable": True}
    for seed in range(3):
        for step in (0, 100):
            for norm, bands in (("batchnorm", (band16[seed], band256[seed])),
                                ("ghost_batchnorm", (np.nan, ghost256[seed]))):
                for bsz, band in zip((16, 256), bands, strict=True):
                    rows.append({**ids, "norm": norm, "seed": seed, "step": step,
                                 "batch_size": bsz, "batch_size_effective": bsz,
                                 "layer": "boundary", "layer_index": 0, "band_fraction": band,
                                 "samples_per_stat": np.nan, "ratio_mu": np.nan,
                                 "ratio_sigma2": np.nan})
                    for li, r in ((1, ratio_mu[seed]), (2, deep[seed])):
                        rows.append({**ids, "norm": norm, "seed": seed, "step": step,
                                     "batch_size": bsz, "batch_size_effective": bsz,
                                     "layer": str(li), "layer_index": li, "band_fraction": np.nan,
                                     "samples_per_stat": bsz * (64 if conv else 1),
                                     "ratio_mu": r, "ratio_sigma2": r})
    return pd.DataFrame(rows)


def test_jitter_and_proposition2_claims_from_the_data():
    # per-seed log ratios without skew (3 seeds: a skewed sample's interval is far wider)
    bn = list(np.array([0.2, 0.25, 0.3]) * np.exp([1.3, 1.2, 1.1]))
    ghost = list(np.array([0.2, 0.25, 0.3]) * np.exp([0.9, 0.8, 0.7]))
    df = _jitter(bn, [0.2, 0.25, 0.3], ghost, [1.01, 0.99, 1.0])
    ledger = claims.evaluate({"bn_jitter": df})
    by = ledger.set_index(["claim_id", "norm"])
    assert by.loc[("jitter_batch", "batchnorm"), "verdict"] == "supported"
    assert by.loc[("jitter_batch", "batchnorm"), "effect"] == pytest.approx(
        np.mean(np.log(np.array(bn) / [0.2, 0.25, 0.3])))
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "effect"] == pytest.approx(
        np.mean(np.log(np.array(ghost) / [0.2, 0.25, 0.3])))
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "verdict"] == "supported"
    assert by.loc[("prop2_mu", "batchnorm"), "value"] == pytest.approx(
        np.mean(np.log([1.01, 0.99, 1.0])))  # layer 2's ratio of 5 is not used
    assert by.loc[("prop2_mu", "batchnorm"), "verdict"] == "supported"
    # the data against the paper: no batch-size effect, and a variance 50% off the formula
    # (ghost BN's per-seed log ratios -0.9, -0.8, -0.7: no skew for the interval to widen by)
    ghost_less = list(np.array([0.25, 0.2, 0.3]) * np.exp([-0.9, -0.8, -0.7]))
    flat = _jitter([0.2, 0.3, 0.25], [0.25, 0.2, 0.3], ghost_less, [1.5, 1.6, 1.55])
    by = claims.evaluate({"bn_jitter": flat}).set_index(["claim_id", "norm"])
    assert by.loc[("jitter_batch", "batchnorm"), "verdict"] == "undecided"
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "verdict"] == CONTRA
    assert by.loc[("prop2_sigma2", "batchnorm"), "verdict"] == CONTRA
    conv = claims.evaluate({"bn_jitter": _jitter([0.8] * 3, [0.2] * 3, [0.5] * 3, [1.0] * 3,
                                                 conv=True)}).set_index("claim_id")
    assert conv.loc["prop2_mu", "verdict"] == "not measured"  # conv layers: not a prediction


def test_proposition2_first_layer_is_a_check_and_deeper_layers_beyond_the_paper():
    df = _jitter([0.8, 0.9, 0.85], [0.2, 0.25, 0.3], [0.5, 0.6, 0.55], [1.01, 0.99, 1.0],
                 deep=(1.6, 1.5, 1.7))
    by = claims.evaluate({"bn_jitter": df}).set_index(["claim_id", "norm"])
    first, deep = by.loc[("prop2_mu", "batchnorm")], by.loc[("prop2_deep_mu", "batchnorm")]
    assert first["role"] == "implementation check" and "implementation check" in first["claim"]
    assert first["verdict"] == "supported"
    assert deep["role"] == "beyond the paper" and deep["verdict"] == CONTRA
    assert "beyond the paper" in deep["claim"]
    assert deep["effect_mean"] == pytest.approx(np.mean(np.log([1.6, 1.5, 1.7])))
    ok = claims.evaluate({"bn_jitter": _jitter([0.8] * 3, [0.2] * 3, [0.5] * 3, [1.0] * 3,
                                               deep=(1.01, 0.99, 1.0))})
    ok = ok.set_index(["claim_id", "norm"])
    assert ok.loc[("prop2_deep_sigma2", "batchnorm"), "verdict"] == "supported"


def test_proposition2_deep_rows_leave_out_a_linear_net():
    """In a deep linear net the layer after BN sees a batch mean fixed by beta: the empirical
    variance of mu_B is rounding error (log ratio ~ -32), not a test of Proposition 2."""
    dln = _jitter([0.8] * 3, [0.2] * 3, [0.5] * 3, [1.0] * 3, deep=(1e-14, 2e-14, 1e-14))
    by = claims.evaluate({"bn_jitter": dln}).set_index("claim_id")
    for key in ("prop2_deep_mu", "prop2_deep_sigma2"):
        assert by.loc[key, "verdict"] == "not measured", key
    assert (by.loc[["prop2_mu"], "verdict"] == "supported").all()  # the first layer: checked


def _luo(rel, rel_main, wn_rel):
    """A teacher_student table at alpha = 2: BN (M = 32), the paper's variance-only BN student
    (M = 32) and WN + gamma decay (full batch), three draws, as the measure writes them."""
    rows = []
    for d in range(3):
        common = {"dataset": f"ts{d}", "model": "unit", "seed": 0, "step": 100, "alpha": 2.0,
                  "N": 400, "P": 800, "S": 0.25, "lr": 0.1}
        rows.append({**common, "experiment": f"a2_d{d}_sgd", "norm": "batchnorm",
                     "batch_size": 32, "zeta": 3 / 64, "zeta_main": 1 / 64, "curve": "shrinkage",
                     "convention": None, "rel_error": rel[d], "rel_error_main": 0.3})
        rows.append({**common, "experiment": f"a2_d{d}_sgd", "norm": "weightnorm_varonly_bn",
                     "batch_size": 32, "zeta": 1 / 64, "zeta_main": 1 / 64, "curve": "shrinkage",
                     "convention": None, "rel_error": rel_main[d], "rel_error_main": rel_main[d]})
        rows.append({**common, "experiment": f"a2_d{d}_wn", "norm": "weightnorm_gamma_decay",
                     "batch_size": 800, "lr": 0.5, "zeta": 1 / 64, "zeta_main": np.nan,
                     "curve": "ridge", "convention": "loss", "rel_error": wn_rel[d],
                     "rel_error_main": np.nan})
    return pd.DataFrame(rows)


def test_luo_rows_name_their_curve_and_test_luos_own_claim_on_its_bn_student():
    df = _luo([0.2, 0.22, 0.21], [0.012, -0.008, 0.002], [0.01, 0.0, -0.01])
    by = claims.evaluate({"teacher_student": df}).set_index(["claim_id", "norm"])
    bn, main = by.loc[("luo_bn", "batchnorm")], by.loc[("luo_bn_main", "weightnorm_varonly_bn")]
    assert bn["verdict"] == CONTRA and main["verdict"] == "supported"
    assert main["effect"] == pytest.approx(np.mean([0.012, -0.008, 0.002]))
    assert bn["curve"] == "least squares shrunk by 1/(1 + zeta) at zeta = 0.04688 = 1.5/M, M = 32"
    assert bn["experiment"] == "alpha=2, M=32, lr=0.1, N=400, S=0.25 (pooled)"
    assert main["curve"] == ("WN + gamma decay closed form (ridge) at zeta = 0.01562 = 0.5/M, "
                             "M = 32, ridge lam = zeta")
    assert ("luo_bn_main", "batchnorm") not in by.index  # Luo's claim is about its own student
    assert by.loc[("luo_bn", "weightnorm_varonly_bn"), "verdict"] == "supported"
    wn = by.loc[("luo_wn", "weightnorm_gamma_decay")]
    assert wn["curve"].endswith("ridge lam = alpha zeta") and wn["verdict"] == "supported"
    assert wn["experiment"] == "alpha=2, M=full, lr=0.5, N=400, S=0.25 (pooled)"
    assert "alpha zeta" in wn["claim"]


def test_vanilla_rows_name_the_vanilla_curve_and_unmeasured_rows_what_is_missing():
    rows = [{"dataset": f"ts{d}", "model": "unit", "seed": 0, "step": 100, "alpha": 2.0,
             "experiment": f"a2_d{d}_gd", "norm": "none", "batch_size": 800, "zeta": 0.0,
             "zeta_main": np.nan, "convention": "paper", "rel_error": 0.01 * d,
             "rel_error_main": np.nan} for d in range(3)]
    by = claims.evaluate({"teacher_student": pd.DataFrame(rows)}).set_index("claim_id")
    assert by.loc["luo_sgd", "curve"] == "vanilla SGD closed form (minimum-norm least squares)"
    assert by.loc["luo_wn", "note"] == "no experiment runs any of weightnorm_gamma_decay"


def _dannemann(grad, resid, holds):
    return pd.DataFrame([
        {"record": "gradient", "method": "autograd_batchnorm1d", "grad_norm": grad},
        {"record": "final", "objective": "bn", "line_residual_normalized": resid},
        {"record": "lemma", "init": 0, "holds_reached": holds, "lhs_reached": 1.0, "rhs": 2.0}])


@pytest.mark.parametrize("grad, resid, holds, expected", [
    (0.36, 1e-12, False, "supported"), (1e-9, 1e-12, False, CONTRA),
    (0.36, 1e-12, True, CONTRA), (0.36, 1e-3, False, "undecided"),
])
def test_dannemann_rule_reaches_each_verdict(grad, resid, holds, expected):
    row = claims.dannemann_claim(_dannemann(grad, resid, holds))[0]
    assert row["verdict"] == expected and row["role"] == "test"


# -- Luo §5 and BN-Explained §5: claims over the generalization table ----------------------------

def _gen(rows):
    """A generalization table: one final row per (experiment, norm, seed) from
    ``(experiment, norm, arch, batch, dropout, scaled, [test_loss per seed], gamma_sq)``."""
    out = []
    for exp, norm, arch, bs, drop, scaled, losses, gamma in rows:
        for seed, loss in enumerate(losses):
            out += [{"experiment": exp, "dataset": "digits", "model": arch + ("_d" if drop else ""),
                     "norm": norm, "seed": seed, "step": s, "test_loss": loss * (2 if s == 0
                                                                               else 1),
                     "test_accuracy": 1 - loss, "gamma_sq": gamma * (1 + 0.01 * seed),
                     "arch": arch, "train_batch_size": bs, "dropout": drop,
                     "lr_batch_scaled": scaled, "training_schedule": "lr 0.05 x M/128"}
                    for s in (0, 100)]
    return pd.DataFrame(out)


LUO5 = _gen([
    ("r128", "batchnorm", "resnet18", 128, 0.0, True, [0.20, 0.22, 0.21], 1.0),
    ("r128", "population_norm", "resnet18", 128, 0.0, True, [0.19, 0.20, 0.21], 1.0),
    ("r1024", "batchnorm", "resnet18", 1024, 0.0, True, [0.30, 0.33, 0.31], 2.0),
    ("r1024d", "batchnorm", "resnet18", 1024, 0.1, True, [0.25, 0.27, 0.26], 2.0),
    ("cnn", "batchnorm", "cnn", 128, 0.0, True, [0.4, 0.4, 0.4], 1.0),
    ("cnn", "weightnorm", "cnn", 128, 0.0, True, [0.5, 0.52, 0.51], np.nan),
    ("cnn", "weightnorm_meanonly_bn", "cnn", 128, 0.0, True, [0.45, 0.46, 0.47], 1.0),
    # a batch pair whose lr was not scaled with the batch: not Luo's protocol, not a test
    ("mlp16", "batchnorm", "mlp", 16, 0.0, False, [0.1, 0.1, 0.1], 1.0),
    ("mlp256", "batchnorm", "mlp", 256, 0.0, False, [0.05, 0.06, 0.05], 1.0),
])


def test_luo_batch_and_dropout_claims_pair_the_right_experiments():
    ledger = claims.evaluate({"generalization": LUO5})
    by = ledger.set_index("claim_id")
    large = by.loc["luo_large_batch"]
    assert (large["experiment"], large["baseline"], large["norm"]) == ("r1024", "r128",
                                                                       "batchnorm")
    assert large["effect_mean"] == pytest.approx(
        np.mean(np.log([.30 / .20, .33 / .22, .31 / .21])))
    assert large["verdict"] == "supported"
    gamma = by.loc["luo_gamma_batch"]
    assert gamma["effect"] == pytest.approx(np.log(2.0)) and gamma["verdict"] == "supported"
    drop = by.loc["luo_dropout"]
    assert (drop["experiment"], drop["baseline"]) == ("r1024d", "r1024")
    assert drop["verdict"] == "supported" and drop["effect"] < 0
    pn = by.loc["luo_pn"]
    assert (pn["experiment"], pn["norm"], pn["baseline"]) == ("r128", "population_norm",
                                                              "batchnorm")
    # "PN outperformed BN": one-sided, lower; 0-9% lower over 3 seeds does not decide it
    assert pn["rule"].startswith("supported iff the CI of the effect lies below 0")
    assert pn["verdict"] == "undecided"
    halves = ledger[ledger["claim_id"] == "luo_bn_halves"].set_index("norm")
    assert set(halves.index) == {"batchnorm", "weightnorm_meanonly_bn"}
    assert (halves["verdict"] == "supported").all()


def test_contrast_claims_say_what_they_need():
    ledger = claims.evaluate({"generalization": LUO5.drop(columns=["lr_batch_scaled"])})
    row = ledger.set_index("claim_id").loc["luo_large_batch"]
    assert row["verdict"] == "not measured" and "lr_batch_scaled" in row["note"]
    only_128 = LUO5[LUO5["train_batch_size"] == 128]
    row = claims.evaluate({"generalization": only_128}).set_index("claim_id").loc["luo_dropout"]
    assert row["verdict"] == "not measured"
    assert row["note"].startswith("no two experiments of batchnorm that differ in dropout")


def test_final_log_leaves_out_diverged_and_scale_free_runs():
    d = LUO5.copy()
    d.loc[(d["experiment"] == "r128") & (d["seed"] == 0), "test_loss"] = np.nan  # diverged
    v = claims_metrics.final_log("test_loss")(d)
    assert ("r128", "digits", "resnet18", "batchnorm", 0) not in v.index
    assert v.loc[("r128", "digits", "resnet18", "batchnorm", 1)] == pytest.approx(np.log(0.22))
    g = claims_metrics.final_log("gamma_sq")(d)
    assert not any(k[3] == "weightnorm" for k in g.index)  # no gamma: left out, not log(NaN)


def test_jitter_augmentation_claim_is_a_difference_in_points():
    rows = _gen([("j", "batchnorm", "resnet9", 128, 0.0, False, [0.10, 0.12, 0.11], 1.0),
                 ("j", "batchnorm_jitter", "resnet9", 128, 0.0, False, [0.09, 0.11, 0.10], 1.0)])
    row = claims.evaluate({"generalization": rows}).set_index("claim_id").loc["jitter_aug"]
    assert row["effect"] == pytest.approx(1.0) and row["verdict"] == "supported"
    assert row["value"] == pytest.approx(90.0)


class _Recording(dict):
    """Frames that record which tables are asked for."""

    def __init__(self, *a):
        super().__init__(*a)
        self.asked = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)


def test_the_ledger_reads_exactly_the_tables_the_workflow_gives_it():
    """The claims job and the replication rounds take claims.reads.TABLES as inputs and no
    more: those must be every table evaluate() asks for (each claim's, training, dannemann)."""
    from bnstudy.claims.declare import reads

    frames = _Recording()
    claims.evaluate(frames)
    assert frames.asked == set(reads.TABLES)
    assert {c.table for c in claims.CLAIMS} | {"training", "dannemann"} == set(reads.TABLES)
