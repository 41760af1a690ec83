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

import numpy as np
import pandas as pd
import pytest

from bnstudy.claims import ledger as claims

SEEDS = range(3)
EXTRA_NORMS = ("layernorm", "groupnorm")
# a row's own columns (the Holm-adjusted p-value and verdict are over the study's family, by
# design: they change when rows are added; so are seeds_needed and detectable_effect, whose power
# is at the row's Holm level in the family, bnstudy.claims.power)
OWN = ["claim_id", "experiment", "norm", "baseline", "value", "baseline_value", "effect",
       "ci_low", "ci_high", "cohens_dz", "effect_sd", "n_seeds", "verdict", "note", "role",
       "quantity", "p_value"]


def _ids(exp, ds, model, norm, seed):
    return {"experiment": exp, "dataset": ds, "model": model, "norm": norm, "seed": seed}


def _partition_density(exp, ds, norms, rng, other):
    radii = (0.5, 1.0, 2.0, 4.0) if other else (0.1, 0.2, 0.3)
    return [{**_ids(exp, ds, "m", n, s), "step": 0, "layer": "all", "applicable": True,
             "radius": r, "point_set": ps, "boundaries": rng.uniform(0, 50)}
            for n in norms for s in SEEDS for r in radii for ps in ("train", "random")]


def _ics(exp, ds, norms, rng, other):
    return [{**_ids(exp, ds, "m", n, s), "step": st, "layer": li,
             "grad_cosine": 1 - (rng.uniform(0, 1e-5) if other else rng.uniform(1e-3, 0.1))}
            for n in norms for s in SEEDS for st in (0, 10) for li in (1, 2, 3)]


def _smoothness(exp, ds, norms, rng, other):
    rows = []
    for n in norms:
        for s in SEEDS:
            for st in (0, 10, 20):
                if other:  # far larger and far smaller values than the compared pair's
                    v = 1e4 if st == 0 else 1e-12
                else:  # an exact zero and a blow-up in each arm, as the star MLP shows
                    v = 0.0 if st == 10 else np.inf if st == 20 and s == 0 else rng.uniform(1, 2)
                rows.append({**_ids(exp, ds, "m", n, s), "step": st, "beta_eff": v,
                             "grad_pred_max": v, "loss_min": 1.0 if np.isfinite(v) else np.inf,
                             "loss_max": 1.0 + v, "loss": rng.uniform(0.5, 1.0),
                             "grad_norm": rng.uniform(0.5, 1.0)})
    return rows


def _training(exp, ds, norms, rng, other):
    return [{**_ids(exp, ds, "m", n, s), "step": st, "split": sp,
             "loss": (2.3 if other else rng.uniform(0.1, 1.0)) / (1 + st),
             "accuracy": 0.1 if other else rng.uniform(0.5, 1.0), "lr": 0.1}
            for n in norms for s in SEEDS for st in (0, 50, 100) for sp in ("train", "test")]


def _bn_jitter(exp, ds, norms, rng, other):
    sizes = (4, 8, 512) if other else (16, 256)
    rows = []
    for n in norms:
        for s in SEEDS:
            for st in (0, 100):
                for b in sizes:
                    common = {**_ids(exp, ds, "m", n, s), "step": st, "batch_size": b,
                              "batch_size_effective": b, "applicable": True}
                    rows.append({**common, "layer": "boundary", "layer_index": 0,
                                 "band_fraction": rng.uniform(0.05, 0.9),
                                 "samples_per_stat": np.nan, "ratio_mu": np.nan,
                                 "ratio_sigma2": np.nan})
                    for li in (1, 2, 3):
                        r = rng.uniform(0.8, 1.3)
                        rows.append({**common, "layer": str(li), "layer_index": li,
                                     "band_fraction": np.nan, "samples_per_stat": b,
                                     "ratio_mu": r, "ratio_sigma2": r * 1.1})
    return rows


def _teacher_student(exp, ds, norms, rng, other, batch=32, lr=0.1):
    alpha = 4.0 if other else 2.0
    curve = {"none": "sgd", "weightnorm_gamma_decay": "ridge"}
    return [{**_ids(f"{exp}_d{s}", ds, "unit", n, 0), "step": 100, "alpha": alpha,
             "N": 400, "P": int(alpha * 400), "S": 0.25, "lr": lr,
             "batch_size": batch, "zeta": 1.5 / batch if n != "none" else 0.0,
             "zeta_main": 0.5 / batch, "curve": curve.get(n, "shrinkage"),
             "convention": "loss" if n == "weightnorm_gamma_decay" else None,
             "rel_error": rng.normal(0, 0.05), "rel_error_main": rng.normal(0, 0.05)}
            for n in norms for s in SEEDS]


GEN_ARMS = (("_m128", 128, 0.0, "s128"), ("_m1024", 1024, 0.0, "s1024"),
            ("_m1024d", 1024, 0.1, "s1024"))


def _generalization(exp, ds, norms, rng, other, arms=GEN_ARMS):
    arch = "vgg" if other else "resnet18"
    rows = []
    for suffix, bs, drop, schedule in arms:
        for n in norms:
            for s in SEEDS:
                loss = rng.uniform(0.1, 1.0)
                rows += [{**_ids(exp + suffix, ds, arch, n, s), "step": st,
                          "test_loss": loss * (2 if st == 0 else 1), "test_accuracy": 1 - loss,
                          "gamma_sq": rng.uniform(0.5, 2.0), "arch": arch,
                          "train_batch_size": bs, "dropout": drop, "lr_batch_scaled": True,
                          "training_schedule": schedule}
                         for st in (0, 100)]
    return rows


BUILD = {"partition_density": _partition_density, "ics": _ics, "smoothness": _smoothness,
         "training": _training, "bn_jitter": _bn_jitter, "teacher_student": _teacher_student,
         "generalization": _generalization}


def _frame(table, exp, ds, norms, seed, other=False):
    return pd.DataFrame(BUILD[table](exp, ds, norms, np.random.default_rng(seed), other))


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
    rng = np.random.default_rng(7)
    if claim.table == "teacher_student":  # the same load alpha = 2, another M or lr
        return [pd.DataFrame(_teacher_student(f"near{m}_{lr}", "d", list(claim.norms), rng,
                                              False, batch=m, lr=lr))
                for m, lr in ((16, 0.05), (128, 0.4), (32, 0.3))]
    arms = (("_m4096", 4096, 0.0, "s4096"), ("_m64", 64, 0.0, "s64"),  # new extremes
            ("_m1024d3", 1024, 0.3, "s1024"),  # another dropout rate
            ("_m1024x", 1024, 0.0, "s1024 summed"))  # same batch, another schedule
    return [pd.DataFrame(_generalization("e", "d", list(claim.norms), rng, False, arms=arms))]


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
