"""Each claim's paper protocol, the deviations the ledger writes from the config, stage-matched
comparisons along training, and the one-sided noisy-BN rule (issue: verdicts at the papers'
protocols)."""

import copy

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims import ledger as claims
from bnstudy.claims.declare import protocols
from bnstudy.claims.say import deviations
from bnstudy.claims.values import stage
from bnstudy.config import study

CONTRA = "contradicted at this setting"  # the outcome words (claims/decide/outcomes.py)

DLN_SETUP = {"dataset": {"kind": "gaussian_linear", "options": {"n_train": 1000, "dim": 10}},
             "model": {"arch": "dln", "depth": 25, "init": "xavier"},
             "training": {"lr": 0.001, "momentum": 0.0, "batch_size": "full", "steps": 1000,
                          "checkpoints": [0, 1, 100, 500]},
             "measures": {"smoothness": {"multipliers": [0.5, 4.0],
                                         "multipliers_by_arch": {"dln": [0.01, 30.0]}}},
             "norms": ["none", "batchnorm"]}


def test_deviations_name_the_concrete_differences_in_the_papers_units():
    out = deviations.deviations(protocols.SANTURKAR_DLN, DLN_SETUP, "smoothness")
    assert out[0].startswith("lr 0.001 vs the paper's 0.01 (1e-6 on the summed squared error")
    assert "1,000 of the paper's 10,000 steps" in out
    assert "measured at steps 0, 1, 100, 500 and the last, not every step" in out
    assert not any("probes" in d for d in out)  # the paper's [0.01, 30]
    at_paper = copy.deepcopy(DLN_SETUP)
    at_paper["training"].update(lr=0.01, steps=10_000)
    at_paper["measures"]["smoothness"]["multipliers_by_arch"] = {"dln": [0.1, 30.0]}
    out = deviations.deviations(protocols.SANTURKAR_DLN, at_paper, "smoothness")
    assert not any(d.startswith("lr") or "steps" in d.split(",")[0] for d in out[:1])
    assert "probes [0.1, 30] x lr vs the paper's [0.01, 30]" in out


def test_another_model_and_data_are_named_against_the_papers():
    star = {"dataset": {"kind": "star2d", "options": {"n_train": 200}},
            "model": {"arch": "mlp", "depth": 6, "width": 64},
            "training": {"lr": 0.05, "momentum": 0.9, "batch_size": 32, "steps": 600,
                         "checkpoints": [0, 1, 50, 200]},
            "measures": {"smoothness": {"multipliers": [0.5, 4.0]}}, "norms": ["none"]}
    # neither matches: the classification setting is the nearest for a classification MLP
    assert protocols.pick(protocols.SANTURKAR, "mlp", "star2d") is protocols.SANTURKAR_VGG
    assert protocols.pick(protocols.SANTURKAR, "mlp", "gaussian_linear") is \
        protocols.SANTURKAR_DLN
    out = deviations.deviations(protocols.SANTURKAR_VGG, star, "smoothness")
    assert "200 points of a 2-D star, not CIFAR-10 without augmentation" in out
    assert "mlp (depth 6, width 64), not a VGG" in out
    assert "600 of the paper's 15,000 steps" in out
    bb = deviations.deviations(protocols.BB_PARTITION[0], star)
    assert "200 training points, not 50" in bb and "depth 6 vs the paper's 11" in bb


def _shipped(path):
    return deviations.setups(study.load([path]))


@pytest.mark.parametrize("path", ["config/config.yaml", "config/studies/santurkar.yaml"])
def test_the_shipped_dln_runs_at_the_papers_learning_rate(path):
    setups = _shipped(path)
    dln = {e: s for e, s in setups.items() if s["model"]["arch"] == "dln"
           and "smoothness" in s["measures"]}
    assert dln, path
    lrs = sorted({s["training"]["lr"] for s in dln.values()})
    assert 0.01 in lrs, lrs  # the paper's lr
    if "santurkar" in path:  # and the lr axis below it (the default study has none)
        assert min(lrs) <= 1e-3, lrs
    paper = [e for e, s in dln.items() if s["training"]["lr"] == 0.01]
    for e in paper:
        out = deviations.deviations(protocols.SANTURKAR_DLN, setups[e], "smoothness")
        assert not any(d.startswith("lr ") for d in out), (e, out)


def _smooth(loss_none, beta_bn, beta_none, seeds=4):
    """A smoothness table: none's training loss per step ``loss_none`` (BN stays at 1)."""
    rows = []
    rng = np.random.default_rng(0)
    for seed in range(seeds):
        for step, ln in zip((0, 1, 50, 200), loss_none, strict=True):
            for norm, loss, beta in (("none", ln, beta_none[step]), ("batchnorm", 1.0,
                                                                     beta_bn[step])):
                b = beta * (1 + 0.05 * rng.standard_normal())
                rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                             "seed": seed, "step": step, "beta_eff": b, "grad_pred_max": b,
                             "loss_min": loss, "loss_max": loss * (1 + b), "loss": loss,
                             "grad_norm": 1.0})
    return pd.DataFrame(rows)


def test_an_interpolated_arm_is_not_compared_with_an_unconverged_one():
    """none interpolates by step 50 (loss 1e-4 of its initial), where its landscape is flat
    (beta 0.01) and BN's is not: averaging over every checkpoint calls BN rougher; at the
    like-for-like checkpoints (0 and 1) BN is smoother, and the row says which it used."""
    df = _smooth([2.0, 1.9, 2e-4, 1e-5], {0: 1.0, 1: 1.0, 50: 5.0, 200: 5.0},
                 {0: 3.0, 1: 3.0, 50: 0.01, 200: 0.01})
    by = claims.evaluate({"smoothness": df}).set_index("claim_id")
    assert by.loc["beta_smooth", "verdict"] == "supported"
    assert by.loc["beta_smooth", "effect"] == pytest.approx(np.log(1 / 3), abs=0.1)
    assert "stage-matched: compared at steps 0, 1; step(s) 50, 200 dropped" in \
        by.loc["beta_smooth", "note"]
    # no arm converged: every checkpoint counts, no note
    df = _smooth([2.0, 1.9, 1.0, 0.5], {0: 1.0, 1: 1.0, 50: 5.0, 200: 5.0},
                 {0: 3.0, 1: 3.0, 50: 0.01, 200: 0.01})
    by = claims.evaluate({"smoothness": df}).set_index("claim_id")
    assert "stage-matched" not in str(by.loc["beta_smooth", "note"])
    assert by.loc["beta_smooth", "verdict"] == CONTRA


def test_a_diverged_run_is_not_converged():
    df = pd.DataFrame({"experiment": "e", "norm": "none", "seed": 0, "step": [0, 1, 2],
                       "loss": [1.0, np.inf, np.nan]})
    assert not stage.converged(df, "loss").any()
    assert len(stage.matched(df, "loss")) == 3


def _training(noisy_over_bn):
    rows = []
    for seed in range(6):
        for norm, loss in (("batchnorm", 0.1), ("noisy_batchnorm", 0.1 * noisy_over_bn)):
            rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                         "seed": seed, "step": 100, "split": "train",
                         "loss": loss * (1 + 0.02 * seed), "accuracy": 0.9})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ratio, expected", [(0.5, "supported"), (1.0, "supported"),
                                             (3.0, CONTRA)])
def test_noisy_bn_is_one_sided(ratio, expected):
    """'Noisy BN does not hurt training': noisy BN training better (0.5x) supports it (the old
    two-sided rule called it 'not supported')."""
    by = claims.evaluate({"training": _training(ratio)}).set_index("claim_id")
    assert by.loc["noisy_bn", "verdict"] == expected


def test_every_measured_row_carries_its_protocol_and_deviations():
    setups = {"e": DLN_SETUP}
    df = _smooth([2.0, 1.9, 1.0, 0.5], {0: 1.0, 1: 1.0, 50: 5.0, 200: 5.0},
                 {0: 3.0, 1: 3.0, 50: 0.01, 200: 0.01})
    led = claims.evaluate({"smoothness": df, "training": _training(1.0)}, setups=setups)
    measured = led[led["verdict"] != "not measured"]
    assert len(measured) >= 4
    assert (measured["deviations"].str.len() > 0).all()
    assert measured["protocol"].str.contains("Santurkar").all()
    row = led.set_index("claim_id").loc["beta_smooth"]
    assert "lr 0.001 vs the paper's 0.01" in row["deviations"]
    # without the setups (a replication round's ledger) the columns exist and are empty
    led = claims.evaluate({"smoothness": df})
    assert (led["deviations"] == "").all()


def test_absolute_quantities_beside_and_the_lr_axis_in_words():
    setups = {}
    frames = []
    for e, lr, (bn, none) in (("lo", 0.001, (3.0, 1.0)), ("hi", 0.01, (1.0, 3.0))):
        setups[e] = copy.deepcopy(DLN_SETUP)
        setups[e]["training"]["lr"] = lr
        df = _smooth([2.0, 1.9, 1.0, 0.5], {s: bn for s in (0, 1, 50, 200)},
                     {s: none for s in (0, 1, 50, 200)})
        frames.append(df.assign(experiment=e))
    led = claims.evaluate({"smoothness": pd.concat(frames)}, setups=setups)
    by = led.set_index(["claim_id", "experiment"])
    assert by.loc[("beta_smooth", "hi"), "verdict"] == "supported"
    assert by.loc[("beta_smooth", "lo"), "verdict"] == CONTRA
    note = ("along the lr axis (after Holm): contradicted at this setting at lr 0.001; supported "
            "at lr 0.01")
    assert note in by.loc[("beta_smooth", "hi"), "note"]
    assert note in by.loc[("beta_smooth", "lo"), "note"]
    # loss range loss x b: BN's loss stays 1, none's is [2, 1.9, 1, .5] over the checkpoints
    expected = np.log(1 / 3) - np.mean(np.log([2.0, 1.9, 1.0, 0.5]))
    # the relative row (beyond the paper) carries the absolute quantity over every checkpoint;
    # the paper test reads the same quantity in early training (steps 0, 1, 50 of 0..200)
    assert by.loc[("lipschitz_rel", "hi"), "absolute_effect"] == pytest.approx(expected, abs=0.05)
    assert by.loc[("lipschitz_rel", "hi"), "effect"] == pytest.approx(np.log(1 / 3), abs=0.05)
    early = np.log(1 / 3) - np.mean(np.log([2.0, 1.9, 1.0]))
    assert by.loc[("lipschitz", "hi"), "effect"] == pytest.approx(early, abs=0.05)
    assert by.loc[("beta_smooth", "hi"), "absolute_effect"] == pytest.approx(
        by.loc[("beta_smooth", "hi"), "effect"])


def test_a_pooled_row_reads_the_setups_of_its_own_data_kind_and_an_exact_row_says_so():
    ts = {"dataset": {"kind": "teacher_student", "options": {"N": 400, "S": 0.25,
                                                             "alpha": 2.0}},
          "model": {"arch": "unit"}, "training": {"lr": 0.1, "batch_size": 32, "steps": 6000},
          "measures": {}, "norms": ["batchnorm"]}
    other = {**DLN_SETUP, "norms": ["batchnorm"]}
    led = pd.DataFrame([{"claim_id": "luo_bn", "verdict": "undecided", "norm": "batchnorm",
                         "experiment": "alpha=2 (pooled)", "baseline": None},
                        {"claim_id": "dannemann", "verdict": "supported", "experiment": None}])
    out = deviations.add_columns(led, {"luo_bn": protocols.LUO_TS,
                                       "dannemann": protocols.DANNEMANN},
                                 {"luo_bn": "teacher_student"}, {"ts": ts, "dln": other})
    assert out.loc[0, "deviations"] == "N = 400 vs the paper's 4096"  # not the DLN's
    assert out.loc[1, "deviations"].startswith("none: the paper's setting (computed exactly")


def test_checkpoints_where_both_arms_have_converged_compare_like_with_like():
    df = pd.DataFrame({"experiment": "e", "seed": 0, "norm": ["none", "batchnorm"] * 3,
                       "step": [0, 0, 50, 50, 200, 200],
                       "loss": [2.0, 2.0, 1e-4, 0.5, 1e-4, 1e-4]})
    kept = stage.matched(df, "loss")
    assert sorted(set(kept["step"])) == [0, 200]  # step 50: only none had converged
    assert "step(s) 50 dropped for the seeds where none had reached" in stage.stage_note(df,
                                                                                         "loss")


def test_a_population_norm_row_says_where_its_population_statistics_come_from():
    """Luo §5 estimates PN's statistics on 10k training samples; a row of population_norm says
    how many inputs and how often this study re-estimates them (config or registry default),
    and no other normalizer's row does."""
    setup = {"dataset": {"kind": "digits", "options": {}},
             "model": {"arch": "resnet18", "width": 8, "norm_options": {
                 "population_norm": {"n_samples": 512, "refresh_every": 20}}},
             "training": {"lr": 0.05, "momentum": 0.9, "batch_size": 128, "steps": 800},
             "measures": {}, "norms": ["batchnorm", "population_norm"]}
    out = deviations.deviations(protocols.LUO_CNN[0], setup, "generalization", "population_norm")
    assert ("PN's population statistics and gamma decay from 512 training inputs, re-estimated "
            "every 20 steps, vs the paper's 10,000 samples") in out
    assert not any("PN" in d for d in deviations.deviations(
        protocols.LUO_CNN[0], setup, "generalization", "batchnorm"))
    del setup["model"]["norm_options"]
    out = deviations.deviations(protocols.LUO_CNN[0], setup, "generalization", "population_norm")
    assert any("from 1,024 training inputs, re-estimated before every step" in d for d in out)


def test_the_shipped_luo_pn_row_names_its_population_statistics():
    ledger = pd.read_parquet("studies/luo/tables/claims.parquet")
    rows = ledger[ledger["claim_id"] == "luo_pn"]
    assert len(rows) and all("PN's population statistics" in d for d in rows["deviations"])
