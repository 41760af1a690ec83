"""A costly arm's own budget (``replication: {arms: {norm: seeds}}``): the arm takes no seeds
beyond it, a row that compares it stops there and takes no round, the experiment's other rows go
on to its own budget, and a row left undecided says what its arm's budget buys. Fails on the
code before the option (no ``arms`` key; a round gave seeds to every arm its undecided rows
compare)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims.decide import sequential
from bnstudy.cli import main as cli
from bnstudy.config import study
from bnstudy.planning import budget as cost_budget
from bnstudy.planning import plan
from bnstudy.replication import budget, rounds
from bnstudy.replication.policy import Policy, policies

ROOT = Path(__file__).resolve().parents[1]
LOOKS = {"start": 5, "budget": {"seeds": 20}}  # looks 5, 10, 20


# -- the policy ----------------------------------------------------------------------------------

def test_an_arm_budget_is_one_of_the_planned_looks():
    p = Policy.parse({**LOOKS, "arms": {"population_norm": 5}})
    assert p.rounds == (5, 10, 20) and p.arms == (("population_norm", 5),)
    assert p.arm_seeds("population_norm") == 5 and p.arm_seeds("batchnorm") == 20
    # without arms the policy is the one it always was
    assert Policy.parse(LOOKS) == Policy((5, 10, 20), budget=("seeds", 20))


@pytest.mark.parametrize("arms, words", [
    ({"population_norm": 7}, r"arms\.population_norm: 7 is not one of the planned looks; "
                             r"valid: 5, 10, 20"),
    ({"population_norm": 40}, "40 is not one of the planned looks"),
    ({"population_norm": True}, "True is not one of the planned looks"),
    ({"population_norm": "5"}, "'5' is not one of the planned looks"),
    ({}, r"arms: must be a mapping normalizer -> seeds \(one of the planned looks \[5, 10, "
         r"20\]\)"),
    ([5], "must be a mapping"),
])
def test_a_bad_arm_budget_is_refused_naming_the_looks(arms, words):
    with pytest.raises(ValueError, match=words):
        Policy.parse({**LOOKS, "arms": arms}, "experiments.e.replication")


def test_an_arm_budget_names_a_normalizer_the_experiment_trains():
    cfg = {"experiments": {
        "e": {"norms": ["none", "batchnorm"], "seeds": [0],
              "replication": {**LOOKS, "arms": {"layernorm": 5}}}}}
    with pytest.raises(ValueError, match=r"experiments\.e\.replication\.arms: 'layernorm' is not "
                                         r"a normalizer of the experiments it applies to; "
                                         r"valid: none, batchnorm"):
        policies(cfg)
    cfg["experiments"]["e"]["replication"]["arms"] = {"batchnorm": 10}
    assert policies(cfg)["e"].arm_seeds("batchnorm") == 10
    # a study-wide policy: the arm is one of the experiments' that take it
    shared = {"replication": {**LOOKS, "arms": {"population_norm": 5}},
              "experiments": {"a": {"norms": ["batchnorm"], "seeds": [0]},
                              "b": {"norms": ["batchnorm", "population_norm"], "seeds": [0]}}}
    assert policies(shared)["a"].arms == policies(shared)["b"].arms
    shared["experiments"].pop("b")
    with pytest.raises(ValueError, match=r"replication\.arms: 'population_norm' is not"):
        policies(shared)


def test_the_schema_refuses_an_arm_budget_that_is_not_a_count(tmp_path):
    cfg = study.load([ROOT / "config/config.yaml"])
    cfg["experiments"]["star"]["replication"] = {**LOOKS, "arms": {"batchnorm": "five"}}
    with pytest.raises(ValueError, match="five"):
        study.check(cfg, local=False)


# -- a round: the arm at its budget takes no seeds, the other rows go on -------------------------

def _row(claim, norm, baseline, need, verdict="undecided", experiment="m128"):
    return {"claim_id": claim, "experiment": experiment, "norm": norm, "baseline": baseline,
            "n_seeds": 5, "verdict": verdict, "adjusted_verdict": verdict,
            "interval_level": 0.9999, "seeds_needed": need, "seeds_needed_margin": np.nan}


def _decide(tmp_path, monkeypatch, ledger, arms):
    monkeypatch.setattr(rounds, "evaluate", lambda *a, **k: pd.DataFrame(ledger))
    monkeypatch.setattr(rounds, "frames", lambda *a, **k: {})
    grid = {"m128": {"norms": ["batchnorm", "population_norm"], "seeds": [0, 1, 2, 3, 4]}}
    plans = {"m128": {"rounds": [5, 10, 20], "spending": "obf",
                      **({"arms": arms} if arms else {})}}
    return rounds.decide(str(tmp_path), 0, grid, {}, plans, 0.95, ["m128"])["experiments"][
        "m128"]


def test_a_row_over_an_arm_at_its_budget_takes_no_round(tmp_path, monkeypatch):
    ledger = [_row("luo_pn", "population_norm", "batchnorm", 377.0),
              _row("luo_large_batch", "batchnorm", "m128", 15.0, experiment="m1024")]
    capped = _decide(tmp_path, monkeypatch, ledger, {"population_norm": 5})
    # the BN arm goes on, sized from the row that can use its seeds (15: look 20), PN stops
    assert capped["continue"] and capped["norms"] == ["batchnorm"]
    assert capped["next_look"] == 2
    assert capped["at_arm_budget"] == ["luo_pn/m128/population_norm"]
    assert set(capped["undecided"]) == {"luo_pn/m128/population_norm",
                                        "luo_large_batch/m1024/batchnorm"}
    # without the arm's budget both arms go on (what the shipped luo study did)
    free = _decide(tmp_path, monkeypatch, ledger, None)
    assert free["norms"] == ["batchnorm", "population_norm"] and "at_arm_budget" not in free


def test_an_experiment_whose_undecided_rows_all_hold_their_arms_budget_stops(tmp_path,
                                                                            monkeypatch):
    ledger = [_row("luo_pn", "population_norm", "batchnorm", 377.0),
              _row("luo_large_batch", "batchnorm", "m128", 15.0, "supported", "m1024")]
    out = _decide(tmp_path, monkeypatch, ledger, {"population_norm": 5})
    assert not out["continue"] and out["norms"] == [] and "next_look" not in out
    assert out["at_arm_budget"] == ["luo_pn/m128/population_norm"]


def test_a_round_goes_no_further_than_its_arms_may(tmp_path, monkeypatch):
    # the only row that goes on compares an arm with a budget of 10: it needs 40, which would
    # take the experiment to 20, a look no arm of that row may take
    ledger = [_row("luo_pn", "population_norm", "batchnorm", 40.0)]
    out = _decide(tmp_path, monkeypatch, ledger, {"population_norm": 10})
    assert out["continue"] and out["next_look"] == 1
    assert out["norms"] == ["batchnorm", "population_norm"] and "at_arm_budget" not in out


def test_blocks_beyond_an_arms_budget_leave_the_arm_out():
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    for x in cfg["experiments"].values():
        x.pop("replication", None)
    cfg["experiments"]["star"]["replication"] = {"start": 3, "budget": {"seeds": 12},
                                                 "arms": {"layernorm": 6}}
    p = plan.Plan(cfg)
    records = {0: {"star": {"continue": True, "next_look": 2,
                            "norms": ["none", "batchnorm", "layernorm"]}},
               1: {"star": {"continue": False}}}
    p.use_rounds(lambda k: {"experiments": records[k]})
    assert p.blocks("star") == [[0, 1, 2], [3, 4, 5], list(range(6, 12))]
    every = ["none", "batchnorm", "layernorm"]
    assert p.block_norms("star") == [every, every, ["none", "batchnorm"]]
    assert p.plans()["star"]["arms"] == {"layernorm": 6}
    # an experiment without arms keeps the plan it had (its round arguments are unchanged)
    cfg["experiments"]["star"]["replication"].pop("arms")
    assert "arms" not in plan.Plan(cfg).plans()["star"]


# -- the ledger: what an arm's budget buys -------------------------------------------------------

def test_a_row_over_an_arm_with_its_own_budget_names_that_budget():
    rows = pd.DataFrame([
        {"experiment": "m128", "norm": "population_norm", "baseline": "batchnorm",
         "adjusted_verdict": "undecided", "verdict": "undecided", "seeds_needed": 377.0,
         "seeds_needed_margin": np.nan, "in_words": "PN's loss is 1.01x BN's", "note": ""},
        {"experiment": "m1024", "norm": "batchnorm", "baseline": "m128",
         "adjusted_verdict": "undecided", "verdict": "undecided", "seeds_needed": 30.0,
         "seeds_needed_margin": np.nan, "in_words": "x", "note": ""},
        {"experiment": "m128", "norm": "batchnorm", "baseline": "none",
         "adjusted_verdict": "undecided", "verdict": "undecided", "seeds_needed": 12.0,
         "seeds_needed_margin": np.nan, "in_words": "y", "note": ""}])
    budgets = {"m128": 20, "m1024": 20}
    arms = {"m128": {"population_norm": 5}}
    out = budget.add_shortfalls(rows, budgets, arms)
    assert out["in_words"][0] == ("PN's loss is 1.01x BN's; undecided: needs about 377 seeds "
                                  "per arm, the budget buys 5")
    # BN's arm is not PN's: the contrast row is bought the experiments' 20
    assert out["in_words"][1] == "x; undecided: needs about 30 seeds per arm, the budget buys 20"
    assert out["in_words"][2] == "y"  # 12 seeds: within the budget
    assert budget.row_budget(rows.iloc[2], budgets, arms) == 20
    # with a need of 4, the arm's budget buys it: no words
    assert budget.add_shortfalls(rows.assign(seeds_needed=4.0), budgets, arms)[
        "in_words"].tolist() == ["PN's loss is 1.01x BN's", "x", "y"]
    assert math.isnan(budget.row_need(math.nan))


def test_interval_levels_carry_the_arms_budgets():
    plans = {"m128": {"rounds": [5, 10, 20], "spending": "obf",
                      "arms": {"population_norm": 5}},
             "m1024": {"rounds": [5, 10, 20], "spending": "obf"}}
    levels = sequential.interval_levels(plans, {"m128": 20, "m1024": 20})
    assert levels.budgets == {"m128": 20, "m1024": 20}
    assert levels.arm_budgets == {"m128": {"population_norm": 5}}


# -- the luo study: PN's arm at 5 seeds ----------------------------------------------------------

def test_the_luo_study_gives_pns_arm_a_budget_of_five(capsys, monkeypatch):
    cfg = study.check(study.load([ROOT / "config/studies/luo.yaml"]), local=False)
    p = plan.Plan(cfg)
    assert p.policies["resnet18_m128"].arms == (("population_norm", 5),)
    assert all(not p.policies[e].arms for e in p.policies if e != "resnet18_m128")
    # at every look: BN's seeds, PN's at most 5
    assert [cost_budget.look_minutes(p, "resnet18_m128", n) for n in (5, 10, 20)] == sorted(
        cost_budget.look_minutes(p, "resnet18_m128", n) for n in (5, 10, 20))
    full = 20 * cost_budget.seed_minutes(p, "resnet18_m128")
    assert cost_budget.look_minutes(p, "resnet18_m128", 20) < full
    monkeypatch.chdir(ROOT)
    assert cli.main(["check", "config/studies/luo.yaml"]) == 0
    out = capsys.readouterr().out
    assert "population_norm at most 5 seeds (its own budget)" in out
    assert "at most 663 after the replication rounds" in out  # 528 + 20 x 4 + 5 + 10 x 5


# -- the decision rule, simulated at both boundaries, for a row stopped at its arm's budget -----

REPS = 40_000
MC_TOL = 3 * math.sqrt(0.05 * 0.95 / REPS)
MARGIN = 0.5


@pytest.mark.parametrize("stop_after", [0, 1])
@pytest.mark.parametrize("rule", ["less", "more", "equivalent"])
def test_a_row_stopped_at_its_arms_budget_errs_no_more_than_the_alpha_it_spent(rule,
                                                                               stop_after):
    from bnstudy.claims.decide import simulation as mc

    looks = (5, 10, 20)
    spent = float(sum(sequential.look_alphas(looks, 0.95, "obf")[: stop_after + 1]))
    assert spent < 0.05
    # at the null boundary (0 for less / more, the margin for equivalent): wrong "supported"
    edges = [mc.boundary(rule, MARGIN)] if rule != "equivalent" else [MARGIN, -MARGIN]
    for effect in edges:
        r = mc.simulate(rule, effect, 1.0, looks, MARGIN, 0.95, "obf", REPS, seed=21,
                        stop_after=stop_after)
        assert r["supported"] + r["not_supported"] <= spent + MC_TOL, r
        assert r["stop_at"][stop_after + 1:].sum() == 0  # no look past the arm's budget
    if rule in ("less", "more"):  # at the margin in the claim's direction: absent is wrong
        edge = -MARGIN if rule == "less" else MARGIN
        m = mc.simulate(rule, edge, 1.0, looks, MARGIN, 0.95, "obf", REPS, seed=22,
                        stop_after=stop_after)
        assert m["absent"] + m["not_supported"] <= spent + MC_TOL, m


def test_stopping_a_row_at_its_arms_budget_costs_power_not_errors():
    from bnstudy.claims.decide import simulation as mc

    looks = (5, 10, 20)
    full = mc.simulate("less", -0.8, 1.0, looks, 0.0, 0.95, "obf", REPS, seed=23)
    capped = mc.simulate("less", -0.8, 1.0, looks, 0.0, 0.95, "obf", REPS, seed=23,
                         stop_after=1)
    assert capped["supported"] < full["supported"] - 0.1
    assert capped["expected_seeds"] <= 10 < full["expected_seeds"]
    # the looks it takes are the plan's: the full plan's stopping rates up to look 1 (other
    # draws: within Monte Carlo error)
    assert np.allclose(capped["stop_at"][:2], full["stop_at"][:2], atol=0.01)
