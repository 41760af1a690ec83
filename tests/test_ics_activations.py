"""The ics_activations table (Santurkar Figs. 2 and 6) against normalizer outputs computed by hand,
its purity and determinism (noisy BN included), its option, the unchanged ics table, the figure."""

import copy

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from specs import make_spec  # noqa: E402

from bnstudy import measures  # noqa: E402
from bnstudy.measures.ics import activations  # noqa: E402
from bnstudy.measures.ics import compute as ics  # noqa: E402
from bnstudy.networks import models  # noqa: E402
from bnstudy.train import checkpoints  # noqa: E402
from bnstudy.train import loop as training  # noqa: E402

CPU = torch.device("cpu")
TRAIN = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 4, "checkpoints": [0, 1, 3]}
QS = [0.05, 0.25, 0.5, 0.75, 0.95]


@pytest.fixture(scope="module")
def mlp_runs(star):
    """A tiny MLP (3 hidden blocks of 16) with BN, noisy BN and no normalizer."""
    return {norm: training.train(make_spec(norm, training=TRAIN), star, "cpu")
            for norm in ("batchnorm", "noisy_batchnorm", "none")}


def _by_hand(run, ds, state, probe):
    """Every hidden block's ``norm(linear(h))`` from a forward written out block by block on a
    freshly built model in train mode (the layers' own modules, no hooks)."""
    net = training.build(run["spec"], ds)
    net.load_state_dict(state)
    net.train()
    h, out = probe, []
    with torch.no_grad():
        if net.conv:
            h = h.reshape(h.shape[0], *net.input_shape)
        for m in net.features:
            if isinstance(m, models.Block):
                z = m.norm(m.linear(h))
                out.append(z)
                h = m.act(z)
            else:
                h = m(h)
    return out


def _check_against_hand(run, ds, probe_size, k):
    df = pd.DataFrame(activations.run_activations(
        run, ds, {"probe_size": probe_size, "activation_units": k}, CPU))
    probe = torch.as_tensor(ds.x_train[:probe_size])
    cks = run["checkpoints"]
    assert sorted(df["step"].unique()) == [int(c["step"]) for c in cks]
    checked = 0
    for c in cks:
        outs = _by_hand(run, ds, c["model"], probe)
        rows = df[df["step"] == c["step"]]
        assert sorted(rows["layer_index"].unique()) == list(range(1, len(outs) + 1))
        for i, z in enumerate(outs, 1):
            lay = rows[rows["layer_index"] == i]
            units = sorted(lay["unit"].unique())
            assert len(units) == min(k, z.shape[1]) and 0 <= units[0] and units[-1] < z.shape[1]
            assert (lay["layer_name"] == f"block{i}").all() and (lay["units"] == z.shape[1]).all()
            for u in units:
                vals = z[:, u].reshape(-1).double().numpy()  # over N (and H, W)
                got = lay[lay["unit"] == u].sort_values("quantile")
                assert got["quantile"].tolist() == QS
                assert (got["samples_per_stat"] == vals.size).all()
                np.testing.assert_allclose(got["value"], np.quantile(vals, QS), rtol=1e-6,
                                           atol=1e-6)
                checked += 1
    assert (df["probe_size"] == probe_size).all()
    return df, checked


@pytest.mark.parametrize("norm", ["batchnorm", "noisy_batchnorm", "none"])
def test_mlp_quantiles_are_numpys_of_the_normalizer_outputs(mlp_runs, star, norm):
    df, checked = _check_against_hand(mlp_runs[norm], star, 40, 4)
    assert checked == 4 * 3 * 4  # checkpoints (0, 1, 3 and the last, 4) x layers x units
    assert (df["samples_per_stat"] == 40).all()
    if norm != "none":  # the probe batch's own statistics: the medians sit near 0 for BN
        bn = df[(df["step"] == 0) & (df["quantile"] == 0.5)]
        assert bn["value"].abs().max() < 2.0


def test_units_are_sampled_once_from_a_fixed_seed(mlp_runs, star):
    units = {norm: pd.DataFrame(activations.run_activations(run, star, {"probe_size": 32},
                                                            CPU))
             .groupby(["step", "layer_index"])["unit"].unique().apply(sorted)
             for norm, run in mlp_runs.items()}
    bn = units["batchnorm"]
    assert all(len(v) == 3 for v in bn)  # the default activation_units
    assert bn.groupby(level="layer_index").apply(lambda s: len({tuple(v) for v in s})).eq(1).all()
    for other in units.values():  # one architecture: the same units whatever the normalizer
        assert other.tolist() == bn.tolist()
    assert [list(u) for u in activations.sample_units([2, 16], 5)][0] == [0, 1]


def test_cnn_quantiles_are_over_batch_height_and_width(digits):
    spec = make_spec("batchnorm", model={"arch": "vgg", "channels": [4, "M", 6]},
                     training={"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 3,
                               "checkpoints": [0, 2]})
    run = training.train(spec, digits, "cpu")
    df, checked = _check_against_hand(run, digits, 24, 2)
    assert checked == 3 * 2 * 2  # checkpoints (0, 2 and the last, 3) x layers x units
    hw = {1: 8 * 8, 2: 4 * 4}  # 8x8 digits, a 2x2 max-pool between the blocks
    for layer, n in hw.items():
        assert (df[df["layer_index"] == layer]["samples_per_stat"] == 24 * n).all()


def test_the_measure_leaves_the_model_and_the_run_unchanged(mlp_runs, star):
    run = mlp_runs["noisy_batchnorm"]
    before = copy.deepcopy(run)
    r = checkpoints.restore(run, 1, star)
    probe = torch.as_tensor(star.x_train[:32])
    for mode in (False, True):  # eval: BN's running buffers would move in a train pass
        r.model.train(mode)
        state = {k: v.clone() for k, v in r.model.state_dict().items()}
        activations.normalizer_outputs(r.model, probe)
        assert r.model.training is mode
        assert all(torch.equal(v, state[k]) for k, v in r.model.state_dict().items())
        assert not any(m._forward_hooks for m in r.model.modules())
    measures.get("ics").run(run, star, {"probe_size": 32}, CPU)
    for a, b in zip(run["checkpoints"], before["checkpoints"], strict=True):
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


@pytest.mark.parametrize("norm", ["batchnorm", "noisy_batchnorm"])
def test_same_run_gives_the_same_rows(mlp_runs, star, norm):
    opts = {"probe_size": 32, "activation_units": 5}
    a = pd.DataFrame(activations.run_activations(mlp_runs[norm], star, opts, CPU))
    torch.manual_seed(12345)  # the global RNG is not what the noise is drawn from
    b = pd.DataFrame(activations.run_activations(mlp_runs[norm], star, opts, CPU))
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_noisy_bn_draws_the_noise_of_each_checkpoints_step(mlp_runs, star):
    """Noisy BN's probe pass sees the noise its training step drew: a copy of the checkpoint
    told another step gives other quantiles, and the table is the checkpoint's own."""
    run = mlp_runs["noisy_batchnorm"]
    probe = torch.as_tensor(star.x_train[:32])
    r = checkpoints.restore(run, 2, star)
    own = activations.normalizer_outputs(r.model, probe)
    other = copy.deepcopy(r.model)
    from bnstudy.networks.norms import noisy

    noisy.set_step(other, r.step + 1)
    shifted = activations.normalizer_outputs(other, probe)
    assert not torch.equal(own[0], shifted[0])
    df = pd.DataFrame(activations.run_activations(run, star, {"probe_size": 32}, CPU))
    units = activations.sample_units([int(h.shape[1]) for h in own], 3)
    mine = pd.DataFrame(activations.checkpoint_rows(r.step, own, units, 32))
    table = df[df["step"] == r.step].reset_index(drop=True)
    pd.testing.assert_frame_equal(table, mine, check_exact=True)


def test_zero_units_turn_the_table_off_and_bad_values_are_named(mlp_runs, star):
    out = measures.get("ics").run(mlp_runs["batchnorm"], star, {"activation_units": 0}, CPU)
    assert out["ics_activations"] == [] and len(out["ics"]) > 0
    with pytest.raises(ValueError, match="activation_units.*-1.*>= 0"):
        measures.get("ics").run(mlp_runs["batchnorm"], star, {"activation_units": -1}, CPU)


def test_the_ics_table_is_the_same_with_and_without_the_activations(mlp_runs, star):
    measure = measures.get("ics")
    assert measure.tables == ("ics", "ics_activations")  # ics stays the main table
    for norm in ("batchnorm", "noisy_batchnorm"):
        run = mlp_runs[norm]
        off = pd.DataFrame(measure.run(run, star, {"activation_units": 0}, CPU)["ics"])
        on = measure.run(run, star, {"activation_units": 5}, CPU)
        assert len(on["ics_activations"]) > 0
        alone = pd.DataFrame(ics.run_ics(run, star, {}, CPU))
        pd.testing.assert_frame_equal(pd.DataFrame(on["ics"]), off, check_exact=True)
        pd.testing.assert_frame_equal(alone, off, check_exact=True)


# -- the figure ----------------------------------------------------------------------------------

NORMS = ("noisy_batchnorm", "none", "batchnorm")
STEPS = (0, 1, 5, 50, 400)


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for norm in NORMS:
        for seed in (0, 1):
            for layer in (1, 2, 3, 4):
                for unit in (2, 5, 7):
                    for step in STEPS:
                        centre = rng.normal()
                        rows += [{"experiment": "e", "dataset": "star2d", "model": "m",
                                  "norm": norm, "seed": seed, "step": step,
                                  "layer_index": layer, "layer_name": f"block{layer}",
                                  "units": 16, "unit": unit, "quantile": q,
                                  "value": centre + 2 * (q - 0.5), "samples_per_stat": 32,
                                  "probe_size": 32} for q in QS]
    return pd.DataFrame(rows)


def test_the_figure_has_one_column_per_normalizer():
    from bnstudy import plots
    from bnstudy.plots import ics_activations as fig_module

    plots.load_all()
    family = plots.get("ics_activations")
    assert family.tables == ("ics_activations",)
    assert "ics_activations" in plots.SECTIONS["ics"].families
    df = _table()
    plots.style({})
    fig = family.draw([df], {})
    try:
        order = ["none", "batchnorm", "noisy_batchnorm"]
        grid = fig.axes[0].get_gridspec()
        assert (grid.nrows, grid.ncols) == (3, 3)  # layers 1, 3 (the middle), 4; normalizers
        assert [ax.get_title() for ax in fig.axes[:3]] == order
        for k, ax in enumerate(fig.axes):
            norm, layer = order[k % 3], (1, 3, 4)[k // 3]
            assert ax.get_xscale() == "symlog"
            assert len(ax.collections) == 2  # the 5-95% and 25-75% bands
            (line,) = ax.get_lines()
            assert line.get_color() == plots.norm_color(norm)
            want = df[(df["norm"] == norm) & (df["seed"] == 0) & (df["unit"] == 2)
                      & (df["layer_index"] == layer) & (df["quantile"] == 0.5)]
            np.testing.assert_allclose(line.get_ydata(), want.sort_values("step")["value"])
            np.testing.assert_allclose(line.get_xdata(), STEPS)
        assert fig.axes[2].get_legend() is not None
    finally:
        plots.plt.close(fig)
    assert fig_module.activations_measured({}, "e")
    assert not fig_module.activations_measured({"ics": {"activation_units": 0}}, "e")
    with pytest.raises(ValueError, match="no rows"):
        family.draw([df.iloc[:0]], {})
