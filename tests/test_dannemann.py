"""Dannemann & Junike's counterexample: closed-form and brute-force checks of the analysis.

References computed here independently of bnstudy.analyses.dannemann: the plain normal equations, a
hand-written BN forward pass (mean, biased variance) with central differences, the BN output
identity (zero mean, sum of squares M) that gives the minimal BN loss, and the squared distance
from a point to a ray.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from bnstudy import analyses
from bnstudy.analyses import dannemann
from bnstudy.theory import dannemann_example as dx

X = np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 3.0]])
Y = np.array([2.0, 5.0, 13.0])
SMALL = {"n_inits": 2, "steps": 3000, "steps_plain": 1500, "n_angles": 360,
         "record_every": 100}


def bn_loss_reference(w, eps=0.0):
    """Hand-written BN forward: z = Xw, (z - mean) / sqrt(biased var + eps), summed squares."""
    z = X @ np.asarray(w, float)
    zhat = (z - z.mean()) / math.sqrt(((z - z.mean()) ** 2).mean() + eps)
    return float(((zhat - Y) ** 2).sum())


def central_diff(f, w, h=1e-6):
    w = np.asarray(w, float)
    return np.array([(f(w + h * e) - f(w - h * e)) / (2 * h) for e in np.eye(2)])


@pytest.fixture(scope="module")
def table():
    return pd.DataFrame(dannemann.run(dannemann.Options.parse(SMALL)))


def rec(df, record):
    return df[df["record"] == record]


def test_bn_neuron_output_is_invariant_to_scaling_w():
    x = torch.as_tensor(X)
    w = np.array([0.7, -1.3])
    out = dx.bn_neuron(w, 1e-12)(x).detach()
    for c in (0.01, 3.0, 250.0):
        torch.testing.assert_close(dx.bn_neuron(c * w, 1e-12)(x).detach(), out)
    # a negative scale flips the sign of the normalized output
    torch.testing.assert_close(dx.bn_neuron(-2.0 * w, 1e-12)(x).detach(), -out)
    assert dx.bn_loss(5.0 * w) == pytest.approx(dx.bn_loss(w), rel=1e-13)


def test_plain_optimum_solves_the_normal_equations():
    w_star = dx.plain_optimum()
    assert np.allclose(X.T @ X @ w_star, X.T @ Y, atol=1e-12)
    np.testing.assert_allclose(w_star, [1.0, 3.0], atol=1e-12)  # the paper's W*
    assert dx.plain_loss(w_star) == pytest.approx(float(((X @ w_star - Y) ** 2).sum()))


def test_bn_loss_matches_reference_and_paper_formula():
    rng = np.random.default_rng(1)
    for w in rng.normal(0, 2, (5, 2)):
        ref = bn_loss_reference(w)
        assert dx.bn_loss(w) == pytest.approx(ref, rel=1e-12)
        assert dx.paper_loss(w) == pytest.approx(ref, rel=1e-12)
        assert dx.bn_loss(w, eps=1e-3) == pytest.approx(bn_loss_reference(w, 1e-3),
                                                               rel=1e-12)


def test_gradients_agree_with_brute_force_finite_differences():
    rng = np.random.default_rng(2)
    for w in [np.array([1.0, 3.0]), *rng.normal(0, 2, (4, 2))]:
        fd = central_diff(bn_loss_reference, w)
        np.testing.assert_allclose(dx.bn_grad(w), fd, atol=1e-6)
        loss, g = dx.autograd_bn(w, 1e-12)
        assert loss == pytest.approx(bn_loss_reference(w), rel=1e-10)
        np.testing.assert_allclose(g, fd, atol=1e-6)


def test_gradient_at_w_star_is_nonzero_and_orthogonal(table):
    g = rec(table, "gradient").set_index("method")
    w_star = dx.plain_optimum()
    ref = central_diff(bn_loss_reference, w_star)
    for m in ("autograd_batchnorm1d", "closed_form", "finite_difference_paper_formula"):
        row = g.loc[m]
        vec = np.array([row["grad_w1"], row["grad_w2"]])
        np.testing.assert_allclose(vec, ref, atol=1e-6)
        assert row["grad_norm"] > 0.3  # clearly not a stationary point
        assert abs(row["grad_dot_w"]) < 1e-6 * row["grad_norm"] * np.linalg.norm(w_star) + 1e-7
    # the paper's printed value, to its two decimals
    auto = g.loc["autograd_batchnorm1d"]
    assert round(auto["grad_w1"], 2) == pytest.approx(-0.34)
    assert round(auto["grad_w2"], 2) == pytest.approx(0.11)
    assert g.loc["paper_reported", "grad_w1"] == -0.34  # stored as a reference only


def test_bn_optimum_is_the_ray_3w1_eq_5w2(table):
    opt = rec(table, "optimum").set_index("method")
    scan = opt.loc[["bn_angle_scan"]]
    assert len(scan) == 1 and scan["n_minima"].iloc[0] == 1  # one local minimum direction
    target = math.degrees(math.atan2(3.0, 5.0))
    assert scan["angle_deg"].iloc[0] == pytest.approx(target, abs=1e-9)
    assert scan["w1"].iloc[0] > 0
    d = opt.loc["bn_centered_least_squares"]
    assert 3 * d["w1"] - 5 * d["w2"] == pytest.approx(0.0, abs=1e-10)
    # min of C^: BN output has mean 0 and sum of squares M, so C^ >= M + |y|^2 - 2 sqrt(M)|P yc|
    xc, yc = X - X.mean(0), Y - Y.mean()
    proj = xc @ np.linalg.lstsq(xc, yc, rcond=None)[0]
    bound = 3 + Y @ Y - 2 * math.sqrt(3) * np.linalg.norm(proj)
    assert scan["loss"].iloc[0] == pytest.approx(bound, rel=1e-12)
    assert scan["loss"].iloc[0] < opt.loc["plain_least_squares", "bn_loss_at"] - 0.1


def test_gradient_descent_converges_to_the_line(table):
    fin = rec(table, "final")
    bn, plain = fin[fin["objective"] == "bn"], fin[fin["objective"] == "plain"]
    assert len(bn) == SMALL["n_inits"] + 1
    assert (bn["w1"] > 0).all()
    assert (np.abs(bn["line_residual_normalized"]) < 1e-8).all()
    assert (np.abs(bn["angle_error_deg"]) < 1e-6).all()
    min_loss = rec(table, "optimum").query("method == 'bn_angle_scan'")["loss"].min()
    np.testing.assert_allclose(bn["loss"], min_loss, rtol=1e-12)
    assert (plain["dist_to_wstar"] < 1e-3).all()
    # the paper's W0 = W* is where GD on C^ starts moving: its first step is not zero
    traj = rec(table, "trajectory").query("objective == 'bn' and init == 0").sort_values("step")
    step1 = traj[traj["step"] == 1].iloc[0]
    assert math.hypot(step1["w1"] - 1.0, step1["w2"] - 3.0) > 1e-3


def test_batched_inits_are_independent_runs():
    """All inits train as units of one layer; each must follow its own single-unit GD path."""
    w0 = np.array([[1.0, 3.0], [-2.0, 0.5], [0.3, -4.0]])
    both, _ = dx.gradient_descent(w0, "bn", 50, 0.1, 1e-12, 10)
    for k in range(len(w0)):
        one, _ = dx.gradient_descent(w0[k], "bn", 50, 0.1, 1e-12, 10)
        np.testing.assert_allclose(both[-1][1][k], one[-1][1][0], rtol=1e-12, atol=1e-13)
        assert both[-1][2][k] == pytest.approx(one[-1][2][0], rel=1e-12)
    # and a hand-rolled GD with the reference finite-difference gradient agrees
    w = w0[1].copy()
    for _ in range(50):
        w = w - 0.1 * central_diff(bn_loss_reference, w, h=1e-7)
    np.testing.assert_allclose(both[-1][1][1], w, atol=1e-5)


def test_lemma_inequality_fails_at_the_papers_init(table):
    lem = rec(table, "lemma").set_index("init")
    row = lem.loc[0]
    assert (row["w0_1"], row["w0_2"]) == pytest.approx((1.0, 3.0), abs=1e-12)
    assert row["hypothesis"]
    assert row["rhs"] == 0.0  # W0 is W* itself: both terms of the right side vanish exactly
    w0, u = np.array([1.0, 3.0]), np.array([5.0, 3.0]) / math.sqrt(34.0)
    assert row["lhs_closest"] == pytest.approx(w0 @ w0 - (w0 @ u) ** 2, rel=1e-9)
    assert row["lhs_reached"] >= row["lhs_closest"] - 1e-9
    assert not row["holds_closest"] and not row["holds_reached"]


def test_lemma_check_can_hold():
    """The comparison is not rigged: near the BN ray the inequality is satisfied."""
    u = np.array([5.0, 3.0]) / math.sqrt(34.0)
    w_star = dx.plain_optimum()
    w0 = 2.0 * u
    assert dx.closest_on_rays(w0, [u]) == pytest.approx(0.0, abs=1e-12)
    assert dx.lemma_rhs(w0, w_star) > 0.1
    # behind the origin the closest point of the open ray is (the limit) 0
    assert dx.closest_on_rays(-w0, [u]) == pytest.approx(4.0)


def test_deterministic_given_seed():
    opts = {**SMALL, "steps": 5, "steps_plain": 5, "n_angles": 64}
    a, b = pd.DataFrame(dannemann.run(opts)), pd.DataFrame(dannemann.run(opts))
    pd.testing.assert_frame_equal(a, b)
    c = pd.DataFrame(dannemann.run({**opts, "seed": 1}))
    la, lc = rec(a, "lemma"), rec(c, "lemma")
    assert la["w0_1"].iloc[0] == lc["w0_1"].iloc[0]  # init 0 is always the paper's W0
    assert not np.allclose(la["w0_1"].iloc[1:], lc["w0_1"].iloc[1:])


@pytest.mark.parametrize("bad, match", [
    ({"stepz": 3}, r"unknown analyses.dannemann option\(s\) \['stepz'\]; valid: \[.*'steps'"),
    ({"steps": 0}, r"analyses.dannemann.steps=0: need a value >= 1"),
    ({"n_inits": 1.5}, r"analyses.dannemann.n_inits=1.5: need an integer"),
    ({"eps": 0.0}, r"analyses.dannemann.eps=0.0: need a finite number > 0"),
    ({"lr": True}, r"analyses.dannemann.lr=True: need a number"),
    ({"n_angles": 4}, r"analyses.dannemann.n_angles=4: need a value >= 16"),
])
def test_bad_options(bad, match):
    with pytest.raises(ValueError, match=match):
        dannemann.Options.parse(bad)


def test_registry_entry():
    a = analyses.get("dannemann")
    assert a.run is dannemann.run and a.options is dannemann.Options
    assert a.source == "analyses/dannemann.py"


def test_run_takes_parsed_options_or_their_config_section():
    opts = {**SMALL, "steps": 5, "steps_plain": 5, "n_angles": 64}
    pd.testing.assert_frame_equal(pd.DataFrame(dannemann.run(dannemann.Options.parse(opts))),
                                  pd.DataFrame(dannemann.run(opts)))


def test_figure_and_findings(table):
    import matplotlib.pyplot as plt

    from bnstudy import plots
    from bnstudy.plots import dannemann as pd_plots

    fam = plots.get("dannemann_counterexample")
    assert fam.scope == "study" and fam.tables == ("dannemann",)
    fig = fam.draw([table], {})
    assert len(fig.axes) >= 3
    plt.close(fig)
    text = pd_plots.findings({"dannemann": table})
    auto = rec(table, "gradient").set_index("method").loc["autograd_batchnorm1d"]
    assert f"{auto['grad_w1']:.4f}" in text and "fails" in text
    assert "w1 > 0 in 3/3" in text
