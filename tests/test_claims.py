import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bnstudy import claims


def test_paired_effect_matches_a_paired_t_interval():
    rng = np.random.default_rng(0)
    a = pd.Series(rng.normal(1.0, 0.3, 6), index=range(6))
    b = pd.Series(rng.normal(0.2, 0.3, 6), index=range(6))
    eff = claims.paired_effect(a, b, 0.95)
    d = (a - b).to_numpy()
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert eff["effect"] == pytest.approx(d.mean())
    assert (eff["ci_low"], eff["ci_high"]) == pytest.approx((lo, hi))
    assert eff["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1))
    assert eff["n_seeds"] == 6


def test_paired_effect_pairs_by_seed_and_drops_missing():
    a = pd.Series([1.0, 2.0, 3.0], index=[0, 1, 2])
    b = pd.Series([0.0, 1.0], index=[1, 2])
    assert claims.paired_effect(a, b, 0.95)["n_seeds"] == 2


@pytest.mark.parametrize("rule, lo, hi, margin, expected", [
    ("less", -2, -1, 0, "supported"), ("less", 1, 2, 0, "not supported"),
    ("less", -1, 1, 0, "inconclusive"), ("more", 1, 2, 0, "supported"),
    ("no_less", -0.01, 3, 0.02, "supported"), ("no_less", -1, -0.5, 0.02, "not supported"),
    ("no_less", -1, 1, 0.02, "inconclusive"), ("equivalent", -0.05, 0.05, 0.1, "supported"),
    ("equivalent", 0.2, 0.3, 0.1, "not supported"), ("equivalent", -0.05, 0.3, 0.1, "inconclusive"),
    ("less", np.nan, np.nan, 0, "inconclusive"),
])
def test_verdict_rules(rule, lo, hi, margin, expected):
    assert claims._verdict(rule, lo, hi, margin) == expected


def _smoothness(beta_bn, beta_none):
    rows = []
    for norm, betas in (("batchnorm", beta_bn), ("none", beta_none)):
        for seed, beta in enumerate(betas):
            for step in (0, 10):
                rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                             "seed": seed, "step": step, "beta_eff": beta, "grad_pred_max": beta,
                             "loss_min": 1.0, "loss_max": 1.0 + beta})
    return pd.DataFrame(rows)


def test_ledger_verdicts_come_from_the_data():
    smooth = _smoothness([1.0, 1.1, 0.9, 1.05], [10.0, 12.0, 9.0, 11.0])
    ledger = claims.evaluate({"smoothness": smooth}).set_index("claim_id")
    assert ledger.loc["beta_smooth", "verdict"] == "supported"
    assert ledger.loc["beta_smooth", "effect"] == pytest.approx(
        np.mean(np.log([1.0, 1.1, 0.9, 1.05]) - np.log([10.0, 12.0, 9.0, 11.0])))
    flipped = claims.evaluate({"smoothness": _smoothness([10.0, 12, 9, 11], [1.0, 1.1, 0.9, 1.05])})
    assert flipped.set_index("claim_id").loc["beta_smooth", "verdict"] == "not supported"
    assert ledger.loc["lp_smooth", "verdict"] == "not measured"
    assert ledger.loc["ics_grad", "verdict"] == "not measured"


def test_single_seed_is_inconclusive():
    ledger = claims.evaluate({"smoothness": _smoothness([1.0], [10.0])}).set_index("claim_id")
    assert ledger.loc["beta_smooth", "verdict"] == "inconclusive"
    assert "fewer than 2" in ledger.loc["beta_smooth", "note"]


def _jitter(band16, band256, ghost256, ratio_mu, conv=False):
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
                    for li, r in ((1, ratio_mu[seed]), (2, 5.0)):  # deeper layers: ignored
                        rows.append({**ids, "norm": norm, "seed": seed, "step": step,
                                     "batch_size": bsz, "batch_size_effective": bsz,
                                     "layer": str(li), "layer_index": li, "band_fraction": np.nan,
                                     "samples_per_stat": bsz * (64 if conv else 1),
                                     "ratio_mu": r, "ratio_sigma2": r})
    return pd.DataFrame(rows)


def test_jitter_and_proposition2_claims_from_the_data():
    df = _jitter([0.8, 0.9, 0.85], [0.2, 0.25, 0.3], [0.5, 0.6, 0.55], [1.01, 0.98, 1.02])
    ledger = claims.evaluate({"bn_jitter": df})
    by = ledger.set_index(["claim_id", "norm"])
    assert by.loc[("jitter_batch", "batchnorm"), "verdict"] == "supported"
    assert by.loc[("jitter_batch", "batchnorm"), "effect"] == pytest.approx(
        np.mean(np.log(np.array([0.8, 0.9, 0.85]) / [0.2, 0.25, 0.3])))
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "effect"] == pytest.approx(
        np.mean(np.log(np.array([0.5, 0.6, 0.55]) / [0.2, 0.25, 0.3])))
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "verdict"] == "supported"
    assert by.loc[("prop2_mu", "batchnorm"), "value"] == pytest.approx(
        np.mean(np.log([1.01, 0.98, 1.02])))  # layer 2's ratio of 5 is not used
    assert by.loc[("prop2_mu", "batchnorm"), "verdict"] == "supported"
    # the data against the paper: no batch-size effect, and a variance 50% off the formula
    flat = _jitter([0.2, 0.3, 0.25], [0.25, 0.2, 0.3], [0.1, 0.1, 0.12], [1.5, 1.6, 1.55])
    by = claims.evaluate({"bn_jitter": flat}).set_index(["claim_id", "norm"])
    assert by.loc[("jitter_batch", "batchnorm"), "verdict"] == "inconclusive"
    assert by.loc[("jitter_ghost", "ghost_batchnorm"), "verdict"] == "not supported"
    assert by.loc[("prop2_sigma2", "batchnorm"), "verdict"] == "not supported"
    conv = claims.evaluate({"bn_jitter": _jitter([0.8] * 3, [0.2] * 3, [0.5] * 3, [1.0] * 3,
                                                 conv=True)}).set_index("claim_id")
    assert conv.loc["prop2_mu", "verdict"] == "not measured"  # conv layers: not a prediction
