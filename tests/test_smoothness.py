import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec, measure_cli

from bnstudy import data, io, plots
from bnstudy.cli import main as cli
from bnstudy.measures.smoothness import compute as smoothness
from bnstudy.measures.smoothness import hessian
from bnstudy.networks.hessian import gradient_and_hvp
from bnstudy.plots import smoothness as smoothness_plots
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

CPU = torch.device("cpu")
TRAIN = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 6, "eval_every": 3,
         "checkpoints": [0, 3]}


def _sym(eigs, seed=0):
    q, _ = torch.linalg.qr(torch.randn(len(eigs), len(eigs), generator=torch.Generator()
                                       .manual_seed(seed), dtype=torch.float64))
    return q @ torch.diag(torch.tensor(eigs, dtype=torch.float64)) @ q.T


# --- closed forms on a quadratic loss ------------------------------------------------------

def test_quadratic_probes_match_closed_forms():
    h = _sym([4.0, 2.5, 1.0, 0.3, 0.1, 0.05, 2.0, 0.0], seed=1)
    w0 = torch.randn(8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    # Two parameter tensors (a vector and a matrix): norms are global over their concatenation.
    a = w0[:2].clone().requires_grad_(True)
    b = w0[2:].reshape(2, 3).clone().requires_grad_(True)

    def loss():
        w = torch.cat([a, b.reshape(-1)])
        return 0.5 * w @ h @ w

    lr, mults = 0.3, [0.5, 1.0, 2.0, 4.0]
    line = smoothness.probe_line(smoothness.Objective(loss, [a, b]), lr, mults)
    g = h @ w0
    hg = (h @ g).norm().item()
    assert line.loss == pytest.approx((0.5 * w0 @ h @ w0).item(), rel=1e-12)
    assert line.grad_norm == pytest.approx(g.norm().item(), rel=1e-12)
    assert line.passes == 1 + len(mults)
    for m, p in zip(mults, line.probes, strict=True):
        eta = m * lr
        w = w0 - eta * g
        assert p["eta"] == pytest.approx(eta)
        assert p["loss"] == pytest.approx((0.5 * w @ h @ w).item(), rel=1e-10)
        assert p["grad_diff"] == pytest.approx(eta * hg, rel=1e-10)
        assert p["distance"] == pytest.approx(eta * g.norm().item(), rel=1e-12)
        assert p["beta"] == pytest.approx(hg / g.norm().item(), rel=1e-10)
    row = smoothness.summarize(line)
    losses = [(0.5 * (w0 - m * lr * g) @ h @ (w0 - m * lr * g)).item() for m in mults]
    assert row["loss_min"] == pytest.approx(min(losses), rel=1e-10)
    assert row["loss_max"] == pytest.approx(max(losses), rel=1e-10)
    assert row["grad_pred_max"] == pytest.approx(4.0 * lr * hg, rel=1e-10)
    assert row["beta_eff"] == pytest.approx(hg / g.norm().item(), rel=1e-10)
    assert math.isnan(row["hessian_top"])
    assert torch.equal(torch.cat([a, b.reshape(-1)]).detach(), w0), "leaves back at w"


def test_top_eigenvalue_of_a_quadratic():
    h = _sym([5.0, 2.0, 1.0, 0.5, 0.1, 0.0], seed=3)
    w = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    w.requires_grad_(True)
    line = smoothness.probe_line(smoothness.Objective(lambda: 0.5 * w @ h @ w, [w]), 0.1, [1.0],
                                 {"iters": 500, "tol": 1e-12, "seed": 0})
    assert line.hessian.top == pytest.approx(5.0, rel=1e-8)
    assert line.hessian.converged


def test_top_is_largest_algebraic_when_negative_curvature_dominates():
    h = _sym([-6.0, 3.0, 1.0, 0.5, -1.0, 0.2], seed=5)
    res = hessian.top_eigenvalue(lambda v: [h @ v[0]], [torch.zeros(6, dtype=torch.float64)],
                                 iters=2000, tol=1e-10, seed=1)
    assert res.dominant == pytest.approx(-6.0, rel=1e-8)
    assert res.top == pytest.approx(3.0, rel=1e-6)
    assert res.converged


def test_lanczos_finds_top_and_dominant_in_few_products_where_power_iteration_needs_many():
    """Negative curvature dominating by 2x and a top eigenvalue 500 above a cluster: the power
    iteration this replaced needed over a hundred products here (a shifted second phase whose
    ratio of eigenvalues is 1500 : 1001); Lanczos separates both extremes in a few."""
    eigs = [-1000.0, 500.0, *np.linspace(-1.0, 1.0, 58)]
    h = _sym(eigs, seed=7)
    like = [torch.zeros(len(eigs), dtype=torch.float64)]
    res = hessian.top_eigenvalue(lambda v: [h @ v[0]], like, iters=1000, tol=1e-8)
    assert res.dominant == pytest.approx(-1000.0, rel=1e-8)
    assert res.top == pytest.approx(500.0, rel=1e-8) and res.converged
    assert res.iterations <= 8


def test_lanczos_stops_on_the_residual_not_on_a_still_moving_estimate():
    """A spread spectrum: five steps cannot meet 1e-8, and the flag says so; with enough steps
    the top Ritz value is the top eigenvalue to the tolerance's order."""
    eigs = np.linspace(-1.0, 2.0, 200)
    h = _sym(list(eigs), seed=8)
    like = [torch.zeros(len(eigs), dtype=torch.float64)]
    short = hessian.top_eigenvalue(lambda v: [h @ v[0]], like, iters=5, tol=1e-8)
    assert not short.converged and short.iterations == 5 and short.top < 2.0
    full = hessian.top_eigenvalue(lambda v: [h @ v[0]], like, iters=200, tol=1e-8)
    assert full.converged and full.top == pytest.approx(2.0, abs=1e-7)
    assert full.dominant == pytest.approx(2.0, abs=1e-7)


def test_top_eigenvalue_reports_non_convergence_and_zero_hessian():
    h = _sym([1.0, 0.99, 0.5], seed=6)
    res = hessian.top_eigenvalue(lambda v: [h @ v[0]], [torch.zeros(3, dtype=torch.float64)],
                                 iters=2, tol=0.0)
    assert not res.converged and res.iterations == 2
    exact = hessian.top_eigenvalue(lambda v: [h @ v[0]], [torch.zeros(3, dtype=torch.float64)],
                                   iters=3, tol=0.0)  # the whole space: an invariant subspace
    assert exact.converged and exact.top == pytest.approx(1.0, rel=1e-12)
    zero = hessian.top_eigenvalue(lambda v: [torch.zeros_like(v[0])], [torch.zeros(3)])
    assert zero.top == 0.0 and zero.converged
    nan = hessian.top_eigenvalue(lambda v: [torch.full_like(v[0], float("nan"))],
                                 [torch.zeros(3)])
    assert math.isnan(nan.top) and not nan.converged
    with pytest.raises(ValueError, match="iters"):
        hessian.top_eigenvalue(lambda v: v, [torch.zeros(3)], iters=0)


def test_top_eigenvalue_far_below_a_dominant_negative_one_is_found_at_the_default_tolerance():
    """The default study's DLN with LayerNorm at initialization (seed 1, the full training set):
    negative curvature dominates (about -5346) and the top eigenvalue is about 210. Held to the
    spectral radius, the tolerance 1e-2 let the estimate stop at an interior eigenvalue (Lanczos:
    1.5 after 4 products; the power iteration before it: -0.53); held to its own scale it finds
    the top, as a tight run does."""
    ds = data.make("gaussian_linear", {"n_train": 1000, "n_test": 1000, "dim": 10, "seed": 0})
    spec = make_spec(norm="layernorm", seed=1, model={"arch": "dln", "depth": 25,
                                                      "init": "xavier"},
                     training={"lr": 0.01, "momentum": 0.0, "batch_size": "full", "steps": 1,
                               "eval_every": 1, "checkpoints": [0]},
                     dataset="gaussian_linear")
    model = training.build(spec, ds).train()
    x, y = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    leaves = list(model.parameters())
    g, hvp = gradient_and_hvp(training.loss_fn(ds.task)(model(x), y), leaves)
    tight = hessian.top_eigenvalue(hvp, g, iters=400, tol=1e-7)
    assert tight.converged and tight.dominant < -20 * tight.top < 0
    default = hessian.top_eigenvalue(hvp, g, iters=50, tol=1e-2)
    assert default.converged
    assert default.top == pytest.approx(tight.top, rel=1e-2)
    assert default.dominant == pytest.approx(tight.dominant, rel=1e-2)


def test_nonfinite_probes_count_as_unbounded():
    nan, inf = float("nan"), float("inf")
    probes = [{"loss": 1.0, "grad_diff": 2.0, "beta": 4.0},
              {"loss": nan, "grad_diff": nan, "beta": nan},
              {"loss": inf, "grad_diff": inf, "beta": inf}]
    row = smoothness.summarize(smoothness.LineResult(0.5, 1.0, probes, 4))
    assert row["loss_min"] == 1.0 and row["loss_max"] == inf
    assert row["grad_pred_max"] == inf and row["beta_eff"] == inf
    assert row["nonfinite_probes"] == 2


# --- on real models, through the checkpoints ----------------------------------------------

def test_one_layer_linear_net_matches_closed_form_at_every_checkpoint(linear_ds):
    """A depth-1 DLN is W x with MSE: L = |XW^T - Y|^2/(Nd), H v = (2/(Nd)) V X^T X."""
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 1, "init": "xavier"},
                     training=TRAIN)
    run = training.train(spec, linear_ds, "cpu")
    opts = {"n_probes": 5, "hessian": True, "hessian_iters": 200, "hessian_tol": 1e-6}
    out = smoothness.run(run, linear_ds, opts, CPU)
    assert [r["step"] for r in out["smoothness"]] == [0, 3, 6]
    mults = np.geomspace(0.01, 30.0, 5)  # the DLN default range
    for i, row in enumerate(out["smoothness"]):
        ck = run["checkpoints"][i]
        w = ck["model"]["head.weight"].double().numpy()
        idx = ck["batch"].numpy()
        x, y = linear_ds.x_train[idx].astype(float), linear_ds.y_train[idx].astype(float)
        c = 2.0 / y.size
        g = c * (x @ w.T - y).T @ x
        hg = np.linalg.norm(c * g @ x.T @ x)
        lam = c * np.linalg.eigvalsh(x.T @ x).max()
        assert row["grad_norm"] == pytest.approx(np.linalg.norm(g), rel=1e-5)
        assert row["beta_eff"] == pytest.approx(hg / np.linalg.norm(g), rel=1e-4)
        assert row["hessian_top"] == pytest.approx(lam, rel=1e-3)
        assert row["beta_eff"] <= row["hessian_top"] * (1 + 1e-3)
        probes = [p for p in out["smoothness_probes"] if p["step"] == row["step"]]
        assert [p["multiplier"] for p in probes] == pytest.approx(mults)
        for m, p in zip(mults, probes, strict=True):
            eta = m * TRAIN["lr"]
            loss = np.mean((x @ (w - eta * g).T - y) ** 2)
            assert p["loss"] == pytest.approx(loss, rel=1e-4)
            # float32: the difference of two close gradients has an absolute error ~ eps |g|
            assert p["grad_diff"] == pytest.approx(eta * hg, rel=1e-4,
                                                   abs=1e-6 * np.linalg.norm(g))


@pytest.mark.parametrize("norm", ["none", "batchnorm", "layernorm", "weightnorm"])
def test_probe_matches_a_manual_step_with_batch_statistics(star, norm):
    model = training.build(make_spec(norm=norm, model={"arch": "mlp", "depth": 2, "width": 8}),
                           star)
    x, y = torch.as_tensor(star.x_train[:16]), torch.as_tensor(star.y_train[:16])
    lr, m = 0.05, 2.0
    row, probes, _ = smoothness.measure(model, x, y, star.task, lr,
                                        {"multipliers": [m, m], "n_probes": 1})
    ref = copy.deepcopy(model).train()
    loss = torch.nn.functional.cross_entropy(ref(x), y)
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    assert row["loss"] == pytest.approx(loss.item(), rel=1e-6)
    with torch.no_grad():
        for p, g in zip(ref.parameters(), grads, strict=True):
            p -= m * lr * g
    moved = torch.nn.functional.cross_entropy(ref(x), y)
    g2 = torch.autograd.grad(moved, list(ref.parameters()))
    diff = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(g2, grads, strict=True)))
    assert probes[0]["loss"] == pytest.approx(moved.item(), rel=1e-5)
    assert probes[0]["grad_diff"] == pytest.approx(diff.item(), rel=1e-4)
    assert row["bn_statistics"] == probes[0]["bn_statistics"] == "batch"


def test_running_statistics_option_uses_eval_mode(star):
    model = training.build(make_spec(norm="batchnorm"), star)
    with torch.no_grad():  # give the running buffers non-trivial values
        model.train()
        model(torch.as_tensor(star.x_test))
    x, y = torch.as_tensor(star.x_train[:16]), torch.as_tensor(star.y_train[:16])
    row, _, _ = smoothness.measure(model, x, y, star.task, 0.05, {"bn_statistics": "running"})
    ref = copy.deepcopy(model).eval()
    assert row["loss"] == pytest.approx(
        torch.nn.functional.cross_entropy(ref(x), y).item(), rel=1e-6)
    assert row["bn_statistics"] == "running"


@pytest.mark.parametrize("norm", ["batchnorm", "weightnorm"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_measure_is_pure(star, norm, mode):
    model = training.build(make_spec(norm=norm), star)
    model.train(mode == "train")
    model.head.train(mode != "train")  # a mixed state must come back exactly as it was
    modes = [m.training for m in model.modules()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.as_tensor(star.x_train[:16]), torch.as_tensor(star.y_train[:16])
    smoothness.measure(model, x, y, star.task, 0.05, {"hessian": True, "hessian_iters": 3})
    assert [m.training for m in model.modules()] == modes
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_run_tables_are_deterministic_and_complete(star):
    run = training.train(make_spec(norm="batchnorm", training=TRAIN), star, "cpu")
    opts = {"n_probes": 3, "spacing": "linear", "hessian": True, "hessian_iters": 5}
    saved = copy.deepcopy(run["checkpoints"])
    a = smoothness.run(run, star, opts, CPU)
    for ck, old in zip(run["checkpoints"], saved, strict=True):
        assert all(torch.equal(ck["model"][k], old["model"][k]) for k in old["model"])
    b = smoothness.run(run, star, opts, CPU)
    pd.testing.assert_frame_equal(pd.DataFrame(a["smoothness"]), pd.DataFrame(b["smoothness"]),
                                  check_exact=True)
    pd.testing.assert_frame_equal(pd.DataFrame(a["smoothness_probes"]),
                                  pd.DataFrame(b["smoothness_probes"]), check_exact=True)
    df, probes = pd.DataFrame(a["smoothness"]), pd.DataFrame(a["smoothness_probes"])
    need = {"step", "loss_min", "loss_max", "grad_pred_max", "beta_eff", "hessian_top",
            "bn_statistics"}
    assert need <= set(df.columns)
    assert {"step", "multiplier", "loss", "grad_diff"} <= set(probes.columns)
    assert len(probes) == 3 * len(df) == 3 * len(run["checkpoints"])
    assert probes["multiplier"].unique() == pytest.approx([0.5, 2.25, 4.0])
    assert (df["loss_min"] <= df["loss_max"]).all() and df["hessian_top"].notna().all()
    off = smoothness.run(run, star, {**opts, "hessian_max_params": 10}, CPU)["smoothness"]
    assert all(math.isnan(r["hessian_top"]) and r["hessian_iterations"] == 0 for r in off)
    assert [r["beta_eff"] for r in off] == list(df["beta_eff"])
    # run() reuses one model in place; a fresh restore through the pure path agrees exactly
    for i in range(len(run["checkpoints"])):
        r = checkpoints.restore(run, i, star, CPU)
        idx = r.batch
        x, y = torch.as_tensor(star.x_train)[idx], torch.as_tensor(star.y_train)[idx]
        row = smoothness.measure(r.model, x, y, star.task, TRAIN["lr"], opts, "mlp")[0]
        assert row == {k: v for k, v in a["smoothness"][i].items() if k in row}


def test_multipliers_per_arch_and_spacing():
    o = smoothness.Options.parse({"multipliers_by_arch": {"vgg": [1, 2]}, "n_probes": 3})
    assert o.multiplier_values("mlp") == pytest.approx([0.5, math.sqrt(2), 4.0])
    assert o.multiplier_values("vgg") == pytest.approx([1.0, math.sqrt(2), 2.0])
    assert smoothness.Options().multiplier_values("dln")[[0, -1]] == pytest.approx([0.01, 30])
    lin = smoothness.Options.parse({"spacing": "linear", "n_probes": 3})
    assert lin.multiplier_values("mlp") == pytest.approx([0.5, 2.25, 4.0])


@pytest.mark.parametrize("bad, message", [
    ({"spacing": "cubic"}, "'cubic'.*log, linear"),
    ({"bn_statistics": "eval"}, "'eval'.*batch, running"),
    ({"multipliers": [4, 0.5]}, "0 < min <= max"),
    ({"multipliers": [0.5]}, "pair"),
    ({"multipliers_by_arch": {"resnet": [1, 2]}}, "'resnet'.*mlp, dln, vgg"),
    ({"n_probes": 0}, "n_probes"),
    ({"n_probes": True}, "n_probes"),
    ({"hessian": "yes"}, "smoothness.hessian='yes': need true or false"),
    ({"probes": 3}, "unknown smoothness option.*'probes'"),
])
def test_bad_options_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        smoothness.Options.parse(bad)


# --- CLI, figures and report text -------------------------------------------------------

def test_cli_plots_and_findings(star, tmp_path):
    paths = {}
    data.save(star, tmp_path / "star.npz")
    runs = [training.train(make_spec(norm=norm, seed=seed, training=TRAIN), star, "cpu")
            for norm in ("none", "batchnorm") for seed in (0, 1)]
    rc, outs = measure_cli(tmp_path, "smoothness", runs, tmp_path / "star.npz",
                           options={"n_probes": 3, "hessian": True, "hessian_iters": 5})
    assert rc == 0
    for t, p in outs.items():
        paths.setdefault(t, []).append(p)
    frames = {t: pd.concat([pd.read_parquet(p) for p in ps]) for t, ps in paths.items()}
    assert set(frames["smoothness"]["norm"]) == {"none", "batchnorm"}
    assert len(frames["smoothness_probes"]) == 3 * len(frames["smoothness"])
    for t, df in frames.items():
        io.write_table(df, tmp_path / f"{t}.parquet", {})
    for fam, t in (("smoothness_landscape", "smoothness"), ("smoothness_probes",
                                                           "smoothness_probes")):
        out = tmp_path / f"{fam}.png"
        plots.render(fam, [str(tmp_path / f"{t}.parquet")], str(out), {}, experiment="t")
        assert out.stat().st_size > 10_000
    text = smoothness_plots.findings(frames)
    bn = frames["smoothness"].query("norm == 'batchnorm'")
    first, last = (bn.loc[bn["step"] == s, "beta_eff"].mean() for s in (0, TRAIN["steps"]))
    assert f"batchnorm: beta_eff {first:.3g} → {last:.3g} (median {bn['beta_eff'].median():.3g})" \
        in text
    assert "relative to no normalization" in text
    # a grid naming a run that was never trained: exit code 2, no table written
    x = tmp_path / "x"
    bad = cli.main(["measure", "smoothness", "--results", str(tmp_path / "results"),
                    "--experiment", "t", "--grid", '{"t": {"norms": ["none"], "seeds": [7]}}',
                    "--data", str(tmp_path / "star.npz"),
                    "--out", str(x / "smoothness.parquet"), str(x / "smoothness_probes.parquet")])
    assert bad == 2 and not x.exists()


def test_probes_use_the_scheduled_lr_and_the_augmented_batch_of_the_step(digits):
    """With momentum 0 the update of step t is exactly w - lr_t g on the inputs update t saw, so
    the probe at multiplier 1 lands on the next checkpoint's weights: its distance is
    ||W^{t+1} - W^t|| and its lr is the schedule's (not the configured base lr)."""
    train = {"lr": 0.2, "momentum": 0.0, "batch_size": 16, "steps": 6, "eval_every": 6,
             "checkpoints": [0, 1, 4, 5], "lr_schedule": "inverse_time", "lr_decay": 0.5,
             "augment": True, "augment_padding": 2}
    spec = make_spec(norm="batchnorm", model={"arch": "vgg", "channels": [4, "M", 6]},
                     training=train)
    run = training.train(spec, digits, "cpu")
    out = smoothness.run(run, digits, {"multipliers": [1, 1], "n_probes": 1}, CPU)
    cks, rows = run["checkpoints"], out["smoothness"]
    for i in (0, 2):  # steps 0 -> 1 and 4 -> 5
        step = int(cks[i]["step"])
        assert rows[i]["lr"] == pytest.approx(0.2 / (1 + 0.5 * step))
        assert rows[i]["lr"] == pytest.approx(cks[i]["optimizer"]["param_groups"][0]["lr"])
        moved = torch.cat([(cks[i + 1]["model"][n] - p).reshape(-1)
                           for n, p in cks[i]["model"].items() if "running" not in n
                           and "num_batches" not in n]).double().norm().item()
        assert out["smoothness_probes"][i]["distance"] == pytest.approx(moved, rel=1e-4)
