"""The seeds / within-run variance split (bnstudy.claims.values.variance) on data of known
components."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims.values import variance as cv

CELL = {"experiment": "e", "dataset": "d", "model": "mlp"}


def _rows(rng, runs, m, between_sd, within_sd, norm="batchnorm", step_effect=None):
    seed = np.repeat(np.arange(runs), m)
    step = np.tile(np.arange(m) * 10, runs)
    b = rng.normal(0, between_sd, runs)[seed]
    fixed = 0.0 if step_effect is None else step_effect[np.tile(np.arange(m), runs)]
    y = 1.0 + b + fixed + rng.normal(0, within_sd, runs * m)
    return pd.DataFrame({**CELL, "norm": norm, "seed": seed, "step": step, "value": y})


def test_recovers_known_components_per_cell():
    rng = np.random.default_rng(0)
    df = pd.concat([_rows(rng, 800, 6, 0.5, 2.0, "batchnorm"),
                    _rows(rng, 800, 6, 2.0, 0.3, "none")])
    out = cv.anova_split(df, "value").set_index("norm")
    bn, none = out.loc["batchnorm"], out.loc["none"]
    assert bn["n_runs"] == 800 and bn["m"] == 6
    assert bn["between_var"] == pytest.approx(0.25, rel=0.25)
    assert bn["within_var"] == pytest.approx(4.0, rel=0.05)
    assert bn["within_var_of_mean"] == pytest.approx(4.0 / 6, rel=0.05)
    # 0.667 / (0.25 + 0.667): most of a run's noise is within the run
    assert bn["within_share"] == pytest.approx(0.727, abs=0.05)
    assert bn["advice"] == "more within-run samples"
    assert none["between_var"] == pytest.approx(4.0, rel=0.15)
    assert none["within_var"] == pytest.approx(0.09, rel=0.05)
    assert none["advice"] == "more seeds"


def test_variance_of_run_means_is_between_plus_within_over_m():
    rng = np.random.default_rng(1)
    df = _rows(rng, 3000, 4, 0.8, 1.5)
    row = cv.anova_split(df, "value").iloc[0]
    run_means = df.groupby("seed")["value"].mean()
    assert run_means.var() == pytest.approx(row["between_var"] + row["within_var_of_mean"],
                                            rel=0.02)


def test_a_fixed_within_run_factor_is_not_counted_as_noise():
    rng = np.random.default_rng(2)
    steps = np.array([-3.0, -1.0, 0.0, 4.0, 8.0])  # e.g. a quantity that drifts over training
    df = _rows(rng, 600, 5, 1.0, 0.5, step_effect=steps)
    naive = cv.anova_split(df, "value").iloc[0]
    fixed = cv.anova_split(df, "value", within=["step"]).iloc[0]
    assert naive["within_var"] > 10  # the drift read as within-run noise
    assert fixed["within_var"] == pytest.approx(0.25, rel=0.1)
    assert fixed["between_var"] == pytest.approx(1.0, rel=0.2)


def test_checkpoints_are_not_replicates_the_advice_is_probes_per_checkpoint():
    """Rows at fixed checkpoints dominate a run's noise here, but more checkpoints would change
    the quantity: the advice is more probes per checkpoint (the old advice: 'more within-run
    samples', read in the report as 'more checkpoints')."""
    from bnstudy.report import variance as report_variance

    rng = np.random.default_rng(6)
    df = _rows(rng, 400, 4, 0.2, 2.0, step_effect=np.array([0.0, 1.0, 2.0, 3.0]))
    fixed = cv.anova_split(df, "value", within=["step"]).iloc[0]
    assert fixed["within_share"] > 0.5
    assert fixed["advice"] == "more probes per step"
    assert cv.anova_split(df, "value").iloc[0]["advice"] == "more within-run samples"
    sm = df.assign(loss_max=np.exp(df["value"]) + 1.0, loss_min=1.0, loss=1.0,
                   grad_pred_max=np.exp(df["value"]), grad_norm=1.0,
                   beta_eff=np.exp(df["value"]))
    split = cv.split_measure("smoothness", sm)
    assert set(split["advice"]) <= {"more seeds", "more probes per step"}
    shown = report_variance.rows({"smoothness": sm.drop(columns="value")})
    advice = " ".join(shown["lower the within-run part with"])
    assert "n_probes" in advice and "not more checkpoints" in advice


def test_summary_split_from_means_sds_and_counts():
    rng = np.random.default_rng(3)
    runs, n_points, between_sd, within_sd = 1500, 20, 0.7, 3.0
    centers = 5.0 + rng.normal(0, between_sd, runs)
    points = centers[:, None] + rng.normal(0, within_sd, (runs, n_points))
    df = pd.DataFrame({**CELL, "norm": "none", "seed": np.arange(runs),
                       "boundaries": points.mean(1), "boundaries_std": points.std(1, ddof=1),
                       "n_points": n_points})
    row = cv.summary_split(df, "boundaries", "boundaries_std", "n_points").iloc[0]
    assert row["m"] == n_points and row["n_runs"] == runs
    assert row["within_var"] == pytest.approx(9.0, rel=0.03)
    assert row["within_var_of_mean"] == pytest.approx(0.45, rel=0.03)
    assert row["between_var"] == pytest.approx(0.49, rel=0.2)


def test_summary_split_wants_one_row_per_run():
    df = pd.DataFrame({**CELL, "norm": "none", "seed": [0, 0], "boundaries": [1.0, 2.0],
                       "boundaries_std": [1.0, 1.0], "n_points": [5, 5]})
    with pytest.raises(ValueError, match="one row per run"):
        cv.summary_split(df, "boundaries", "boundaries_std", "n_points")


def test_split_measure_smoothness_and_partition_tables():
    rng = np.random.default_rng(4)
    d = _rows(rng, 40, 3, 0.5, 0.5)
    sm = d.assign(loss_max=np.exp(d["value"]) + 1.0, loss_min=1.0, loss=1.0,
                  grad_pred_max=np.exp(d["value"]), grad_norm=1.0, beta_eff=np.exp(d["value"]))
    out = cv.split_measure("smoothness", sm)
    assert list(out.columns) == cv.COLUMNS
    assert set(out["quantity"]) == {q for q, _, _ in cv.SMOOTHNESS}
    assert (out["n_runs"] == 40).all() and (out["m"] == 3).all()
    pdens = pd.DataFrame({**CELL, "norm": "none", "seed": np.arange(6), "point_set": "train",
                          "radius": 0.03, "layer": "all", "step": 0,
                          "boundaries": rng.normal(5, 1, 6), "boundaries_std": 2.0,
                          "n_points": 100})
    out = cv.split_measure("partition_density", pdens)
    assert len(out) == 1 and out["quantity"].iloc[0].startswith("boundaries (train points")


def test_bad_measure_and_missing_column_are_named():
    with pytest.raises(ValueError, match="valid: smoothness, ics, partition_density"):
        cv.split_measure("jitter", pd.DataFrame())
    with pytest.raises(ValueError, match="no column value"):
        cv.anova_split(pd.DataFrame({k: [] for k in cv.KEYS}), "value")


def test_cli_variance_prints_the_split(tmp_path, capsys):
    from bnstudy import io
    from bnstudy.cli.main import main

    rng = np.random.default_rng(5)
    d = _rows(rng, 8, 3, 0.5, 0.5)
    sm = d.assign(loss_max=np.exp(d["value"]) + 1.0, loss_min=1.0, loss=1.0,
                  grad_pred_max=np.exp(d["value"]), grad_norm=1.0, beta_eff=np.exp(d["value"]))
    path = tmp_path / "smoothness.parquet"
    io.write_table(sm.drop(columns="value"), path, io.provenance("x", "cpu"))
    assert main(["variance", str(path)]) == 0
    out = capsys.readouterr().out
    assert "log(beta_eff)" in out and "within_share" in out
    assert main(["variance", str(tmp_path / "jitter.parquet")]) == 2
