"""Replication policies and the round decision (bnstudy.replication.policy)."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims.decide import sequential as sq
from bnstudy.replication.policy import Policy, continuing

RULES = {"loss": ("less", 0.0), "ics": ("no_less", 0.2)}


def test_parse_defaults_to_doubling_and_refuses_rounds_with_start_or_max():
    assert Policy.parse({"start": 3, "max": 24}).rounds == (3, 6, 12, 24)
    assert Policy.parse({"start": 3, "max": 20}).rounds == (3, 6, 12, 20)
    p = Policy.parse({"rounds": [3, 6, 12, 24], "spending": "linear"})
    assert p == Policy((3, 6, 12, 24), "linear")
    for bad, msg in [({"start": 3, "max": 24, "rounds": [4, 24]},
                      r"either rounds .* or start and max .*not both: got rounds=\[4, 24\] "
                      r"and start=3 and max=24"),
                     # even when they agree: one way to say it, no guessing which wins
                     ({"start": 3, "rounds": [3, 6]}, r"not both: got rounds=\[3, 6\] and "
                                                      r"start=3; drop start, or rounds"),
                     ({"max": 6, "rounds": [3, 6]}, "drop max, or rounds"),
                     ({"rounds": [3, 2]}, "strictly increasing"),
                     ({"start": 1, "max": 4}, "2 <= start <= max"),
                     ({"start": 3, "max": 6, "spending": "nope"},
                      "unknown spending 'nope'; valid: "),
                     ({"start": 3, "max": 6, "seeds": 4}, "unknown key"),
                     ([3, 6], "must be a mapping")]:
        with pytest.raises(ValueError, match=msg):
            Policy.parse(bad, "experiments.x.replication")


def test_round_seeds_are_deterministic_and_nested():
    p = Policy((3, 6, 12))
    assert p.seeds([0, 1, 2], 0) == [0, 1, 2]
    assert p.seeds([0, 1, 2], 1) == [0, 1, 2, 3, 4, 5]
    assert p.seeds([7, 3, 9], 1) == [7, 3, 9, 10, 11, 12]
    assert p.seeds([0, 1, 2], 2)[:6] == p.seeds([0, 1, 2], 1)
    with pytest.raises(ValueError, match="not planned"):
        p.seeds([0], 3)


def _row(exp, claim, effect, sd, n):
    return {"experiment": exp, "claim_id": claim, "effect": effect, "effect_sd": sd,
            "n_seeds": n}


def test_only_experiments_with_an_undecided_claim_continue():
    p = Policy((3, 6, 12, 24), "equal")
    ledger = pd.DataFrame([
        _row("decided", "loss", -5.0, 0.1, 3),       # clears even the split level at 3 seeds
        _row("open", "loss", -5.0, 0.1, 3),
        _row("open", "ics", 0.0, 1.0, 3),            # noisy: undecided
        _row("unmeasured", "loss", np.nan, np.nan, 1),
        _row("other_claim", "jitter", 0.0, 1.0, 3),  # a claim without a rule here: ignored
    ])
    pol = {e: p for e in ("decided", "open", "unmeasured", "other_claim", "absent")}
    got = continuing(ledger, RULES, pol, look=0)
    assert got == {"decided": False, "open": True, "unmeasured": False, "other_claim": False,
                   "absent": False}
    # the last round stops every experiment
    last = pd.DataFrame([_row("open", "ics", 0.0, 1.0, 24)])
    assert continuing(last, RULES, {"open": p}, look=3) == {"open": False}


def test_the_round_decision_uses_the_split_level_not_the_fixed_one():
    # decided by an ordinary 95% interval at 6 seeds, but not at the look's level 1 - 0.05/4
    effect, sd, n = -1.5, 1.0, 6
    fixed = sq.decide_summary("less", effect, sd, n, [6], 0)
    split = sq.decide_summary("less", effect, sd, n, (3, 6, 12, 24), 1)
    assert fixed.verdict == "supported" and split.verdict == "undecided"
    led = pd.DataFrame([_row("e", "loss", effect, sd, n)])
    assert continuing(led, RULES, {"e": Policy((3, 6, 12, 24))}, look=1) == {"e": True}


def test_missing_ledger_columns_are_named():
    with pytest.raises(ValueError, match="effect_sd"):
        continuing(pd.DataFrame(columns=["claim_id", "experiment", "effect", "n_seeds"]),
                   RULES, {}, 0)


# -- the ledger at a stopping look ---------------------------------------------------------------

def test_rows_over_a_replicated_experiment_are_read_at_their_looks_level():
    """A row whose experiment stopped at a sequential look has the look's (wider) interval, its
    verdict read from it, and its p-value scaled by alpha / alpha_k before Holm: decisive at the
    fixed level, inconclusive at the look's (the old code read every row at the fixed level)."""
    from test_claims import _ics

    from bnstudy.claims import ledger as claims

    table = _ics([5e-3, 4.2e-3, 5.9e-3, 5.1e-3], [5e-3, 4e-3, 6e-3, 5e-3])
    fixed = claims.evaluate({"ics": table}).set_index("claim_id").loc["ics_grad"]
    levels = sq.interval_levels({"e": {"rounds": [4, 8, 16], "spending": "equal"}}, {"e": 4})
    assert levels == {"e": pytest.approx(1 - 0.05 / 3)}
    seq = claims.evaluate({"ics": table}, levels=levels).set_index("claim_id").loc["ics_grad"]
    assert fixed["interval_level"] == 0.95 and seq["interval_level"] == pytest.approx(levels["e"])
    assert seq["ci_low"] < fixed["ci_low"] and seq["ci_high"] > fixed["ci_high"]
    assert seq["effect"] == fixed["effect"]
    assert seq["p_value"] == pytest.approx(min(1.0, 3 * fixed["p_value"]))
    from bnstudy.claims.decide import skew
    # (the rule's t part at half the look's alpha: at 4 seeds its signed-rank part cannot close)
    assert (seq["ci_low"], seq["ci_high"]) == pytest.approx(skew.bounds(
        seq["effect_mean"], seq["effect_sd"], seq["effect_skew"], 4,
        1 - (1 - levels["e"]) / 2))
    # the verdict follows the look's interval (rules.verdict), not the fixed one
    from bnstudy.claims.decide.rules import verdict
    assert seq["verdict"] == verdict("no_less", seq["ci_low"], seq["ci_high"], np.log(1.25))
    # an experiment that is not replicated keeps the fixed level
    other = claims.evaluate({"ics": table}, levels={"f": 0.9}).set_index("claim_id")
    assert other.loc["ics_grad", "interval_level"] == 0.95


def test_an_experiment_with_fewer_seeds_than_its_first_round_has_no_look():
    assert sq.interval_levels({"e": {"rounds": [3, 6]}}, {"e": 2}) == {}
    assert sq.interval_levels({"e": {"rounds": [3, 6], "spending": "linear"}},
                              {"e": 6}) == {"e": pytest.approx(1 - 0.05 * 3 / 6)}


def test_a_bad_policy_in_a_study_names_where_it_is():
    from pathlib import Path

    from bnstudy.config import study
    from bnstudy.config.loader import ConfigError

    root = Path(__file__).resolve().parents[1]
    cfg = study.load([root / ".test/config.yaml"],
                     {"experiments": {"star": {"replication": {"rounds": [3, 2]}}}})
    with pytest.raises(ConfigError,
                       match=r"^experiments\.star\.replication: .*strictly increasing"):
        study.check(cfg, local=False)
    both = study.load([root / ".test/config.yaml"], {"experiments": {"star": {
        "replication": {"rounds": [3, 6], "start": 3}}}})
    with pytest.raises(ConfigError, match=r"^experiments\.star\.replication: give either "
                       r"rounds .* not both: got rounds=\[3, 6\] and start=3; drop start"):
        study.check(both, local=False)


def test_a_round_adds_seeds_only_to_the_arms_undecided_rows_compare():
    from bnstudy.replication.rounds import arms

    norms = ["none", "batchnorm", "layernorm"]
    rows = [{"norm": "batchnorm", "baseline": "none"},    # a contrast: both arms
            {"norm": "batchnorm", "baseline": None}]      # a check on one arm
    assert arms(rows, norms) == ["none", "batchnorm"]
    assert arms([{"norm": "layernorm", "baseline": "plain least squares"}], norms) == [
        "layernorm"]                                      # a baseline that is not an arm
    # a row over no single arm (pooled) reads them all
    assert arms([*rows, {"norm": "nan", "baseline": None}], norms) == norms
    assert arms([], norms) == []


def test_a_round_whose_ledger_has_no_measured_row_stops_the_experiment(tmp_path):
    """Issue 34: ``replication: {rounds: [3, 6]}`` on an experiment no claim measures crashed
    the round (the ledger then has no ``n_seeds`` column: AttributeError on a numpy float)."""
    from bnstudy.replication import rounds

    grid = {"e": {"norms": ["none"], "seeds": [0, 1, 2]}}
    record = rounds.decide(str(tmp_path), 0, grid, {}, {"e": {"rounds": [3, 6],
                                                             "spending": "equal"}}, 0.95)
    assert record["experiments"]["e"] == {"look": 0, "n_seeds": 3, "open": True,
                                          "continue": False, "undecided": [], "norms": []}
    assert record["claims"] == []
    out = tmp_path / "round0.json"
    rounds.write(record, str(out))
    df = rounds.table([str(out)], str(tmp_path / "replication.parquet"))
    assert list(df["experiment"]) == ["e"] and list(df["continue"]) == [False]
    empty = pd.DataFrame({"claim_id": ["x"], "verdict": ["not measured"]})
    assert list(rounds.seed_counts(empty)) == [0.0]


@pytest.mark.workflow
def test_a_replicated_study_with_no_measured_row_completes(tmp_path_factory):
    """Issue 34, end to end: ``replication: {rounds: [2, 3]}`` on the only experiment of a study
    whose ledger measures nothing (training only, no measure, no analysis) failed in
    replication_round after training; the study now completes, stopping at round 0."""
    import json

    import harness

    from bnstudy import io

    source = harness.snapshot(tmp_path_factory)
    cfg = harness.only_experiments(harness.tiny_config(source), "dln")
    cfg["analyses"] = {}
    cfg["experiments"]["dln"].update(seeds=[0, 1], measures=[],
                                     replication={"rounds": [2, 3]})
    project = harness.copy_project(tmp_path_factory.mktemp("unmeasured") / "project",
                                   source=source, config=cfg)
    harness.snakemake(project, "--cores", "2")
    results = project / "results"
    ledger = io.read_table(results / "tables" / "claims.parquet")
    assert set(ledger["verdict"]) == {"not measured"}
    (record,) = [json.loads(p.read_text()) for p in (results / "rounds").glob("round*.json")]
    assert record["experiments"]["dln"]["continue"] is False
    assert (results / "report.html").is_file()
