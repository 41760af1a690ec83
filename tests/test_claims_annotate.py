"""Roles and notes the ledger adds from the runs: rows beyond the paper, collapsed runs, Luo §5's
schedule."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims import ledger as claims
from bnstudy.claims.say import annotate

CONTRA = "contradicted at this setting"  # the outcome words (claims/decide/outcomes.py)


def _training(exp, norm, accs, lrs=None, seeds=3, steps=(0, 50, 100, 150)):
    """Train/test rows per seed; ``accs[seed]`` is the train accuracy at each step."""
    rows = []
    for s in range(seeds):
        for i, st in enumerate(steps):
            acc = accs[s][i]
            for split in ("train", "test"):
                rows.append({"experiment": exp, "dataset": "d", "model": "m", "norm": norm,
                             "seed": s, "step": st, "split": split, "accuracy": acc,
                             "loss": -np.log(max(acc, 1e-3)),
                             "lr": (lrs or [0.1] * len(steps))[i]})
    return pd.DataFrame(rows)


def _smoothness(exp, model):
    return pd.DataFrame([{"experiment": exp, "dataset": "d", "model": model, "norm": n,
                          "seed": s, "step": 0, "beta_eff": b + 0.1 * s, "grad_pred_max": 1.0,
                          "loss_min": 1.0, "loss_max": 2.0, "loss": 1.0, "grad_norm": 1.0}
                         for n, b in (("batchnorm", 1.0), ("none", 3.0)) for s in range(3)])


COLLAPSE = [[0.1, 0.1, 0.1, 0.1], [0.1, 0.6, 0.8, 0.9], [0.12, 0.5, 0.1, 0.11]]
LEARN = [[0.1, 0.7, 0.8, 0.9], [0.11, 0.6, 0.8, 0.9], [0.09, 0.5, 0.7, 0.9]]


def test_a_collapsed_run_is_shown_in_the_rows_note():
    training = pd.concat([_training("r18", "none", COLLAPSE), _training("r18", "batchnorm",
                                                                       LEARN)])
    coll = annotate.collapsed(training, "r18", ["none", "batchnorm"])
    assert sorted(coll["seed"]) == [0, 2] and set(coll["norm"]) == {"none"}
    assert coll.set_index("seed").loc[2, "from_step"] == 100  # back to chance after learning
    ledger = claims.evaluate({"smoothness": _smoothness("r18", "resnet18"),
                              "training": training})
    row = ledger.set_index("claim_id").loc["beta_smooth"]
    assert "2 of 3 none seeds of r18 at chance" in row["note"]
    assert "from steps 0, 100" in row["note"]
    assert row["verdict"] in ("supported", CONTRA, "undecided")  # still data


def test_a_diverged_run_is_shown_too():
    training = _training("e", "none", LEARN)
    training.loc[(training["seed"] == 1) & (training["step"] >= 100), "loss"] = np.inf
    coll = annotate.collapsed(training, "e", ["none"])
    assert list(coll["kind"]) == ["diverged"] and coll["from_step"].iloc[0] == 100


@pytest.mark.parametrize("model, role", [("resnet18", "beyond the paper"), ("vgg", "test")])
def test_santurkar_rows_on_a_resnet_go_beyond_the_paper(model, role):
    ledger = claims.evaluate({"smoothness": _smoothness("x", model)})
    rows = ledger[ledger["claim_id"].isin(["lipschitz", "beta_smooth", "grad_pred"])]
    assert (rows["role"] == role).all()
    if role != "test":
        assert rows["note"].str.contains("footnote 4").all()


def _gen(exp, bs):
    return [{"experiment": exp, "dataset": "digits", "model": "resnet18", "norm": "batchnorm",
             "seed": s, "step": st, "test_loss": 0.2 + 0.01 * s + (bs == 1024) * 0.1,
             "test_accuracy": 0.9, "gamma_sq": (1 + (bs == 1024)) * (1 + 0.01 * s),
             "arch": "resnet18", "train_batch_size": bs, "dropout": 0.0,
             "lr_batch_scaled": True} for s in range(3) for st in (0, 100)]


def test_luo_gamma_batch_states_the_schedule_confound_and_the_warm_up():
    gen = pd.DataFrame(_gen("m128", 128) + _gen("m1024", 1024))
    steps = (0, 50, 100, 150)
    training = pd.concat([
        _training("m128", "batchnorm", LEARN, lrs=[0.1, 0.05, 0.033, 0.025], steps=steps),
        _training("m1024", "batchnorm", LEARN, lrs=[0.1, 0.8, 0.6, 0.5], steps=steps)])
    ledger = claims.evaluate({"generalization": gen, "training": training})
    row = ledger.set_index("claim_id").loc["luo_gamma_batch"]
    assert (row["experiment"], row["baseline"]) == ("m1024", "m128")
    assert "confound" in row["note"] and "final lr 0.5 at m1024 vs 0.025 at m128" in row["note"]
    assert "m1024 warms its lr up (rising until about step 50)" in row["note"]
    assert "m128 warms" not in row["note"]
    other = ledger.set_index("claim_id").loc["luo_large_batch"]
    # every row that pairs two experiments states whether their lr paths differ
    assert "warms its lr up" in other["note"] and "confound, not controlled" in other["note"]


def test_a_control_arm_at_the_same_summed_lr_is_said_to_control_the_confound():
    gen = pd.DataFrame(_gen("m128", 128) + _gen("m1024", 1024))
    steps = (0, 50, 100, 150)
    same = [0.1, 0.05, 0.033, 0.025]
    training = pd.concat([_training("m128", "batchnorm", LEARN, lrs=same, steps=steps),
                          _training("m1024", "batchnorm", LEARN, lrs=same, steps=steps)])
    ledger = claims.evaluate({"generalization": gen, "training": training})
    note = ledger.set_index("claim_id").loc["luo_gamma_batch", "note"]
    assert "summed lr matched" in note and "confound, not controlled" not in note


def test_a_run_that_stopped_on_a_non_finite_batch_loss_diverged_there():
    training = _training("e", "none", LEARN)
    stop = {"experiment": "e", "dataset": "d", "model": "m", "norm": "none", "seed": 2,
            "step": 73, "split": "batch", "accuracy": np.nan, "loss": np.nan, "lr": 0.1}
    training = pd.concat([training, pd.DataFrame([stop])], ignore_index=True)
    coll = annotate.collapsed(training, "e", ["none"])
    assert list(zip(coll["seed"], coll["kind"], coll["from_step"], strict=True)) == [
        (2, "diverged", 73)]
