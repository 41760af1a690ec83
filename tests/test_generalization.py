import math

import numpy as np
import pytest
import torch
from specs import make_spec

from bnstudy import data
from bnstudy.measures.generalization import compute as generalization
from bnstudy.networks.normalizers import batch_statistics_layers
from bnstudy.train import loop as training


def test_regression_gap_matches_numpy(linear_ds):
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 2, "init": "xavier"})
    model = training.build(spec, linear_ds)
    row = generalization.measure(model, linear_ds)[0]
    with torch.no_grad():
        w = (model.head.weight @ model.features[0].linear.weight).numpy()
    tr = np.mean((linear_ds.x_train @ w.T - linear_ds.y_train) ** 2)
    te = np.mean((linear_ds.x_test @ w.T - linear_ds.y_test) ** 2)
    assert row["train_loss"] == pytest.approx(tr, rel=1e-5)
    assert row["test_loss"] == pytest.approx(te, rel=1e-5)
    assert row["loss_gap"] == pytest.approx(te - tr, rel=1e-4)
    assert math.isnan(row["train_accuracy"])


def test_classification_accuracy_matches_argmax(star):
    model = training.build(make_spec(norm="none"), star)
    row = generalization.measure(model, star)[0]
    with torch.no_grad():
        pred = model(torch.as_tensor(star.x_test)).argmax(1).numpy()
    assert row["test_accuracy"] == pytest.approx(np.mean(pred == star.y_test))
    assert row["accuracy_gap"] == pytest.approx(row["train_accuracy"] - row["test_accuracy"])


def test_recomputed_bn_statistics_are_population_statistics(star):
    model = training.build(make_spec(norm="batchnorm"), star)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.as_tensor(star.x_train)
    whole = generalization.recompute_bn_statistics(model, x)
    chunked = generalization.recompute_bn_statistics(model, x, chunk=10)
    with torch.no_grad():
        h = model.features[0].linear(x)
        h2 = whole.features[1].linear(whole.features[0](x))
    for net in (whole, chunked):
        bn1, bn2 = batch_statistics_layers(net)[:2]
        assert torch.allclose(bn1.running_mean, h.mean(0), atol=1e-5)
        assert torch.allclose(bn1.running_var, h.var(0, unbiased=False), rtol=1e-4, atol=1e-6)
        assert torch.allclose(bn2.running_mean, h2.mean(0), atol=1e-5)
        assert torch.allclose(bn2.running_var, h2.var(0, unbiased=False), rtol=1e-4, atol=1e-6)
    row = generalization.measure(model, star, {"bn_statistics": "recomputed"})[0]
    assert row["bn_statistics"] == "recomputed"
    assert model.training, "the measure must not change the model's mode"
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_unknown_option_value_is_named(star):
    model = training.build(make_spec(norm="none"), star)
    with pytest.raises(ValueError, match="'median'.*running"):
        generalization.measure(model, star, {"bn_statistics": "median"})


def test_diverged_run_gives_nan_row(linear_ds):
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 6, "init": "xavier"},
                     training={"lr": 50.0, "batch_size": "full", "steps": 50, "eval_every": 5})
    run = training.train(spec, linear_ds, "cpu")
    rows = generalization.run(run, linear_ds, generalization.Options(), torch.device("cpu"))
    assert rows[0]["diverged"] and math.isnan(rows[0]["test_loss"])
    assert math.isnan(rows[0]["gamma_sq"])
    assert rows[0]["train_batch_size"] == len(linear_ds.x_train)  # full batch: the whole set


def test_gamma_sq_is_the_mean_over_layers_of_each_layers_mean_gamma_squared():
    """Layers of different widths: the mean of per-layer means, not of all units pooled."""
    images = data.make("digits", {"seed": 0, "image": True})
    model = training.build(make_spec(norm="batchnorm", dataset="digits",
                                     model={"arch": "vgg", "channels": [2, 4]}), images)
    norms = [b.norm for b in generalization.blocks(model)]
    assert [n.weight.numel() for n in norms] == [2, 4]
    with torch.no_grad():
        norms[0].weight.copy_(torch.tensor([1.0, 2.0]))  # mean gamma^2 = 2.5
        norms[1].weight.fill_(0.5)  # 0.25 (pooled over the 6 units it would be 1.0)
    assert generalization.gamma_sq(model) == pytest.approx((2.5 + 0.25) / 2)


@pytest.mark.parametrize("norm", ["none", "weightnorm", "batchnorm_fixed_affine", "zero_bias"])
def test_gamma_sq_is_nan_without_a_learned_scale(star, norm):
    model = training.build(make_spec(norm=norm), star)
    assert math.isnan(generalization.gamma_sq(model))


def test_rows_name_what_runs_are_compared_by(star):
    spec = make_spec(norm="batchnorm", model={"arch": "mlp", "depth": 3, "width": 8,
                                              "dropout": 0.25},
                     training={"lr": 0.05, "momentum": 0.9, "batch_size": 1000, "steps": 3,
                               "eval_every": 1, "checkpoints": [0]})
    run = training.train(spec, star, "cpu")
    (row,) = generalization.run(run, star, generalization.Options(), torch.device("cpu"))
    assert row["arch"] == "mlp" and row["dropout"] == 0.25
    assert row["train_batch_size"] == len(star.x_train)  # capped at the training set
    model = training.build(spec, star)
    model.load_state_dict(run["checkpoints"][-1]["model"])
    assert row["gamma_sq"] == pytest.approx(generalization.gamma_sq(model))
    assert row["gamma_sq"] != pytest.approx(1.0)  # trained: gamma moved from its init
