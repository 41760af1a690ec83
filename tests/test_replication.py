"""Replication policies and the round decision (bnstudy.replication.policy)."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims import sequential as sq
from bnstudy.replication.policy import Policy, continuing

RULES = {"loss": ("less", 0.0), "ics": ("no_less", 0.2)}


def test_parse_defaults_to_doubling_and_checks_agreement():
    assert Policy.parse({"start": 3, "max": 24}).rounds == (3, 6, 12, 24)
    assert Policy.parse({"start": 3, "max": 20}).rounds == (3, 6, 12, 20)
    p = Policy.parse({"start": 3, "max": 24, "rounds": [3, 6, 12, 24], "spending": "linear"})
    assert p == Policy((3, 6, 12, 24), "linear")
    for bad, msg in [({"start": 3, "max": 24, "rounds": [4, 24]}, "start=3 disagrees"),
                     ({"rounds": [3, 2]}, "strictly increasing"),
                     ({"start": 1, "max": 4}, "2 <= start <= max"),
                     ({"start": 3, "max": 6, "spending": "obf"}, "valid: equal, linear"),
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
    p = Policy((3, 6, 12, 24))
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
    assert fixed.verdict == "supported" and split.verdict == "inconclusive"
    led = pd.DataFrame([_row("e", "loss", effect, sd, n)])
    assert continuing(led, RULES, {"e": Policy((3, 6, 12, 24))}, look=1) == {"e": True}


def test_missing_ledger_columns_are_named():
    with pytest.raises(ValueError, match="effect_sd"):
        continuing(pd.DataFrame(columns=["claim_id", "experiment", "effect", "n_seeds"]),
                   RULES, {}, 0)
