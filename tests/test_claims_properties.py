"""Every ledger row depends on the runs it compares, and on nothing else: adding rows of other
experiments or other normalizers to a claim's table (or removing them) leaves the row as it was.

Each table gets a synthetic frame of the compared experiment(s) and their normalizers, seeded
with the awkward values real studies show (exact zeros, blow-ups, an interpolating arm); the
additions are an experiment on another dataset with other radii, batch sizes, loads and
architectures, and extra normalizers in the compared experiment, with extreme values.

The rows that compare or pool runs across experiments (Luo's) get the additions that sit closest
to them (:func:`test_a_luo_row_is_unchanged_by_runs_beside_it`): runs at the same load with other
batch sizes and another learning rate, a new largest and a new smallest batch size, another
dropout rate, and a run that differs from a contrast's baseline only in its training schedule."""

import itertools

import numpy as np
import pandas as pd
import pytest

from bnstudy import column_docs, columns
from bnstudy.claims import ledger as claims

SEEDS = range(3)
EXTRA_NORMS = ("layernorm", "groupnorm")
# a row's own columns (the Holm-adjusted p-value and verdict are over the study's family, by
# design: they change when rows are added; so are seeds_needed and detectable_effect, whose power
# is at the row's Holm level in the family, bnstudy.claims.decide.power)
OWN = ["claim_id", "experiment", "norm", "baseline", "value", "baseline_value", "effect",
       "ci_low", "ci_high", "cohens_dz", "effect_sd", "n_seeds", "verdict", "note", "role",
       "quantity", "p_value"]


def _v(f):
    """A value drawn per row: ``f(rng, other, row)``."""
    f.drawn = True
    return f


def _smooth(rng, other, row):
    if other:  # far larger and far smaller values than the compared pair's
        return 1e4 if row["step"] == 0 else 1e-12
    # an exact zero and a blow-up in each arm, as the star MLP shows
    return (0.0 if row["step"] == 10 else np.inf if row["step"] == 20 and row["seed"] == 0
            else rng.uniform(1, 2))


GEN_ARMS = ((128, 0.0, "s128"), (1024, 0.0, "s1024"), (1024, 0.1, "s1024"))
BATCH_JOINT = ("train_batch_size", "dropout", "training_schedule")
# What a claim's metric selects on, per table: a tuple is an axis (a row per value; a tuple of
# names joins several columns), a callable of the other frame a value per frame, a ``_v``
# function a value per row, anything else a value. The table's other declared columns get a
# value of their declared type (:func:`synthetic`), so a new claim's table needs no entry here.
SHAPES = {
    "partition_density": {"step": (0,), "layer": ("all",), "applicable": (True,),
                          "radius": lambda other: (0.5, 1.0, 2.0, 4.0) if other
                          else (0.1, 0.2, 0.3), "point_set": ("train", "random"),
                          "boundaries": _v(lambda rng, o, r: rng.uniform(0, 50))},
    "ics": {"step": (0, 10), "layer_index": (1, 2, 3),
            "layer": _v(lambda rng, o, r: str(r["layer_index"])),
            "grad_cosine": _v(lambda rng, o, r: 1 - (rng.uniform(0, 1e-5) if o
                                                     else rng.uniform(1e-3, 0.1)))},
    "smoothness": {"step": (0, 10, 20), "beta_eff": _v(_smooth),
                   "grad_pred_max": _v(lambda rng, o, r: r["beta_eff"]),
                   "loss_min": _v(lambda rng, o, r: 1.0 if np.isfinite(r["beta_eff"])
                                  else np.inf),
                   "loss_max": _v(lambda rng, o, r: 1.0 + r["beta_eff"]),
                   "loss": _v(lambda rng, o, r: rng.uniform(0.5, 1.0)),
                   "grad_norm": _v(lambda rng, o, r: rng.uniform(0.5, 1.0))},
    "training": {"step": (0, 50, 100), "split": ("train", "test"),
                 "loss": _v(lambda rng, o, r: (2.3 if o else rng.uniform(0.1, 1.0))
                            / (1 + r["step"])),
                 "accuracy": _v(lambda rng, o, r: 0.1 if o else rng.uniform(0.5, 1.0)),
                 "lr": 0.1},
    "bn_jitter": {"step": (0, 100), "batch_size": lambda other: (4, 8, 512) if other
                  else (16, 256), "layer": ("boundary", "1", "2", "3"), "applicable": True,
                  "batch_size_effective": _v(lambda rng, o, r: r["batch_size"]),
                  "layer_index": _v(lambda rng, o, r: 0 if r["layer"] == "boundary"
                                    else int(r["layer"])),
                  "band_fraction": _v(lambda rng, o, r: rng.uniform(0.05, 0.9)
                                      if r["layer"] == "boundary" else np.nan),
                  "samples_per_stat": _v(lambda rng, o, r: np.nan if r["layer"] == "boundary"
                                         else r["batch_size"]),
                  "ratio_mu": _v(lambda rng, o, r: np.nan if r["layer"] == "boundary"
                                 else rng.uniform(0.8, 1.3)),
                  "ratio_sigma2": _v(lambda rng, o, r: r["ratio_mu"] * 1.1)},
    # experiments are data draws pooled per load: one per seed, each with seed 0
    "teacher_student": {"step": 100, "model": "unit",
                        "experiment": _v(lambda rng, o, r: f"{r['experiment']}_d{r['seed']}"),
                        "seed": 0, "alpha": lambda other: 4.0 if other else 2.0, "N": 400,
                        "P": _v(lambda rng, o, r: int(r["alpha"] * 400)), "S": 0.25, "lr": 0.1,
                        "batch_size": 32,
                        "zeta": _v(lambda rng, o, r: 1.5 / r["batch_size"]
                                   if r["norm"] != "none" else 0.0),
                        "zeta_main": _v(lambda rng, o, r: 0.5 / r["batch_size"]),
                        "curve": _v(lambda rng, o, r: {"none": "sgd",
                                                       "weightnorm_gamma_decay": "ridge"}
                                    .get(r["norm"], "shrinkage")),
                        "convention": _v(lambda rng, o, r: "loss" if r["norm"]
                                         == "weightnorm_gamma_decay" else None),
                        "rel_error": _v(lambda rng, o, r: rng.normal(0, 0.05)),
                        "rel_error_main": _v(lambda rng, o, r: rng.normal(0, 0.05))},
    "generalization": {"step": (0, 100), BATCH_JOINT: GEN_ARMS,
                       "arch": lambda other: "vgg" if other else "resnet18",
                       "model": _v(lambda rng, o, r: r["arch"]),
                       "experiment": _v(lambda rng, o, r: f"{r['experiment']}_m"
                                        f"{r['train_batch_size']}_{r['dropout']}_"
                                        f"{r['training_schedule']}"),
                       "test_loss": _v(lambda rng, o, r: rng.uniform(0.1, 1.0)
                                       * (2 if r["step"] == 0 else 1)),
                       "test_accuracy": _v(lambda rng, o, r: 1 - r["test_loss"] / 2),
                       "gamma_sq": _v(lambda rng, o, r: rng.uniform(0.5, 2.0)),
                       "lr_batch_scaled": True},
}


def _typed(kind, rng, other):
    """A value of a declared column's kind (undeclared: a float)."""
    if kind == columns.STRING:
        return "x"
    if kind == columns.INTEGER:
        return int(rng.integers(1, 5))
    if kind == columns.BOOLEAN:
        return False
    return float(rng.uniform(0.5, 1.5) * (1e3 if other else 1.0))


def synthetic(table, exp, ds, norms, seed, other=False, values=None) -> pd.DataFrame:
    """A frame of ``table`` for the runs of ``norms`` over :data:`SEEDS` in experiment ``exp``
    on dataset ``ds``: the columns its owner declares (bnstudy.column_docs), shaped by
    :data:`SHAPES` (and ``values``, which override it); ``other``: the runs beside the compared
    ones, with other values. One builder for every claim's table."""
    if table not in column_docs.table_names():
        raise LookupError(
            f"claim table {table!r} declares no columns: a measure's tables are its package's "
            f"TABLES and COLUMNS, the study tables' bnstudy.column_docs.study_columns (declared: "
            f"{', '.join(column_docs.table_names())})")
    rng = np.random.default_rng(seed)
    shape = {**SHAPES.get(table, {}), **(values or {})}
    shape = {k: v(other) if callable(v) and not getattr(v, "drawn", False) else v
             for k, v in shape.items()}
    axes = {k: v for k, v in shape.items() if isinstance(v, tuple)}
    if "step" in column_docs.meanings(table):
        axes.setdefault("step", (0, 10))
    rows = []
    for norm in norms:
        for s in SEEDS:
            for combo in itertools.product(*axes.values()):
                row = {"experiment": exp, "dataset": ds, "model": "m", "norm": norm, "seed": s}
                for k, v in zip(axes, combo, strict=True):
                    row.update(dict(zip(k, v, strict=True)) if isinstance(k, tuple) else {k: v})
                for c in column_docs.meanings(table):
                    if c not in row and c not in shape:
                        row[c] = _typed(column_docs.kind(c)[0], rng, other)
                for k, v in shape.items():
                    if not isinstance(v, tuple):
                        row[k] = v(rng, other, row) if getattr(v, "drawn", False) else v
                rows.append(row)
    return pd.DataFrame(rows)


def _frame(table, exp, ds, norms, seed, other=False):
    return synthetic(table, exp, ds, norms, seed, other)


def _rows(ledger, claim, experiments):
    r = ledger[(ledger["claim_id"] == claim) & ledger["experiment"].isin(experiments)]
    return r[OWN].sort_values(["experiment", "norm"]).reset_index(drop=True)


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda c: c.key)
def test_a_row_depends_only_on_the_runs_it_compares(claim):
    norms = list(dict.fromkeys([*claim.norms, *([claim.baseline] if claim.baseline else [])]))
    if claim.table == "teacher_student":
        norms = list(claim.norms)
    base = _frame(claim.table, "e", "d", norms, 0)
    others = pd.concat([
        _frame(claim.table, "other", "d2", [*norms, *EXTRA_NORMS], 1, other=True),
        _frame(claim.table, "e", "d", list(EXTRA_NORMS), 2, other=True)])
    if claim.table == "teacher_student":  # experiments are data draws pooled per load
        others = _frame(claim.table, "other", "d2", norms, 1, other=True)
    alone = claims.evaluate({claim.table: base})
    exps = set(alone.loc[alone["claim_id"] == claim.key, "experiment"].dropna())
    assert exps, f"{claim.key}: the synthetic frame measures nothing"
    together = claims.evaluate({claim.table: pd.concat([base, others], ignore_index=True)})
    pd.testing.assert_frame_equal(_rows(alone, claim.key, exps),
                                  _rows(together, claim.key, exps), check_dtype=False)


def test_an_experiment_with_nothing_comparable_is_skipped_not_a_crash():
    """A linear net's partition density is not applicable (every row applicable=False): the
    pair's metric is empty there, and the other experiment's row still comes out (the default
    study's claims job crashed with KeyError 'experiment' on this)."""
    import pandas as pd

    from bnstudy.claims import ledger

    rows = []
    for exp, ok in (("dln", False), ("mlp", True)):
        for norm in ("none", "batchnorm"):
            for seed in (0, 1, 2):
                for ps in ("train", "random"):
                    rows.append({"experiment": exp, "dataset": "d", "model": exp, "norm": norm,
                                 "seed": seed, "step": 0, "layer": "all", "radius": 0.1,
                                 "point_set": ps, "applicable": ok,
                                 "boundaries": (3.0 if ps == "train" else 1.0) + seed * 0.1
                                 + (1.0 if norm == "batchnorm" else 0.0)})
    out = ledger.evaluate({"partition_density": pd.DataFrame(rows)})
    pd_rows = out[out["claim_id"] == "pd_data_vs_none"]
    assert list(pd_rows["experiment"]) == ["mlp"]


def _near(claim) -> list[pd.DataFrame]:
    """Experiments beside the compared ones that a row must not absorb (issue 30, item 5)."""
    if claim.table == "teacher_student":  # the same load alpha = 2, another M or lr
        return [synthetic(claim.table, f"near{m}_{lr}", "d", list(claim.norms), 7 + m,
                          values={"batch_size": m, "lr": lr})
                for m, lr in ((16, 0.05), (128, 0.4), (32, 0.3))]
    arms = ((4096, 0.0, "s4096"), (64, 0.0, "s64"),  # new extremes
            (1024, 0.3, "s1024"),  # another dropout rate
            (1024, 0.0, "s1024 summed"))  # same batch, another schedule
    return [synthetic("generalization", "e", "d", list(claim.norms), 7,
                      values={BATCH_JOINT: arms})]


LUO_ACROSS = [c for c in claims.CLAIMS
              if c.paper == "Luo et al." and (c.table == "teacher_student"
                                              or c.contrast is not None)]


@pytest.mark.parametrize("claim", LUO_ACROSS, ids=lambda c: c.key)
def test_a_luo_row_is_unchanged_by_runs_beside_it(claim):
    """A pooled row keeps one configuration (load, batch size, learning rate) and a contrast the
    arms it names, with the same schedule: adding experiments at the same load, at a new largest
    or smallest batch size, at another dropout rate or with another schedule leaves it as it
    was (before: the alpha = 2 row pooled M = 16, 32, 128; 'largest vs smallest' took whatever
    batch sizes were present; the dropout row paired runs of different schedules)."""
    base = _frame(claim.table, "e", "d", list(claim.norms), 0)
    alone = claims.evaluate({claim.table: base})
    exps = set(alone.loc[alone["claim_id"] == claim.key, "experiment"].dropna())
    assert exps, f"{claim.key}: the synthetic frame measures nothing"
    together = claims.evaluate({claim.table: pd.concat([base, *_near(claim)],
                                                       ignore_index=True)})
    pd.testing.assert_frame_equal(_rows(alone, claim.key, exps),
                                  _rows(together, claim.key, exps), check_dtype=False)


def test_a_new_claims_table_gets_a_frame_of_its_declared_columns():
    """Issue 33: one builder for every claim table, from the columns its owner declares; a table
    no measure declares fails naming where to declare it (was a bare KeyError)."""
    df = synthetic("ics_activations", "e", "d", ["none", "batchnorm"], 0)  # no SHAPES entry
    assert set(df.columns) == set(column_docs.meanings("ics_activations"))
    assert len(df) == 2 * len(SEEDS) * 2 and set(df["norm"]) == {"none", "batchnorm"}
    typed = columns.normalize("ics_activations", df)  # every declared type holds
    assert typed["unit"].dtype == np.int64 and typed["layer_name"].tolist()[0] == "x"
    with pytest.raises(LookupError, match="claim table 'sparsity' declares no columns: a "
                                          "measure's tables are its package's TABLES and COLUMNS"):
        synthetic("sparsity", "e", "d", ["none"], 0)


def test_the_claims_jobs_inputs_are_each_claims_declared_table():
    """Issue 33: a claim on a new table adds its table to the claims job's inputs with no edit
    to bnstudy.claims.declare.reads (a hand list left every real study's new row 'not measured');
    the tables are read from the claims' source, without importing pandas."""
    import subprocess
    import sys

    from bnstudy.claims.declare import reads

    source = ('CLAIMS = (Claim("sparse", "P", "BN makes units sparse", "sparsity", "q", m, '
              '("batchnorm",)), Claim("k", "P", "c", table="other_table", quantity="q"))')
    assert reads.claim_tables(source) == {"sparsity", "other_table"}
    with pytest.raises(ValueError, match=r"x.py, line 1: a Claim's table must be a string "
                                         r"literal.*got TABLE"):
        reads.claim_tables('Claim("k", "P", "c", TABLE, "q")', "x.py")
    assert set(reads.TABLES) == {c.table for c in claims.CLAIMS} | set(reads.ALWAYS)
    code = ("import sys, bnstudy.claims.declare.reads as r; assert r.TABLES; "
            "print(sorted(m for m in ('pandas', 'scipy', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]
