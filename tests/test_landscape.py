"""The landscape measure: filter normalization, slices, and the Hessian's trace, top-k and
density against an exact eigen-decomposition of a tiny net's Hessian."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec
from torch import nn
from torch.func import functional_call

from bnstudy.measures import landscape
from bnstudy.measures.landscape import compute, curvature
from bnstudy.train import loop as training

CPU = torch.device("cpu")
TINY = {"arch": "mlp", "depth": 2, "width": 3, "slope": 0.0, "init": "kaiming"}
TRAIN = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 6, "eval_every": 3,
         "checkpoints": [0, 3, 6]}
SMALL = {"sample_size": 32, "line_points": 5, "interpolation_points": 5, "grid_points": 3,
         "trace_samples": 4, "top_k": 2, "lanczos_steps": 6, "density_runs": 2,
         "checkpoints": "all", "grid_checkpoints": "last"}


# --- filter normalization ------------------------------------------------------------------


@pytest.mark.parametrize("bias", ["zero", "weights"])
def test_each_filter_of_the_direction_has_its_weights_norm(bias):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5), nn.ReLU(), nn.Flatten(),
                        nn.Linear(5 * 4 * 4, 7), nn.LayerNorm(7), nn.Linear(7, 2))
    w = compute.trainable(net)
    norms = compute.normalizer_parameters(net)
    assert norms == {"1.weight", "1.bias", "5.weight", "5.bias"}
    raw = compute.raw_direction(w, torch.Generator().manual_seed(1))
    d = compute.filter_normalize(raw, w, norms, bias)
    for name in ("0.weight", "4.weight", "6.weight"):  # conv (5,3,3,3), linear (7,80), (2,7)
        per_filter = d[name].reshape(len(d[name]), -1).norm(dim=1)
        want = w[name].detach().reshape(len(w[name]), -1).norm(dim=1)
        assert per_filter == pytest.approx(want, rel=1e-5)
        # the direction is the raw draw's, rescaled per filter (not replaced)
        cos = torch.nn.functional.cosine_similarity(d[name].reshape(len(d[name]), -1),
                                                    raw[name].reshape(len(d[name]), -1))
        assert cos == pytest.approx(torch.ones(len(cos)), abs=1e-6)
    for name in norms:
        assert torch.count_nonzero(d[name]) == 0
    for name in ("0.bias", "4.bias", "6.bias"):
        want = torch.zeros_like(w[name]) if bias == "zero" else w[name].detach()
        assert torch.equal(d[name], want)


def test_a_models_blocks_normalizer_parameters_are_found(star):
    model = training.build(make_spec(norm="batchnorm", model=TINY), star)
    names = compute.normalizer_parameters(model)
    assert names and all(".norm." in n for n in names)
    plain = training.build(make_spec(norm="none", model=TINY), star)
    assert compute.normalizer_parameters(plain) == set()


# --- curvature against the exact Hessian ---------------------------------------------------


def _exact(model, x, y, task):
    twin = copy.deepcopy(model)
    names = list(compute.trainable(twin))
    shapes = [p.shape for p in compute.trainable(twin).values()]
    flat0 = torch.cat([p.detach().reshape(-1) for p in compute.trainable(twin).values()])
    buffers = dict(twin.named_buffers())
    lf = training.loss_fn(task)

    def f(flat):
        parts, i = {}, 0
        for n, s in zip(names, shapes, strict=True):
            k = math.prod(s)
            parts[n] = flat[i: i + k].view(s)
            i += k
        return lf(functional_call(twin, (parts, buffers), (x,)), y)

    h = torch.autograd.functional.hessian(f, flat0)
    return torch.linalg.eigvalsh((h + h.T) / 2).numpy(), h.numpy()


@pytest.fixture(params=["none", "batchnorm"])
def tiny(request, star):
    model = training.build(make_spec(norm=request.param, model=TINY), star).double()
    model.train()
    x = torch.as_tensor(star.x_train[:24]).double()
    y = torch.as_tensor(star.y_train[:24])
    hvp = curvature.hvp_operator(training.loss_fn(star.task)(model(x), y),
                                 list(compute.trainable(model).values()))
    eig, h = _exact(model, x, y, star.task)
    return model, x, y, hvp, eig, h


def test_hutchinson_trace_is_within_three_standard_errors(tiny):
    model, _, _, hvp, eig, h = tiny
    leaves = list(compute.trainable(model).values())
    per_draw, sizes = curvature.hutchinson(hvp, leaves, 200, seed=3)
    trace, se = curvature.mean_se(per_draw.sum(axis=1))
    assert abs(trace - eig.sum()) <= 3 * se
    assert se > 0
    # per block: the diagonal blocks' exact traces, and the blocks sum to the total
    i = 0
    for j, n in enumerate(sizes):
        t, s = curvature.mean_se(per_draw[:, j])
        assert abs(t - np.trace(h[i: i + n, i: i + n])) <= 3 * s + 1e-12
        i += n


def test_top_k_matches_the_exact_eigenvalues(tiny):
    model, _, _, hvp, eig, _ = tiny
    leaves = list(compute.trainable(model).values())
    top, res = curvature.top_k(hvp, leaves, 3, steps=len(eig), seed=0)
    want = np.sort(eig)[::-1][:3]
    assert top == pytest.approx(want, rel=1e-4, abs=1e-8 * abs(want[0]))
    assert (res <= 1e-6 * abs(want[0])).all()


def test_density_moments_match_the_exact_spectrum(tiny):
    model, _, _, hvp, eig, _ = tiny
    leaves = list(compute.trainable(model).values())
    runs = curvature.density(hvp, leaves, 64, steps=5, seed=1)
    for theta, w, _ in runs:
        assert w.sum() == pytest.approx(1.0, abs=1e-10)
        assert theta.min() >= eig.min() - 1e-8 and theta.max() <= eig.max() + 1e-8
    for p in (1, 2, 3):  # Gauss quadrature with 5 nodes is exact for degree <= 9
        per_run = np.array([(w * theta ** p).sum() for theta, w, _ in runs])
        mean, se = curvature.mean_se(per_run)
        assert abs(mean - (eig ** p).mean()) <= 3 * se + 1e-12


def test_lanczos_quadrature_is_exact_for_each_start_vector(tiny):
    model, _, _, hvp, eig, h = tiny
    leaves = list(compute.trainable(model).values())
    gen = torch.Generator().manual_seed(7)
    v = [torch.sign(torch.randn(p.shape, generator=gen, dtype=torch.float64)) for p in leaves]
    flat = torch.cat([t.reshape(-1) for t in v]).numpy()
    flat = flat / np.linalg.norm(flat)
    theta, w, _ = curvature.lanczos(hvp, v, 4)
    for p in range(0, 8):
        exact = flat @ np.linalg.matrix_power(h, p) @ flat
        assert (w * theta ** p).sum() == pytest.approx(exact, rel=1e-8, abs=1e-10)


# --- the measure -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bn_run(star):
    return training.train(make_spec(norm="batchnorm", training=TRAIN), star, "cpu")


def test_tables_are_deterministic_complete_and_the_run_unchanged(bn_run, star):
    saved = copy.deepcopy(bn_run["checkpoints"])
    a = landscape.run(bn_run, star, SMALL, CPU)
    b = landscape.run(bn_run, star, SMALL, CPU)
    for ck, old in zip(bn_run["checkpoints"], saved, strict=True):
        assert all(torch.equal(ck["model"][k], old["model"][k]) for k in old["model"])
    for t in landscape.TABLES:
        pd.testing.assert_frame_equal(pd.DataFrame(a[t]), pd.DataFrame(b[t]), check_exact=True)
    lines = pd.DataFrame(a["landscape"])
    # random line at every checkpoint; the interpolation line away from the initialization
    assert lines.groupby(["step", "line"]).size().to_dict() == {
        (0, "random"): 5, (3, "interpolation"): 5, (3, "random"): 5,
        (6, "interpolation"): 5, (6, "random"): 5}
    assert set(pd.DataFrame(a["landscape_grid"])["step"]) == {6}
    assert len(a["landscape_grid"]) == 9
    curv = pd.DataFrame(a["landscape_curvature"])
    assert curv["trace_se"].gt(0).all() and curv["hessian_top"].notna().all()
    spec = pd.DataFrame(a["landscape_spectrum"])
    assert set(spec["kind"]) == {"top", "density"}
    other = landscape.run(bn_run, star, {**SMALL, "seed": 1}, CPU)
    assert not pd.DataFrame(other["landscape_grid"]).equals(pd.DataFrame(a["landscape_grid"]))


def test_slices_pass_through_the_checkpoint_and_the_initialization(bn_run, star):
    opts = landscape.Options.parse({**SMALL, "curvature": False})
    out = landscape.run(bn_run, star, opts, CPU)
    lines = pd.DataFrame(out["landscape"])
    grid = pd.DataFrame(out["landscape_grid"])
    seed = compute.derived_seed(0, 0)
    idx = torch.randperm(64, generator=torch.Generator().manual_seed(seed))[:32]
    x, y = torch.as_tensor(star.x_train)[idx], torch.as_tensor(star.y_train)[idx]
    lf = training.loss_fn(star.task)

    def loss_at(i):
        model = training.build(bn_run["spec"], star)
        model.load_state_dict(bn_run["checkpoints"][i]["model"])
        with torch.no_grad():
            return float(lf(model.train()(x), y))

    here, init = loss_at(2), loss_at(0)
    last = lines[lines["step"] == 6]
    rand = last[last["line"] == "random"].set_index("coord")["loss"]
    interp = last[last["line"] == "interpolation"].set_index("coord")["loss"]
    assert rand[0.0] == pytest.approx(here, rel=1e-6)
    assert interp[1.0] == pytest.approx(here, rel=1e-5)
    assert interp[0.0] == pytest.approx(init, rel=1e-5)
    centre = grid[(grid["coord_1"] == 0) & (grid["coord_2"] == 0)]["loss"].item()
    assert centre == pytest.approx(here, rel=1e-6)
    # the random line is the grid's first axis (grid_range = line_range here: [-1, 1])
    axis = grid[grid["coord_2"] == 0].set_index("coord_1")["loss"]
    assert axis[1.0] == pytest.approx(rand[1.0], rel=1e-5)
    assert curvature_free(out)


def curvature_free(out):
    return not (out["landscape_curvature"] or out["landscape_spectrum"]
                or out["landscape_blocks"])


@pytest.mark.parametrize("norm", ["none", "batchnorm", "noisy_batchnorm", "l1norm"])
def test_vmapped_chunks_match_one_pass_per_point(star, norm):
    model = training.build(make_spec(norm=norm), star)
    x, y = torch.as_tensor(star.x_train[:32]), torch.as_tensor(star.y_train[:32])
    w = {n: p.detach().clone() for n, p in compute.trainable(model).items()}
    gen = torch.Generator().manual_seed(0)
    dirs = [compute.filter_normalize(compute.raw_direction(w, gen), w,
                                     compute.normalizer_parameters(model)) for _ in range(2)]
    c = np.array([[a, b] for a in (-1.0, 0.0, 0.5) for b in (-0.5, 1.0)])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batched = compute.Slicer(model, x, y, star.task, "batch", 3, 4).losses(w, dirs, c)
    looped = compute.Slicer(model, x, y, star.task, "batch", 3, 0).losses(w, dirs, c)
    assert batched == pytest.approx(looped, rel=1e-5)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_large_models_get_the_stochastic_estimates(bn_run, star):
    out = landscape.run(bn_run, star, {**SMALL, "hessian_max_params": 10,
                                       "checkpoints": "last", "grid_checkpoints": "none"}, CPU)
    curv = pd.DataFrame(out["landscape_curvature"])
    assert curv["hessian_top"].isna().all() and np.isfinite(curv["trace"]).all()
    assert not out["landscape_spectrum"]  # no Lanczos basis above hessian_max_params
    assert pd.DataFrame(out["landscape_blocks"])["trace"].notna().all()


def test_top_k_are_the_first_density_runs_largest_ritz_values(bn_run, star):
    out = landscape.run(bn_run, star, {**SMALL, "checkpoints": "last",
                                       "grid_checkpoints": "none"}, CPU)
    spec = pd.DataFrame(out["landscape_spectrum"])
    top = spec[spec["kind"] == "top"].sort_values("rank")["eigenvalue"].to_numpy()
    first = spec[(spec["kind"] == "density") & (spec["run"] == 0)].sort_values("rank")
    assert top == pytest.approx(first["eigenvalue"].to_numpy()[:2])
    assert pd.DataFrame(out["landscape_curvature"])["hessian_top"].item() == top[0]
    alone = landscape.run(bn_run, star, {**SMALL, "checkpoints": "last", "density_runs": 0,
                                         "grid_checkpoints": "none"}, CPU)
    kinds = pd.DataFrame(alone["landscape_spectrum"])["kind"]
    assert set(kinds) == {"top"} and len(kinds) == 2


def test_per_block_traces_sum_to_the_total(bn_run, star):
    out = landscape.run(bn_run, star, {**SMALL, "trace_blocks": True, "checkpoints": "last",
                                       "grid_checkpoints": "none"}, CPU)
    curv = pd.DataFrame(out["landscape_curvature"])
    blocks = pd.DataFrame(out["landscape_blocks"])
    assert len(blocks) == len(compute.trainable(training.build(bn_run["spec"], star)))
    assert blocks["trace"].sum() == pytest.approx(curv["trace"].item())
    assert blocks["n_params"].sum() == curv["n_params"].item()
    assert compute.TABLES == landscape.TABLES


@pytest.mark.parametrize("bad, message", [
    ({"line_range": [1, -1]}, "landscape.line_range"),
    ({"grid_range": [0]}, "landscape.grid_range"),
    ({"top_k": 9, "lanczos_steps": 4}, "landscape.top_k"),
    ({"bn_statistics": "population"}, "landscape.bn_statistics"),
    ({"checkpoints": "every"}, "landscape.checkpoints"),
    ({"batching": "auto"}, "landscape.batching"),
    ({"trace_samples": 1}, "landscape.trace_samples"),
])
def test_bad_options_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        landscape.Options.parse(bad)


def test_cli_tables_figures_and_findings(star, tmp_path):
    from specs import measure_cli

    from bnstudy import data, io, plots
    from bnstudy.plots import landscape as landscape_plots

    data.save(star, tmp_path / "star.npz")
    runs = [training.train(make_spec(norm=norm, seed=seed, training=TRAIN), star, "cpu")
            for norm in ("none", "batchnorm") for seed in (0, 1)]
    rc, outs = measure_cli(tmp_path, "landscape", runs, tmp_path / "star.npz",
                           options={**SMALL, "checkpoints": "first_last"})
    assert rc == 0
    frames = {t: pd.read_parquet(p) for t, p in outs.items()}
    assert set(frames["landscape_grid"]["norm"]) == {"none", "batchnorm"}
    for t, df in frames.items():
        io.write_table(df, tmp_path / f"{t}.parquet", {})
    for fam, t in (("landscape_lines", "landscape"), ("landscape_grid", "landscape_grid"),
                   ("landscape_spectrum", "landscape_spectrum")):
        out = tmp_path / f"{fam}.png"
        plots.render(fam, [str(tmp_path / f"{t}.parquet")], str(out), {}, experiment="t")
        assert out.stat().st_size > 10_000
        assert "filter-normalized" in plots.get(fam).caption or fam == "landscape_spectrum"
        assert "sample" in plots.get(fam).caption
    curv = frames["landscape_curvature"]
    bn = curv[(curv["norm"] == "batchnorm") & (curv["step"] == 0)]
    text = landscape_plots.findings(frames)
    assert f"batchnorm: trace {bn['trace'].mean():.3g}" in text


def test_contour_levels_are_shared_and_log_spaced_when_wide():
    from bnstudy.plots.landscape import levels

    assert levels([0.1, 5.0, 50.0], 5) == pytest.approx(np.geomspace(0.1, 50.0, 5))
    assert levels([1.0, 2.0, np.inf], 3) == pytest.approx([1.0, 1.5, 2.0])


@pytest.mark.parametrize("bn_trace, verdict",
                         [(0.5, "supported"), (2.0, "contradicted at this setting")])
def test_the_hessian_trace_claim_reads_the_first_checkpoint(bn_trace, verdict):
    from bnstudy.claims import ledger

    rows = [{"experiment": "e", "dataset": "d", "model": "m", "norm": norm, "seed": seed,
             "step": step, "n_params": 10, "trace_se": 0.1, "trace_samples": 8,
             "hessian_top": 1.0, "bn_statistics": "batch", "sample_size": 32,
             # the first checkpoint decides; the last would say the opposite
             "trace": (base * (1 + 0.01 * seed)) if step == 0 else 1.0 / base}
            for norm, base in (("none", 1.0), ("batchnorm", bn_trace))
            for seed in range(4) for step in (0, 9)]
    out = ledger.evaluate({"landscape_curvature": pd.DataFrame(rows)})
    row = out[out["claim_id"] == "hessian_trace"].iloc[0]
    assert row["verdict"] == verdict and row["role"] == "beyond the paper"
    assert row["effect"] == pytest.approx(np.log(bn_trace), rel=1e-2)


@pytest.mark.parametrize("mode", ["batch", "running"])
def test_measure_leaves_the_model_as_it_was(star, mode):
    model = training.build(make_spec(norm="batchnorm"), star)
    model.train()
    model.head.eval()  # a mixed state must come back exactly as it was
    modes = [m.training for m in model.modules()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.as_tensor(star.x_train[:16]), torch.as_tensor(star.y_train[:16])
    opts = landscape.Options.parse({**SMALL, "bn_statistics": mode})
    init = {k: v + 0.1 for k, v in before.items()}
    out = compute.measure(model, x, y, star.task, opts, 3, 0, init)
    assert out["landscape_grid"] and out["landscape_curvature"]
    assert [m.training for m in model.modules()] == modes
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    centre = [r["loss"] for r in out["landscape"] if r["line"] == "random" and r["coord"] == 0]
    with torch.no_grad():
        want = float(training.loss_fn(star.task)(copy.deepcopy(model).train(mode == "batch")(x),
                                                 y))
    assert centre == [pytest.approx(want, rel=1e-6)]


def test_no_interpolation_line_without_the_initialization(bn_run, star):
    later = {**bn_run, "checkpoints": bn_run["checkpoints"][1:]}
    out = landscape.run(later, star, {**SMALL, "curvature": False, "grid_checkpoints": "none"},
                        CPU)
    lines = pd.DataFrame(out["landscape"])
    assert set(lines["line"]) == {"random"} and set(lines["step"]) == {3, 6}
