"""Internal covariate shift: Definition 2.1 against hand derivations, replay, purity, plots."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy import measures
from bnstudy.measures.ics import compute as ics
from bnstudy.networks import models
from bnstudy.train import checkpoints, stacked
from bnstudy.train import loop as training

CPU = torch.device("cpu")
NORMS = ("none", "batchnorm", "layernorm", "weightnorm")


def _batch(ds, n=16, offset=0):
    x = torch.as_tensor(ds.x_train[offset: offset + n])
    return x, torch.as_tensor(ds.y_train[offset: offset + n])


def _warm_optimizer(model, opt, ds, task):
    """One real step so the momentum buffers are non-zero, as at a mid-training checkpoint."""
    x, y = _batch(ds, 16, offset=16)
    opt.zero_grad(set_to_none=True)
    training.loss_fn(task)(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _layer_groups_lr(model, lrs):
    return [{"params": [dict(model.named_parameters())[n] for n in names], "lr": lr}
            for (_, names), lr in zip(ics.layer_groups(model), lrs, strict=True)]


@pytest.mark.parametrize("norm", NORMS)
def test_frozen_earlier_layers_give_identical_gradients(star, norm):
    model = training.build(make_spec(norm), star).train()
    k = len(ics.layer_groups(model))
    # lr 0 for every layer but the head: no layer has a preceding layer that moves.
    opt = torch.optim.SGD(_layer_groups_lr(model, [0.0] * (k - 1) + [0.1]), lr=0.1,
                          momentum=0.9, weight_decay=1e-3)
    _warm_optimizer(model, opt, star, star.task)
    x, y = _batch(star)
    probe = torch.as_tensor(star.x_train[:32])
    res = ics.measure_checkpoint(model, opt, x, y, star.task, probe)
    assert [r["layer"] for r in res.rows] == list(range(1, k + 1))
    for r in res.rows:
        g, gp = res.grads[r["layer"] - 1]
        assert torch.equal(g, gp), r
        assert r["grad_l2_diff"] == 0.0 and r["grad_rel_diff"] == 0.0
        assert r["grad_cosine"] == pytest.approx(1.0, abs=1e-12)
        if r["layer"] < k:
            assert r["step_mean_shift"] == 0.0 and r["step_var_shift"] == 0.0
    # Control: once the earlier layers move, G' differs from G for the deeper layers.
    opt2 = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    moving = ics.measure_checkpoint(model, opt2, x, y, star.task, probe)
    assert all(r["grad_l2_diff"] > 0 for r in moving.rows[1:])
    assert moving.rows[0]["grad_l2_diff"] == 0.0  # layer 1 has no preceding layers


def test_two_layer_linear_network_matches_hand_derivation(linear_ds):
    spec = make_spec("none", model={"arch": "dln", "depth": 2, "init": "xavier"})
    model = training.build(spec, linear_ds).train()
    lr, mom, wd = 0.05, 0.9, 0.01
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    _warm_optimizer(model, opt, linear_ds, linear_ds.task)
    buf1 = opt.state[model.features[0].linear.weight]["momentum_buffer"].double().numpy()
    x, y = _batch(linear_ds, 32)
    res = ics.measure_checkpoint(model, opt, x, y, linear_ds.task, x)

    xn, yn = x.double().numpy(), y.double().numpy()
    w1 = model.features[0].linear.weight.detach().double().numpy()
    w2 = model.head.weight.detach().double().numpy()
    scale = 2.0 / yn.size  # d/d(out) of the mean squared error over N x d entries

    def grads(a, b):
        h = xn @ a.T
        r = scale * (h @ b.T - yn)
        return (r @ b).T @ xn, r.T @ h  # dL/dW1, dL/dW2

    g1, g2 = grads(w1, w2)
    w1_next = w1 - lr * (mom * buf1 + g1 + wd * w1)  # SGD: momentum buffer and weight decay
    _, g2_prime = grads(w1_next, w2)
    got_g1, got_g1p = res.grads[0]
    got_g2, got_g2p = res.grads[1]
    assert np.allclose(got_g1.numpy(), g1.ravel(), rtol=1e-4, atol=1e-6)
    assert np.allclose(got_g1p.numpy(), g1.ravel(), rtol=1e-4, atol=1e-6)
    assert np.allclose(got_g2.numpy(), g2.ravel(), rtol=1e-4, atol=1e-6)
    assert np.allclose(got_g2p.numpy(), g2_prime.ravel(), rtol=1e-4, atol=1e-6)
    assert np.allclose(res.new_params["features.0.linear.weight"].double().numpy(), w1_next,
                       rtol=1e-5, atol=1e-6)
    head = res.rows[1]
    diff = np.linalg.norm(g2 - g2_prime)
    assert diff > 1e-4  # the check is not vacuous
    assert head["grad_l2_diff"] == pytest.approx(diff, rel=1e-3)
    assert head["grad_rel_diff"] == pytest.approx(diff / np.linalg.norm(g2), rel=1e-3)
    cos = np.sum(g2 * g2_prime) / (np.linalg.norm(g2) * np.linalg.norm(g2_prime))
    assert head["grad_cosine"] == pytest.approx(cos, abs=1e-6)


@pytest.fixture(scope="module")
def bn_run(star):
    spec = make_spec("batchnorm")  # momentum 0.9, checkpoints 0, 1, 2, 10 and the last (20)
    return training.train(spec, star, "cpu")


def test_update_reproduces_next_checkpoint(bn_run, star):
    cks = bn_run["checkpoints"]
    xtr, ytr = torch.as_tensor(star.x_train), torch.as_tensor(star.y_train)
    consecutive = [i for i in range(len(cks) - 1) if cks[i + 1]["step"] == cks[i]["step"] + 1]
    assert consecutive == [0, 1]
    for i in consecutive:
        r = checkpoints.restore(bn_run, i, star)
        res = ics.measure_checkpoint(r.model, r.optimizer, xtr[r.batch], ytr[r.batch],
                                     star.task, xtr[:8], batched=stacked.batchable(r.spec)[0])
        for name, p in res.new_params.items():
            assert torch.equal(p, cks[i + 1]["model"][name]), name
    df = pd.DataFrame(ics.run_ics(bn_run, star, {}, CPU))
    by_step = df.groupby("step")["update_replay_error"].first()
    assert by_step.loc[0] == 0.0 and by_step.loc[1] == 0.0
    assert by_step.loc[[2, 10, 20]].isna().all()


def test_measure_is_pure(bn_run, star):
    run_before = copy.deepcopy(bn_run)
    r = checkpoints.restore(bn_run, 1, star)
    xtr, ytr = torch.as_tensor(star.x_train), torch.as_tensor(star.y_train)
    for mode in (True, False):
        r.model.train(mode)
        state = {k: v.clone() for k, v in r.model.state_dict().items()}
        opt_state = copy.deepcopy(r.optimizer.state_dict())
        ics.measure_checkpoint(r.model, r.optimizer, xtr[r.batch], ytr[r.batch], star.task,
                               xtr[:32])
        assert r.model.training is mode
        assert all(torch.equal(v, state[k]) for k, v in r.model.state_dict().items())
        after = r.optimizer.state_dict()
        for key, s in opt_state["state"].items():
            assert torch.equal(after["state"][key]["momentum_buffer"], s["momentum_buffer"])
        assert all(p.grad is None for p in r.model.parameters())
    ics.run_ics(bn_run, star, {}, CPU)
    for a, b in zip(bn_run["checkpoints"], run_before["checkpoints"], strict=True):
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
        for key, s in b["optimizer"]["state"].items():
            assert torch.equal(a["optimizer"]["state"][key]["momentum_buffer"],
                               s["momentum_buffer"])


def test_distributional_statistics_match_manual_forward(bn_run, star):
    probe_size = 40
    df = pd.DataFrame(ics.run_ics(bn_run, star, {"probe_size": probe_size}, CPU))
    probe = torch.as_tensor(star.x_train[:probe_size])

    def manual(state):
        net = training.build(bn_run["spec"], star)
        net.load_state_dict(state)
        net.train()
        out, h = [], probe
        with torch.no_grad():
            for b in models.blocks(net):
                out.append((h.double().mean(0), h.double().var(0, unbiased=False)))
                h = b(h)
        out.append((h.double().mean(0), h.double().var(0, unbiased=False)))
        return out

    cks = bn_run["checkpoints"]
    stats = [manual(c["model"]) for c in cks]
    for i, c in enumerate(cks):
        rows = df[df["step"] == c["step"]].sort_values("layer")
        assert len(rows) == len(stats[i])
        for (_, row), (m, v) in zip(rows.iterrows(), stats[i], strict=True):
            assert row["input_mean"] == pytest.approx(float(m.mean()), abs=1e-6)
            assert row["input_var"] == pytest.approx(float(v.mean()), rel=1e-5)
            if i == 0:
                assert math.isnan(row["mean_shift"]) and math.isnan(row["shift_from_step"])
                continue
            pm, pv = stats[i - 1][int(row["layer"]) - 1]
            assert row["shift_from_step"] == cks[i - 1]["step"]
            assert row["mean_shift"] == pytest.approx(float((m - pm).abs().mean()), abs=1e-6)
            assert row["var_shift"] == pytest.approx(float((v - pv).abs().mean()), abs=1e-6)
            if c["step"] == cks[i - 1]["step"] + 1:  # one update apart: both shifts agree
                prev = df[(df["step"] == cks[i - 1]["step"]) & (df["layer"] == row["layer"])]
                assert prev["step_mean_shift"].iloc[0] == pytest.approx(row["mean_shift"],
                                                                        abs=1e-6)
    first = df[df["layer"] == 1]
    assert (first["step_mean_shift"] == 0).all() and (first["mean_shift"].dropna() == 0).all()
    assert (df["bn_statistics"] == "batch").all() and (df["probe_size"] == probe_size).all()


def test_conv_model_layers_options_and_determinism(digits):
    spec = make_spec("batchnorm", model={"arch": "vgg", "channels": [4, "M", 6]},
                     training={"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 3,
                               "checkpoints": [0, 1]})
    run = training.train(spec, digits, "cpu")
    opts = {"probe_size": 24, "layers": [2, -1]}
    a = pd.DataFrame(ics.run_ics(run, digits, opts, CPU))
    b = pd.DataFrame(ics.run_ics(run, digits, opts, CPU))
    pd.testing.assert_frame_equal(a, b)
    assert sorted(a["layer"].unique()) == [2, 3] and set(a["n_layers"]) == {3}
    assert (a[a["step"] == 0]["update_replay_error"] == 0).all()
    model = training.build(spec, digits)
    groups = ics.layer_groups(model)
    assert [n for n, _ in groups] == ["block1", "block2", "head"]
    assert any("norm.weight" in p for p in groups[0][1])  # BN's gamma belongs to its layer
    assert a[a["layer"] == 2]["n_params"].iloc[0] == 4 * 6 * 9 + 2 * 6  # conv weight, gamma, beta


@pytest.mark.parametrize("options, match", [
    ({"probe_size": 0}, "probe_size"),
    ({"probe_size": "10"}, "probe_size"),
    ({"layers": [0]}, "layers"),
    ({"layers": "first"}, "layers"),
    ({"layers": [9]}, "out of range"),
    ({"probes": 3}, "unknown ics option"),
])
def test_bad_options(bn_run, star, options, match):
    with pytest.raises(ValueError, match=match):
        ics.run_ics(bn_run, star, options, CPU)


def test_registry_and_plots(bn_run, star):
    measure = measures.get("ics")
    assert measure.run.__module__ == "bnstudy.measures.ics"
    assert measure.tables == ("ics", "ics_activations")
    from bnstudy import plots
    from bnstudy.plots import ics as ics_plots

    frames = []
    for norm, seed in (("none", 0), ("batchnorm", 0), ("none", 1), ("batchnorm", 1)):
        spec = make_spec(norm, seed=seed, training={"lr": 0.05, "batch_size": 16, "steps": 4,
                                                    "checkpoints": [0, 1]})
        run = bn_run if (norm, seed) == ("batchnorm", 0) else training.train(spec, star, "cpu")
        df = pd.DataFrame(ics.run_ics(run, star, {"probe_size": 32}, CPU))
        frames.append(df.assign(experiment="star", dataset="star2d", model="m", norm=norm,
                                seed=seed))
    df = pd.concat(frames, ignore_index=True)
    plots.load_all()
    for name in ("ics_gradient", "ics_depth", "ics_distribution"):
        fig = plots.get(name).draw([df], {})
        assert len(fig.axes) >= 4
        plots.plt.close(fig)
    text = ics_plots.findings({"ics": df})
    assert "star (star2d / m)" in text and "batchnorm" in text and "none" in text
    assert "Replay check" in text and "max |difference| 0 " in text
    assert plots.SECTIONS["ics"].table == "ics"


def test_augmented_run_replays_its_updates(digits):
    """With augment: true, G is the gradient on the batch's images as update t cropped and
    flipped them, so the optimizer's step on G reproduces the next checkpoint exactly."""
    spec = make_spec("batchnorm", model={"arch": "vgg", "channels": [4, "M", 6]},
                     training={"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 3,
                               "checkpoints": [0, 1, 2], "augment": True,
                               "augment_padding": 2, "lr_schedule": "inverse_time",
                               "lr_decay": 0.5})
    run = training.train(spec, digits, "cpu")
    df = pd.DataFrame(ics.run_ics(run, digits, {"probe_size": 16}, CPU))
    assert (df[df["step"] < 2]["update_replay_error"] == 0).all()
