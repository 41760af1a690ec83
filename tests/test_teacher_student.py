"""The teacher_student dataset, the Luo §4 measure (exact generalization error, order
parameters, closed forms, finite-sample minimizers) and its figures."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec, measure_cli

from bnstudy import data, measures
from bnstudy.measures.teacher_student import compute as ts
from bnstudy.networks import init, models
from bnstudy.theory import luo as luo_theory
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

OPTS = {"N": 30, "alpha": 2.0, "S": 0.25, "n_test": 4000, "seed": 3}


@pytest.fixture(scope="module")
def ds():
    return data.make("teacher_student", OPTS)


def student(norm="none", slope=1.0, steps=300, batch_size=None, lr=0.1, momentum=0.9,
            options=None, arch="mlp"):
    model = {"arch": arch, "slope": slope, "init": "orthogonal", "norm_options": options or {}}
    if arch == "mlp":
        model.update(depth=1, width=1)
    train = {"lr": lr, "momentum": momentum, "batch_size": batch_size, "steps": steps,
             "eval_every": steps, "checkpoints": [0, 10]}
    return make_spec(norm=norm, model=model, training=train, dataset="ts")


@pytest.fixture(scope="module")
def gd_run(ds):
    return training.train(student(), ds, "cpu")


def test_dataset_follows_luo(ds):
    w = data.teacher_weights(30, 3)
    assert w @ w / 30 == pytest.approx(1.0)
    assert ds.x_train.shape == (60, 30) and ds.y_train.shape == (60, 1)
    assert ds.meta["alpha_effective"] == 2.0 and ds.meta["noise_variance"] == 0.25
    assert np.allclose(ds.y_test[:, 0], ds.x_test @ w, atol=1e-5)  # noise-free test targets
    assert ds.x_test.var() == pytest.approx(1 / 30, rel=0.02)  # x ~ N(0, I/N)
    big = data.make("teacher_student", {**OPTS, "alpha": 200.0, "n_test": 10})
    resid = big.y_train[:, 0] - big.x_train @ w  # the label noise s ~ N(0, S)
    assert resid.mean() == pytest.approx(0.0, abs=0.02) and resid.var() == pytest.approx(
        0.25, rel=0.05)
    # the teacher and the test set do not depend on alpha; smaller training sets are prefixes
    assert np.array_equal(big.x_train[:60], ds.x_train) and np.array_equal(big.y_train[:60],
                                                                           ds.y_train)
    again = data.make("teacher_student", {**OPTS, "alpha": 0.5})
    assert np.array_equal(again.x_test, ds.x_test) and len(again.x_train) == 15
    assert ts.teacher(again) is not None


@pytest.mark.parametrize("bad", [{"N": 0}, {"alpha": 0.001}, {"S": -1.0}, {"n_test": 0}])
def test_dataset_bad_options(bad):
    with pytest.raises(ValueError, match="teacher_student"):
        data.make("teacher_student", {**OPTS, **bad})


@pytest.mark.parametrize("slope", [1.0, 0.0])
def test_exact_error_matches_monte_carlo(slope):
    torch.manual_seed(0)
    n = 20
    net = models.build_model({"arch": "mlp", "depth": 1, "width": 1, "slope": slope}, "none",
                             (n,), 1)
    with torch.no_grad():
        net.features[0].linear.weight.normal_(0, 1.0)
        net.features[0].linear.bias.fill_(0.3)
        net.head.weight.fill_(1.7)
        net.head.bias.fill_(-0.2)
    w = data.teacher_weights(n, 0)
    x = torch.randn(400_000, n) / math.sqrt(n)
    with torch.no_grad():
        mc = float(((x.double() @ torch.as_tensor(w) - net(x)[:, 0].double()) ** 2).mean())
    block = ts.single_unit(net)
    u, b = ts.affine_preactivation(net.eval(), block, x[:64])
    assert np.allclose(u, net.features[0].linear.weight.detach().numpy()[0], atol=1e-6)
    a, c = ts._head(net)
    act = ts.activation(block.act)
    assert act == ("linear" if slope == 1.0 else "relu")
    assert ts.exact_error(w, u, b, a, c, act) == pytest.approx(mc, rel=0.01)


def test_non_affine_preactivation_gives_nan(ds, gd_run):
    net = training.build(gd_run["spec"], ds).eval()
    block = ts.single_unit(net)
    block.norm = torch.nn.Tanh()
    assert ts.affine_preactivation(net, block, torch.as_tensor(ds.x_test[:64])) is None
    assert ts.single_unit(training.build(make_spec(norm="none"), data.make("star2d"))) is None


def test_measure_rows_columns_and_converged_vanilla(ds, gd_run):
    rows = ts.run(gd_run, ds, {}, torch.device("cpu"))
    assert [r["step"] for r in rows] == [0, 10, 300]
    last = rows[-1]
    assert last["alpha"] == 2.0 and last["N"] == 30 and last["P"] == 60 and last["S"] == 0.25
    assert last["batch_size"] == 60 and last["epochs"] == 300 and last["activation"] == "linear"
    assert last["data_seed"] == 3
    # exact error = the noise-free test set's MSE up to sampling error
    assert last["gen_error"] == pytest.approx(last["test_mse"], rel=0.08)
    assert last["theory"] == last["theory_sgd"] == luo_theory.eps_sgd_linear(2.0, 0.25)
    assert last["rel_error"] == pytest.approx(last["gen_error"] / last["theory"] - 1)
    # converged GD reaches the least-squares fit of this training set; the mlp's biases make
    # it the fit with an intercept (numpy reference), erm_sgd is the paper's (no intercept)
    w = data.teacher_weights(30, 3)
    x1 = np.c_[ds.x_train.astype(np.float64), np.ones(60)]
    vb = np.linalg.lstsq(x1, ds.y_train[:, 0].astype(np.float64), rcond=None)[0]
    assert last["gen_error"] == pytest.approx(np.sum((vb[:30] - w) ** 2) / 30 + vb[30] ** 2,
                                              rel=0.02)
    v = np.linalg.pinv(ds.x_train.astype(np.float64)) @ ds.y_train[:, 0]
    assert last["erm_sgd"] == pytest.approx(np.sum((v - w) ** 2) / 30, rel=1e-6)
    assert last["erm_sgd"] == last["erm_theory"] == last["erm_shrinkage"]
    assert last["gamma2"] == pytest.approx(1.0, abs=0.35) and 0.8 < last["R"] <= 1.0
    assert rows[0]["gen_error"] > 0.9  # the orthogonal init has gamma^2 = 1/N: error ~ 1


def test_measure_is_pure_and_deterministic(ds, gd_run):
    before = copy.deepcopy(gd_run)
    first = ts.run(gd_run, ds, {"bn_statistics": "recomputed"}, torch.device("cpu"))
    second = ts.run(gd_run, ds, {"bn_statistics": "recomputed"}, torch.device("cpu"))
    assert pd.DataFrame(first).equals(pd.DataFrame(second))
    for c0, c1 in zip(before["checkpoints"], gd_run["checkpoints"], strict=True):
        assert all(torch.equal(c0["model"][k], c1["model"][k]) for k in c0["model"])


@pytest.mark.parametrize("options", [{}, {"bn_statistics": "recomputed", "erm": False}])
def test_run_is_measure_on_each_checkpoint(ds, gd_run, options):
    """``run`` is the loop over checkpoints and ``measure`` one checkpoint's model: the same
    rows bit for bit, also without the ERM basis ``run`` shares between checkpoints."""
    rows = ts.run(gd_run, ds, options, torch.device("cpu"))
    each = []
    for i in range(len(gd_run["checkpoints"])):
        restored = checkpoints.restore(gd_run, i, ds)
        each += ts.measure(restored.model, ds, options, gd_run["spec"], step=restored.step,
                           diverged=gd_run["diverged"])
    assert pd.DataFrame(each).equals(pd.DataFrame(rows)) and len(rows) == 3
    assert [list(r) for r in each] == [list(r) for r in rows]  # the columns in order


def test_measure_leaves_the_model_unchanged(ds, star):
    run = training.train(student("batchnorm", batch_size=10, momentum=0.0, steps=20), ds, "cpu")
    net = checkpoints.restore(run, len(run["checkpoints"]) - 1, ds).model
    before = {k: v.clone() for k, v in net.state_dict().items()}
    for options in ({}, {"bn_statistics": "recomputed"}):
        for mode in (True, False):
            net.train(mode)
            (row,) = ts.measure(net, ds, options, run["spec"], step=20)
            assert net.training is mode and row["step"] == 20 and row["epochs"] == 20 * 10 / 60
            assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert ts.measure(net, star, {}, run["spec"]) == []  # no rows off teacher-student data


def test_bn_family_theory_and_purity(ds):
    run = training.train(student("batchnorm", batch_size=10, momentum=0.0, steps=40), ds, "cpu")
    net = training.build(run["spec"], ds)
    net.load_state_dict(run["checkpoints"][-1]["model"])
    net.train()
    buffers = {k: v.clone() for k, v in net.state_dict().items()}
    rows = ts.run(run, ds, {"checkpoints": "last"}, torch.device("cpu"))
    assert len(rows) == 1
    r = rows[0]
    assert r["zeta"] == pytest.approx(3 / 20)  # mu_B and sigma_B: 1/M + 1/(2M)
    # primary: BN's gamma^2 is its output variance over the training set, so Eq. 3's objective
    # is least squares shrunk by 1 / (1 + zeta), at App. C.3's 3/(2M); no ridge
    assert r["curve"] == "shrinkage" and r["convention"] is None
    assert r["theory"] == pytest.approx(luo_theory.eps_shrinkage_linear(2.0, 0.25, 3 / 20))
    assert r["theory"] != pytest.approx(luo_theory.eps_wn_linear(2.0, 0.25, 3 / 20, "loss"),
                                        rel=0.02)
    assert r["theory_shrinkage"] == pytest.approx(r["theory"])
    assert r["rel_error"] == pytest.approx(r["gen_error"] / r["theory"] - 1)
    # Luo's own claim: the curve Fig. 1a prints, 1/(2M) with lam = zeta
    assert r["zeta_main"] == pytest.approx(1 / 20)
    assert r["theory_main"] == pytest.approx(luo_theory.eps_wn_linear(2.0, 0.25, 1 / 20,
                                                                      "paper"))
    assert r["rel_error_main"] == pytest.approx(r["gen_error"] / r["theory_main"] - 1)
    assert r["theory_main"] != pytest.approx(r["theory"], rel=0.02)
    x, y = ds.x_train.astype(np.float64), ds.y_train[:, 0].astype(np.float64)
    w = data.teacher_weights(30, 3)
    ridge = np.linalg.solve(x.T @ x + 2.0 * 0.15 * np.eye(30), x.T @ y)  # lam = alpha zeta
    ridged = ts.run(run, ds, {"checkpoints": "last", "bn_curve": "ridge"},
                    torch.device("cpu"))[0]  # the earlier reading, on request
    assert ridged["curve"] == "ridge" and ridged["convention"] == "loss"
    assert ridged["theory"] == pytest.approx(luo_theory.eps_wn_linear(2.0, 0.25, 3 / 20, "loss"))
    assert ridged["erm_theory"] == pytest.approx(np.sum((ridge - w) ** 2) / 30, rel=1e-6)
    paper = ts.run(run, ds, {"checkpoints": "last", "bn_curve": "ridge", "convention": "paper"},
                   torch.device("cpu"))[0]
    assert paper["theory"] == pytest.approx(luo_theory.eps_wn_linear(2.0, 0.25, 3 / 20))
    assert paper["theory_main"] == pytest.approx(r["theory_main"])
    shrunk = np.linalg.pinv(x) @ y / 1.15
    assert r["erm_shrinkage"] == pytest.approx(np.sum((shrunk - w) ** 2) / 30, rel=1e-6)
    assert r["erm_theory"] == pytest.approx(r["erm_shrinkage"])
    assert r["null_error"] == pytest.approx(0.0, abs=1e-9)  # alpha = 2: the span is everything
    bn = run["checkpoints"][-1]["model"]
    assert r["norm_gamma2"] == pytest.approx(float(bn["features.0.norm.weight"]) ** 2)
    assert all(torch.equal(v, buffers[k]) for k, v in net.state_dict().items()) and net.training
    exact = ts.run(run, ds, {"checkpoints": "last", "zeta_exact": True}, torch.device("cpu"))[0]
    assert exact["zeta"] == pytest.approx(luo_theory.zeta_bn(10, subtract_mean=True, exact=True))


def test_explicit_gamma_decay_uses_the_layers_zeta(ds):
    """The arm trains mean squared error + zeta gamma^2, ridge lam = alpha zeta: its curve is
    the 'loss' one whatever the convention option says (that one is for the BN arms)."""
    opts = {"weightnorm_gamma_decay": {"zeta": 0.05, "input_var": "fan_in"}}
    run = training.train(student("weightnorm_gamma_decay", batch_size=20, momentum=0.0,
                                 steps=30, options=opts), ds, "cpu")
    for conv in ("paper", "loss"):
        r = ts.run(run, ds, {"checkpoints": "last", "convention": conv}, torch.device("cpu"))[0]
        assert r["zeta"] == pytest.approx(0.05)
        assert r["theory"] == pytest.approx(luo_theory.eps_wn_linear(2.0, 0.25, 0.05, "loss"))
        assert r["convention"] == "loss" and np.isnan(r["theory_shrinkage"])
        assert np.isnan(r["theory_main"])  # BN family only


def test_unit_student_reaches_the_minimizers(ds):
    """Luo's head-free student: vanilla GD lands on the min-norm least-squares error of the
    draw (erm_sgd, numpy reference) and WN + gamma decay on its ridge minimizer (lam = alpha
    zeta for the loss as written: mean squared error + zeta gamma^2)."""
    run = training.train(student(arch="unit", lr=1.5, steps=600), ds, "cpu")
    r = ts.run(run, ds, {"checkpoints": "last"}, torch.device("cpu"))[0]
    assert r["head_weight"] == 1.0 and np.isnan(r["norm_gamma2"])
    x, y = ds.x_train.astype(np.float64), ds.y_train[:, 0].astype(np.float64)
    w = data.teacher_weights(30, 3)
    v = np.linalg.pinv(x) @ y
    assert r["gen_error"] == pytest.approx(np.sum((v - w) ** 2) / 30, rel=1e-3)
    opts = {"weightnorm_gamma_decay": {"zeta": 0.1, "input_var": "fan_in"}}
    wn = training.train(student("weightnorm_gamma_decay", arch="unit", lr=0.3, steps=3000,
                                options=opts), ds, "cpu")
    r = ts.run(wn, ds, {"checkpoints": "last"}, torch.device("cpu"))[0]  # default: "paper"
    ridge = np.linalg.solve(x.T @ x + 2.0 * 0.1 * np.eye(30), x.T @ y)
    assert r["erm_theory"] == pytest.approx(np.sum((ridge - w) ** 2) / 30, rel=1e-6)
    assert r["gen_error"] == pytest.approx(r["erm_theory"], rel=1e-3)
    assert r["norm_gamma2"] == pytest.approx(r["gamma2"], rel=1e-4)  # no head to trade with


def test_relu_student_and_other_data(ds, star):
    run = training.train(student(slope=0.0, steps=20), ds, "cpu")
    r = ts.run(run, ds, {"checkpoints": "last"}, torch.device("cpu"))[0]
    assert r["activation"] == "relu" and np.isnan(r["erm_sgd"])
    assert r["theory_sgd"] == pytest.approx(luo_theory.eps_sgd_relu(2.0, 0.25), nan_ok=True)
    assert r["gen_error"] == pytest.approx(r["test_mse"], rel=0.1)
    other = training.train(make_spec(norm="none", training={"lr": 0.1, "steps": 2}), star, "cpu")
    assert ts.run(other, star, {}, torch.device("cpu")) == []


@pytest.mark.parametrize("options,match", [
    ({"convention": "ridge"}, "'ridge'.*paper, loss"),
    ({"bn_statistics": "batch"}, "'batch'.*running, recomputed"),
    ({"zeta_exact": "yes"}, "zeta_exact"),
    ({"stride": 2}, "unknown teacher_student option"),
])
def test_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        measures.get("teacher_student").options.parse(options)


def test_registry_cli_and_figures(ds, gd_run, tmp_path):
    from bnstudy import plots
    from bnstudy.plots import teacher_student_findings as pts

    assert measures.get("teacher_student").tables == ("teacher_student",)
    data.save(ds, tmp_path / "d.npz")
    rc, outs = measure_cli(tmp_path, "teacher_student", [gd_run], tmp_path / "d.npz")
    assert rc == 0
    df = pd.read_parquet(outs["teacher_student"])
    assert {"experiment", "norm", "seed", "gen_error", "theory"} <= set(df.columns)
    bn = training.train(student("batchnorm", batch_size=20, momentum=0.0, steps=20), ds, "cpu")
    rows = [dict(r, experiment=e, norm=n, seed=0, dataset="ts", model="m")
            for e, run, n in (("a", gd_run, "none"), ("b", bn, "batchnorm"))
            for r in ts.run(run, ds, {}, torch.device("cpu"))]
    table = pd.DataFrame(rows)
    more = table.assign(alpha=1.0, experiment=table["experiment"] + "2")
    table = pd.concat([table, more, table[table["norm"] == "batchnorm"].assign(
        batch_size=10, experiment="sweep")], ignore_index=True)
    plots.load_all()
    for name in ("teacher_student_alpha", "teacher_student_batch_size", "teacher_student_curves"):
        assert plots.FAMILIES[name].scope == "study"
        plots.FAMILIES[name].draw([table], {})
        plots.FAMILIES[name].draw([table.iloc[0:0]], {})  # no teacher-student rows: a note
    text = pts.findings({"teacher_student": table})
    assert "none (full batch)" in text and "Vanilla target" in text and "Batch-size sweep" in text
    assert pts.findings({"teacher_student": table.iloc[0:0]}) == "No teacher-student runs."


def test_init_in_the_span_of_the_inputs_removes_the_alpha_below_1_artefact():
    """Issue 30, item 4: at alpha = 0.5 BN's gradient lies in the span of the training inputs
    and its batch statistics never see the rest, so a random initial direction keeps its part
    outside that span for good (the review's +16-35% against the closed forms). The measure
    reports that part (null_error); init_span: data starts without it, and its run is exactly
    the random-init run with that part removed."""
    half = data.make("teacher_student", {**OPTS, "N": 40, "alpha": 0.5})
    rows = {}
    for norm in ("batchnorm", "weightnorm_varonly_bn"):
        for span in ("all", "data"):
            spec = student(norm, arch="unit", batch_size=10, momentum=0.0, steps=200)
            spec["model_config"]["init_span"] = span
            run = training.train(spec, half, "cpu")
            rows[norm, span] = ts.run(run, half, {}, torch.device("cpu"))
    for norm in ("batchnorm", "weightnorm_varonly_bn"):
        rand, span = rows[norm, "all"][-1], rows[norm, "data"][-1]
        assert all(abs(r["null_error"]) < 1e-6 for r in rows[norm, "data"])  # float32 rounding
        assert rand["null_error"] > 1e-3  # what a random direction leaves outside the span
        assert span["curve"] == "shrinkage" and span["erm_theory"] == span["erm_shrinkage"]
    # plain BN: the same trajectory inside the span, so the same student without that part
    rand, span = rows["batchnorm", "all"][-1], rows["batchnorm", "data"][-1]
    assert rand["gen_error"] - rand["null_error"] == pytest.approx(span["gen_error"], rel=1e-4)


def test_init_span_is_the_unit_students_and_names_the_choices():
    with pytest.raises(ValueError, match="init_span='data' is for the unit student only"):
        models.ModelConfig.from_dict({"arch": "mlp", "init_span": "data"})
    with pytest.raises(ValueError, match="unknown init_span 'rows'; valid choices: all, data"):
        models.ModelConfig.from_dict({"arch": "unit", "init_span": "rows"})
    x = torch.randn(5, 12, dtype=torch.float64)
    for norm in ("none", "weightnorm_varonly_bn"):
        cfg = models.ModelConfig.from_dict({"arch": "unit", "init_span": "data",
                                            "init": "orthogonal"})
        net = models.build_model(cfg, norm, (12,), 1)
        init.init_in_data_span(net, cfg, x)
        (lin,) = models.maps(net)
        w = lin.weight.detach().double().reshape(-1)  # weight norm: the effective weight
        coef = torch.linalg.lstsq(x.T, w).solution
        assert torch.allclose(x.T @ coef, w, atol=1e-6)  # in the span of the inputs
        assert float(w.norm()) > 0.1
