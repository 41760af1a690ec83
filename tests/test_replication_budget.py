"""Rounds to a budget (bnstudy.replication.budget, bnstudy.planning.budget): the looks a budget
buys, planned before any data; a round that skips to the look its undecided rows need; a row the
budget cannot decide says so; ``check`` prints what every shipped study's budget buys."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnstudy import io
from bnstudy.claims.decide import sequential
from bnstudy.claims.declare import reads
from bnstudy.claims.ledger import evaluate
from bnstudy.cli import main as cli
from bnstudy.config import study
from bnstudy.planning import plan
from bnstudy.replication import budget
from bnstudy.replication.policy import Policy

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["config/config.yaml", *sorted(f"config/studies/{p.name}"
                                         for p in (ROOT / "config/studies").glob("*.yaml"))]


# -- the looks a budget buys: a pure function of the config --------------------------------------

def test_a_seed_budget_plans_looks_doubling_to_what_it_buys():
    assert budget.looks(3, 24) == (3, 6, 12, 24)
    assert budget.looks(3, 20) == (3, 6, 12, 20)
    assert budget.looks(5, 10) == (5, 10) and budget.looks(3, 3) == (3,)
    with pytest.raises(ValueError, match="buys less than the first look"):
        budget.looks(5, 4)
    assert Policy.parse({"budget": {"seeds": 24}}).rounds == (3, 6, 12, 24)
    p = Policy.parse({"start": 5, "budget": {"seeds": 10}, "spending": "equal"})
    assert p == Policy((5, 10), "equal", ("seeds", 10))
    # the same config, the same looks (and so the same alpha spending), every time
    assert Policy.parse({"budget": {"seeds": 24}}) == Policy.parse({"budget": {"seeds": 24}})


def test_a_cpu_minute_budget_buys_what_its_per_seed_cost_allows():
    assert budget.seeds_for_minutes(30, 0.5, 256) == 60
    assert budget.seeds_for_minutes(30, 0.5, 40) == 40  # limits.seeds caps it
    p = Policy.parse({"budget": {"cpu_minutes": 30}}, seed_minutes=0.5)
    assert p.rounds == (3, 6, 12, 24, 48, 60) and p.budget == ("cpu_minutes", 30.0)
    assert Policy.parse({"budget": {"cpu_minutes": 30}}, seed_minutes=2.5).rounds == (3, 6, 12)
    with pytest.raises(ValueError, match=r"budget: a budget of 2 seeds per arm buys less than "
                                         r"the first look \(3 seeds\).*about 5 CPU-minutes"):
        Policy.parse({"budget": {"cpu_minutes": 10}}, "replication", seed_minutes=5.0)


@pytest.mark.parametrize("bad, words", [
    ({"budget": {"seeds": 24}, "rounds": [3, 6]}, "either budget .* or rounds, not both"),
    ({"budget": {"seeds": 24}, "max": 24}, "drop max, or budget"),
    ({"budget": {"seeds": 1}}, "seeds must be an integer >= 2"),
    ({"budget": {"seeds": 2.5}}, "seeds must be an integer"),
    ({"budget": {"cpu_minutes": -1}}, "cpu_minutes must be a number > 0"),
    ({"budget": {"minutes": 3}}, r"must be one of \{seeds: N\} or \{cpu_minutes: X\}"),
    ({"budget": {"seeds": 6, "cpu_minutes": 3}}, "must be one of"),
    ({"budget": {"seeds": None, "cpu_minutes": None}}, "must be one of"),
])
def test_a_bad_budget_is_refused_naming_where_it_is(bad, words):
    with pytest.raises(ValueError, match=r"^experiments\.x\.replication.*" + words):
        Policy.parse(bad, "experiments.x.replication")


def test_a_cpu_minute_budget_in_a_study_is_priced_by_the_cost_model():
    cfg = study.check(study.load([ROOT / "config/config.yaml"],
                                 {"experiments": {"star": {"replication": {  # merged: null
                                     "budget": {"seeds": None, "cpu_minutes": 2}}}}}),
                       local=False)
    p = plan.Plan(cfg)
    per = p.seed_minutes("star")
    assert 0 < per < 2
    want = budget.looks(3, budget.seeds_for_minutes(2, per, 256))
    assert p.policies["star"].rounds == want and want[-1] * per <= 2 < (want[-1] + 1) * per


# -- a round skips ahead among the planned looks -------------------------------------------------

def test_the_next_look_is_the_first_planned_one_with_the_seeds_needed():
    rounds = (3, 6, 12, 24)
    assert budget.next_look(rounds, 0, 5) == 1
    assert budget.next_look(rounds, 0, 7) == 2
    assert budget.next_look(rounds, 0, 12) == 2
    assert budget.next_look(rounds, 0, 40) == 3 and budget.next_look(rounds, 0, math.inf) == 3
    assert budget.next_look(rounds, 0, math.nan) == 1  # no estimate: one look on
    assert budget.next_look(rounds, 2, 2) == 3 and budget.next_look(rounds, 3, 99) == 3
    # a row decided at either boundary: the nearer one's seeds
    assert budget.row_need(28.0, 22.0) == 22.0 and budget.row_need(9.0, math.nan) == 9.0
    assert math.isnan(budget.row_need(math.nan, math.nan))


def test_a_skipped_look_spends_no_alpha_and_moves_none():
    """Looking at 3 and then 24 seeds of looks (3, 6, 12, 24): each look reads its own planned
    level (alpha_k of the plan); the skipped looks' alphas are not moved to the others."""
    rounds = (3, 6, 12, 24)
    plans = {"e": {"rounds": list(rounds), "spending": "obf"}}
    alphas = sequential.look_alphas(rounds)
    for n, k in ((3, 0), (24, 3)):
        levels = sequential.interval_levels(plans, {"e": n})
        assert levels["e"] == pytest.approx(1 - alphas[k])
        assert levels.budgets == {"e": 24}


def _default_without_policies() -> plan.Plan:
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    for x in cfg["experiments"].values():
        x.pop("replication", None)
    cfg["experiments"]["star"]["replication"] = {"budget": {"seeds": 12}}
    return plan.Plan(cfg)


def test_a_round_that_skips_looks_adds_their_blocks_at_once():
    p = _default_without_policies()
    records = {0: {"star": {"continue": True, "next_look": 2, "norms": ["none", "batchnorm"]}},
               1: {"star": {"continue": False}}}
    p.use_rounds(lambda k: {"experiments": records[k]})
    assert p.policies["star"].rounds == (3, 6, 12)
    assert p.state(1) == {"star": 2} and p.looks() == {"star": 2}
    assert [f.rsplit("/", 1)[1] for f in p.round_files()] == ["round0.json", "round1.json"]
    assert p.blocks("star") == [[0, 1, 2], [3, 4, 5], list(range(6, 12))]
    both = ["none", "batchnorm"]
    assert p.block_norms("star") == [["none", "batchnorm", "layernorm"], both, both]
    args = p.round_arguments(1)
    assert json.loads(args[args.index("--open") + 1]) == ["star"]
    assert json.loads(args[args.index("--grid") + 1])["star"]["seeds"] == list(range(12))


def test_a_round_record_names_the_look_its_rows_need(tmp_path, monkeypatch):
    from bnstudy.replication import rounds

    ledger = pd.DataFrame([
        {"claim_id": "a", "experiment": "e", "norm": "batchnorm", "baseline": "none",
         "n_seeds": 3, "verdict": "undecided", "adjusted_verdict": "undecided",
         "interval_level": 0.99, "seeds_needed": 40.0, "seeds_needed_margin": 10.0},
        {"claim_id": "b", "experiment": "e", "norm": "batchnorm", "baseline": "none",
         "n_seeds": 3, "verdict": "supported", "adjusted_verdict": "supported",
         "interval_level": 0.99, "seeds_needed": 99.0, "seeds_needed_margin": 99.0}])
    monkeypatch.setattr(rounds, "evaluate", lambda *a, **k: ledger)
    monkeypatch.setattr(rounds, "frames", lambda *a, **k: {})
    grid = {"e": {"norms": ["none", "batchnorm"], "seeds": [0, 1, 2]}}
    plans = {"e": {"rounds": [3, 6, 12, 24], "spending": "obf"}}
    record = rounds.decide(str(tmp_path), 0, grid, {}, plans, 0.95, ["e"])
    # the undecided row needs 10 seeds at its nearer boundary (the margin): look 12, skipping 6
    assert record["experiments"]["e"]["continue"] and record["experiments"]["e"][
        "next_look"] == 2
    closed = rounds.decide(str(tmp_path), 0, grid, {}, plans, 0.95, [])
    assert not closed["experiments"]["e"]["open"] and "next_look" not in closed[
        "experiments"]["e"]


# -- a row the budget cannot decide says so ------------------------------------------------------

def test_a_row_whose_need_the_budget_cannot_buy_says_so():
    rows = pd.DataFrame([
        {"experiment": "e", "baseline": "none", "adjusted_verdict": "undecided",
         "verdict": "undecided", "seeds_needed": 40.0, "seeds_needed_margin": np.nan,
         "in_words": "BN's loss is 0.9x none's", "note": ""},
        {"experiment": "e", "baseline": "none", "adjusted_verdict": "undecided",
         "verdict": "undecided", "seeds_needed": 9.0, "seeds_needed_margin": 30.0,
         "in_words": "x", "note": ""},
        {"experiment": "e", "baseline": "none", "adjusted_verdict": "supported",
         "verdict": "supported", "seeds_needed": 99.0, "seeds_needed_margin": np.nan,
         "in_words": "y", "note": ""},
        {"experiment": "f", "baseline": "none", "adjusted_verdict": "undecided",
         "verdict": "undecided", "seeds_needed": 99.0, "seeds_needed_margin": np.nan,
         "in_words": "z", "note": ""}])
    out = budget.add_shortfalls(rows, {"e": 24})
    assert out["in_words"][0] == ("BN's loss is 0.9x none's; undecided: needs about 40 seeds "
                                  "per arm, the budget buys 24")
    assert out["note"][0] == "undecided: needs about 40 seeds per arm, the budget buys 24"
    assert out["in_words"].tolist()[1:] == ["x", "y", "z"]  # affordable, decided, no budget
    inf = budget.add_shortfalls(rows.assign(seeds_needed=math.inf), {"e": 24})
    assert "no seed count decides it" in inf["in_words"][0]


def test_a_study_whose_budget_cannot_buy_a_rows_need_names_the_shortfall():
    """The shipped default study's tables under the shipped config: its DLN and digits
    experiments' budget is 12 seeds per arm, and the smoothness rows over them that need more say
    so in their words (the ledger without a budget says nothing of it)."""
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    p = plan.Plan(cfg)
    tables = ROOT / "studies/default/tables"
    # the tables the smoothness rows read (the others' claims are "not measured")
    frames = {t: io.read_table(tables / f"{t}.parquet")
              for t in ("training", "generalization", "smoothness")}
    assert set(frames) <= set(reads.TABLES)
    seeds = frames["training"].groupby("experiment")["seed"].nunique().to_dict()
    levels = sequential.interval_levels(p.plans(), seeds)
    assert levels.budgets["digits"] == levels.budgets["dln"] == 12
    ledger = evaluate(frames, 0.95, levels)
    short = ledger[ledger["in_words"].astype(str).str.contains("the budget buys")]
    assert len(short), "no row names the shortfall"
    for _, r in short.iterrows():
        m = re.search(r"undecided: needs about (\d+) seeds per arm, the budget buys (\d+)",
                      r["in_words"])
        assert m and int(m[1]) > int(m[2]) == levels.budgets[r["experiment"]], r["in_words"]
        assert r["adjusted_verdict"] == "undecided"
    assert {"dln", "digits"} & set(short["experiment"])


# -- check prints what every shipped study's budget buys -----------------------------------------

@pytest.mark.parametrize("path", SHIPPED)
def test_check_prints_the_budgets_looks_for_every_shipped_study(path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["check", "--cluster", path]) == 0
    out = capsys.readouterr().out.splitlines()
    cfg = study.check(study.load([ROOT / path]), local=False)
    p = plan.Plan(cfg)
    if not p.policies:
        assert f"{path}: replication: none (every experiment runs its declared seeds)" in out
        return
    for e, pol in p.policies.items():
        line = next((x for x in out if x.startswith(f"{path}: replication {e}: ")), None)
        assert line, (e, out)
        assert f"{len(pol.rounds)} looks: " in line
        shown = [int(n) for n in re.findall(r"(\d+) seeds/arm ~[\d.]+ CPU-min", line)]
        assert shown == list(pol.rounds), line
        if pol.budget:
            assert "budget " in line
    assert any(x.startswith(f"{path}: replication in all: at most ~") for x in out)
