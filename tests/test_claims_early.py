"""The paper tests of Santurkar's loss range and gradient change (``lipschitz``, ``grad_pred``)
read early training only (claims/values/stage.py's ``early``: step <= 25% of the run, step 0
always), the stage the paper reads them at; the relative and beta rows keep every checkpoint."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims import ledger as claims
from bnstudy.claims.values import stage

STEPS = (0, 10, 50, 100)  # early: 0 and 10 (<= 25)


def _reversing(seeds=8):
    """BN's gradient change and loss range 10x smaller than the plain net's at steps 0 and 10,
    100x larger at 50 and 100 (no arm converges: the loss stays at 1)."""
    rows = []
    rng = np.random.default_rng(0)
    for seed in range(seeds):
        for step in STEPS:
            for norm, v in (("batchnorm", 1.0 if step <= 10 else 100.0),
                            ("none", 10.0 if step <= 10 else 1.0)):
                b = v * (1 + 0.05 * rng.standard_normal())
                rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                             "seed": seed, "step": step, "beta_eff": b, "grad_pred_max": b,
                             "loss_min": 1.0, "loss_max": 1.0 + b, "loss": 1.0,
                             "grad_norm": 1.0})
    return pd.DataFrame(rows)


def test_early_keeps_the_first_quarter_and_always_the_first_checkpoint():
    df = pd.DataFrame({"experiment": ["a"] * 4 + ["b"] * 2, "step": [0, 10, 50, 100, 5, 100]})
    assert stage.early(df)["step"].tolist() == [0, 10, 5]
    assert stage.early(df.iloc[:0]).empty


def test_grad_pred_and_lipschitz_read_early_training_only():
    df = _reversing()
    metric = {c.key: c.metric for c in claims.CLAIMS}
    v = metric["grad_pred"](df).groupby(level="norm").mean()
    assert v["batchnorm"] == pytest.approx(0.0, abs=0.05)
    assert v["none"] == pytest.approx(np.log(10), abs=0.05)
    by = claims.evaluate({"smoothness": df}).set_index("claim_id")
    for key in ("grad_pred", "lipschitz"):
        assert by.loc[key, "verdict"] == "supported", key
        assert by.loc[key, "effect"] < -1.5, key  # log(1/10) for grad_pred
        assert "early training: steps 0, 10 of 0, 10, 50, 100" in by.loc[key, "note"], key
    # the relative rows and beta_eff keep every checkpoint: there BN's late 100x wins
    for key in ("grad_pred_rel", "beta_smooth"):
        assert by.loc[key, "verdict"] == "contradicted at this setting", key
        assert "early training" not in str(by.loc[key, "note"]), key
