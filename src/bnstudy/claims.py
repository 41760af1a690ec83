"""The claims ledger: each claim of the papers, and the study's verdict from its own numbers.

Every claim compares a normalizer with a baseline (``none`` unless stated) in one experiment on
one quantity, paired by seed: for each seed the quantity is reduced to one number per run (the
reduction is stated in ``quantity``), the per-seed effect is ``metric(norm) - metric(baseline)``
(a log ratio where ``log`` is stated), and the ledger reports its mean, the Student-t confidence
interval over seeds (level ``ci``), Cohen's d_z (mean / sd of the paired effects), and both
sides' means. The verdict comes from the interval alone, by the claim's stated rule:

- ``less`` claims ("X reduces Y"): supported if the CI lies below 0, not supported if it lies
  above 0, inconclusive otherwise;
- ``more`` claims: the mirror image;
- ``no_less`` claims ("X does not reduce Y"): supported if the CI lies above ``-margin``, not
  supported if it lies below ``-margin``; inconclusive otherwise;
- ``equivalent`` claims: supported if the CI lies inside ``[-margin, margin]``, not supported if
  it lies outside it entirely, inconclusive otherwise.

With fewer than two seeds, or without the data a claim needs (a normalizer or measure the study
did not run), the verdict is ``inconclusive`` / ``not measured`` and says so. Study-level
analyses (Luo's closed forms, Dannemann-Junike's counterexample) contribute rows of their own
whose rule is stated in the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from . import claims_jitter as cj

IDS = ["experiment", "dataset", "model"]


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str
    claim: str
    table: str
    quantity: str
    metric: Callable[[pd.DataFrame], pd.Series]  # table -> one value per (experiment, norm, seed)
    norms: tuple[str, ...]
    baseline: str | None = "none"  # None: the values themselves are the effect (one-sample)
    rule: str = "less"
    margin: float = 0.0


def _per_run(df: pd.DataFrame, col: str, log: bool = False) -> pd.Series:
    keys = ["experiment", "dataset", "model", "norm", "seed"]
    v = df.groupby(keys)[col].mean()
    return np.log(v) if log else v


def _pd_concentration(df: pd.DataFrame) -> pd.Series:
    """log(density near train points / density near random points), all layers, init."""
    d = df[(df["step"] == 0) & (df["layer"].astype(str) == "all")]
    if "applicable" in d:
        d = d[d["applicable"]]
    radius = np.sort(d["radius"].unique())[len(d["radius"].unique()) // 2] if len(d) else None
    d = d[d["radius"] == radius]
    keys = ["experiment", "dataset", "model", "norm", "seed"]
    wide = d.pivot_table(index=keys, columns="point_set", values="boundaries", aggfunc="mean")
    if not {"train", "random"} <= set(wide.columns):
        return pd.Series(dtype=float)
    return np.log((wide["train"] + 0.5) / (wide["random"] + 0.5))


def _ics(df: pd.DataFrame) -> pd.Series:
    d = df[df["layer"] != 1].copy() if "layer" in df else df.copy()
    d["ics"] = 1.0 - d["grad_cosine"]
    return _per_run(d, "ics")


def _final_train_loss(df: pd.DataFrame) -> pd.Series:
    d = df[df["split"] == "train"]
    last = d.groupby(["experiment", "norm", "seed"])["step"].transform("max")
    return _per_run(d[d["step"] == last], "loss", log=True)


def _smooth(col: str) -> Callable[[pd.DataFrame], pd.Series]:
    def metric(df: pd.DataFrame) -> pd.Series:
        d = df.copy()
        if col == "loss_variation":
            d[col] = d["loss_max"] - d["loss_min"]
        d = d[np.isfinite(d[col]) & (d[col] > 0)]
        return _per_run(d, col, log=True)

    return metric


def _rel_error(df: pd.DataFrame) -> pd.Series:
    """Measured generalization error / closed form - 1 at the final checkpoint of each run,
    pooled per load alpha (and model): the replicates are every (experiment, seed) pair at that
    load, since Luo's study draws a new data set per replicate (separate experiments)."""
    d = df[np.isfinite(df["rel_error"])] if "rel_error" in df else df.iloc[0:0]
    if d.empty:
        return pd.Series(dtype=float)
    d = d[d["step"] == d.groupby(["experiment", "norm", "seed"])["step"].transform("max")].copy()
    alpha = d["alpha"] if "alpha" in d else pd.Series("?", index=d.index)
    d["replicate"] = d["experiment"].astype(str) + "/" + d["seed"].astype(str)
    d["experiment"] = "alpha=" + alpha.map("{:g}".format) + " (pooled)"
    d["dataset"] = "teacher_student"
    d["seed"] = d.groupby(["experiment", "norm"])["replicate"].rank(method="dense").astype(int)
    return _per_run(d, "rel_error")


LP = ("l1norm", "l2norm", "linfnorm")
PD_CLAIM = ("BN concentrates the spline partition near the data, not near random points, at "
            "random initialization")
PD_QUANTITY = ("log((boundaries near train + .5) / (near random + .5)) at step 0, all layers, "
               "middle radius")
CLAIMS = (
    *(Claim(f"pd_data_vs_{base}", "Balestriero & Baraniuk", PD_CLAIM, "partition_density",
            PD_QUANTITY, _pd_concentration, ("batchnorm", "batchnorm_fixed_affine"),
            baseline=base, rule="more") for base in ("none", "zero_bias", "random_bias")),
    Claim("ics_grad", "Santurkar et al.", "BN does not reduce (gradient) internal covariate "
          "shift", "ics", "1 - cos(G, G') averaged over layers 2.. and checkpoints", _ics,
          ("batchnorm",), rule="no_less", margin=0.02),
    Claim("lipschitz", "Santurkar et al.", "BN improves the Lipschitzness of the loss (smaller "
          "loss variation along the gradient)", "smoothness",
          "log(loss_max - loss_min over the probes), mean over checkpoints",
          _smooth("loss_variation"), ("batchnorm",), rule="less"),
    Claim("grad_pred", "Santurkar et al.", "BN improves gradient predictiveness", "smoothness",
          "log(max ||grad L(w - eta g) - g||), mean over checkpoints", _smooth("grad_pred_max"),
          ("batchnorm",), rule="less"),
    Claim("beta_smooth", "Santurkar et al.", "BN lowers the effective beta-smoothness",
          "smoothness", "log(beta_eff), mean over checkpoints", _smooth("beta_eff"),
          ("batchnorm",), rule="less"),
    Claim("lp_smooth", "Santurkar et al.", "l_p normalizations smooth the landscape like BN "
          "(lower effective beta-smoothness than no normalization)", "smoothness",
          "log(beta_eff), mean over checkpoints", _smooth("beta_eff"), LP, rule="less"),
    Claim("noisy_bn", "Santurkar et al.", "noisy BN trains about as well as BN (final training "
          "loss within a factor 1.5)", "training", "log(final train loss)", _final_train_loss,
          ("noisy_batchnorm",), baseline="batchnorm", rule="equivalent", margin=float(np.log(1.5))),
    Claim("jitter_batch", "Balestriero & Baraniuk", "smaller mini-batches jitter BN's decision "
          "boundary more (Fig. 6)", "bn_jitter", "log(boundary band fraction at the smallest / "
          "largest batch size), mean over checkpoints", cj.jitter_batch_ratio,
          ("batchnorm", "batchnorm_fixed_affine"), baseline=None, rule="more"),
    Claim("jitter_ghost", "Balestriero & Baraniuk", "noise-controlled BN (a virtual batch smaller "
          "than the real one) jitters the decision boundary more than BN", "bn_jitter",
          "log(boundary band fraction) at the largest batch size, mean over checkpoints",
          cj.jitter_band, ("ghost_batchnorm",), baseline="batchnorm", rule="more"),
    *(Claim(f"prop2_{s}", "Balestriero & Baraniuk", f"Proposition 2 gives the mini-batch variance "
            f"of BN's {t} (within 10%)", "bn_jitter", f"log(empirical / predicted var of {t}), "
            "first BN layer of fully connected nets, mean over checkpoints and batch sizes",
            cj.prop2_ratio(s), ("batchnorm", "batchnorm_fixed_affine", "ghost_batchnorm"),
            baseline=None, rule="equivalent", margin=float(np.log(1.1)))
      for s, t in (("mu", "mu_B"), ("sigma2", "sigma_B^2"))),
    Claim("luo_sgd", "Luo et al.", "vanilla SGD's generalization error follows the closed form "
          "(within 10%)", "teacher_student", "gen_error / closed form - 1, final checkpoint",
          _rel_error, ("none",), baseline=None, rule="equivalent", margin=0.1),
    Claim("luo_bn", "Luo et al.", "BN's generalization error follows WN + gamma decay (zeta = "
          "3/(2M) for BN, 1/(2M) for variance-only BN; within 10%)", "teacher_student",
          "gen_error / closed form (WN + gamma decay) - 1, final checkpoint", _rel_error,
          ("batchnorm", "weightnorm_varonly_bn"), baseline=None, rule="equivalent", margin=0.1),
    Claim("luo_wn", "Luo et al.", "WN + gamma decay's generalization error follows its closed "
          "form (Krogh & Hertz ridge curve; within 10%)", "teacher_student",
          "gen_error / closed form (WN + gamma decay) - 1, final checkpoint", _rel_error,
          ("weightnorm_gamma_decay",), baseline=None, rule="equivalent", margin=0.1),
)


def _verdict(rule: str, lo: float, hi: float, margin: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive"
    if rule == "less":
        return "supported" if hi < 0 else "not supported" if lo > 0 else "inconclusive"
    if rule == "more":
        return "supported" if lo > 0 else "not supported" if hi < 0 else "inconclusive"
    if rule == "no_less":
        return "supported" if lo > -margin else "not supported" if hi < -margin else "inconclusive"
    if rule == "equivalent":
        if -margin < lo and hi < margin:
            return "supported"
        return "not supported" if hi < -margin or lo > margin else "inconclusive"
    raise ValueError(f"unknown rule {rule!r}; valid: less, more, no_less, equivalent")


RULE_TEXT = {
    "less": "supported iff the CI of the effect lies below 0; not supported iff above 0",
    "more": "supported iff the CI of the effect lies above 0; not supported iff below 0",
    "no_less": "supported iff the CI lies above -{m:g}; not supported iff below -{m:g}",
    "equivalent": "supported iff the CI lies inside ±{m:g}; not supported iff outside it",
}


def paired_effect(a: pd.Series, b: pd.Series, level: float) -> dict:
    """Mean, CI and d_z of a - b over the seeds both have (finite values only)."""
    diff = (a - b).dropna()
    diff = diff[np.isfinite(diff)]
    n = len(diff)
    out = {"effect": float(diff.mean()) if n else np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "cohens_dz": np.nan, "n_seeds": n}
    if n >= 2:
        sd = float(diff.std(ddof=1))
        half = float(stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n))
        out.update(ci_low=out["effect"] - half, ci_high=out["effect"] + half,
                   cohens_dz=out["effect"] / sd if sd > 0 else np.inf * np.sign(out["effect"]))
    return out


def evaluate(frames: dict[str, pd.DataFrame], level: float = 0.95) -> pd.DataFrame:
    rows = []
    for c in CLAIMS:
        base = {"claim_id": c.key, "paper": c.paper, "claim": c.claim, "quantity": c.quantity,
                "rule": RULE_TEXT[c.rule].format(m=c.margin), "baseline": c.baseline}
        df = frames.get(c.table)
        if df is None or df.empty:
            rows.append({**base, "verdict": "not measured", "note": f"no {c.table} table"})
            continue
        values = c.metric(df)
        if values.empty:
            rows.append({**base, "verdict": "not measured", "note": "no applicable rows"})
            continue
        values = values.reset_index().rename(columns={0: "value"})
        values.columns = [*values.columns[:-1], "value"]
        found = False
        for (exp, ds, model), g in values.groupby(IDS):
            by_norm = {n: s.set_index("seed")["value"] for n, s in g.groupby("norm")}
            if c.baseline is not None and c.baseline not in by_norm:
                continue
            for norm in c.norms:
                if norm not in by_norm:
                    continue
                found = True
                base_values = 0.0 * by_norm[norm] if c.baseline is None else by_norm[c.baseline]
                eff = paired_effect(by_norm[norm], base_values, level)
                verdict = _verdict(c.rule, eff["ci_low"], eff["ci_high"], c.margin)
                note = "" if eff["n_seeds"] >= 2 else "fewer than 2 paired seeds"
                rows.append({**base, "experiment": exp, "dataset": ds, "model": model,
                             "norm": norm, "value": float(by_norm[norm].mean()),
                             "baseline_value": float(base_values.mean()), **eff,
                             "verdict": verdict, "note": note})
        if not found:
            rows.append({**base, "verdict": "not measured",
                         "note": f"no experiment runs both {c.baseline} and one of {c.norms}"})
    rows.extend(dannemann_claim(frames.get("dannemann")))
    return pd.DataFrame(rows)


def dannemann_claim(df: pd.DataFrame | None) -> list[dict]:
    """Dannemann & Junike: at the plain optimum W* the BN loss gradient is not zero, gradient
    descent on the BN loss ends on 3 w1 = 5 w2, and Lemma 4.5's inequality fails at W0 = W*."""
    base = {"claim_id": "dannemann", "paper": "Dannemann & Junike",
            "claim": "BN does not improve initialization (Santurkar's Lemma 4.5 fails)",
            "quantity": "||grad L_BN(W*)||; max |3w1 - 5w2| / (sqrt(34)||w||) after GD; Lemma "
                        "4.5 at W0 = W*",
            "rule": "supported iff the gradient norm > 1e-6, the GD residual < 1e-6 and the "
                    "inequality fails at W0 = W*; not supported if the gradient vanishes or the "
                    "inequality holds", "baseline": "plain least squares"}
    if df is None or df.empty:
        return [{**base, "verdict": "not measured", "note": "no dannemann table"}]
    grad = df[(df["record"] == "gradient") & (df["method"] == "autograd_batchnorm1d")]["grad_norm"]
    final = df[(df["record"] == "final") & (df["objective"] == "bn")]
    lemma = df[(df["record"] == "lemma") & (df["init"] == 0)]
    if grad.empty or final.empty or lemma.empty:
        return [{**base, "verdict": "not measured", "note": "incomplete dannemann table"}]
    g = float(grad.iloc[0])
    resid = float(final["line_residual_normalized"].abs().max())
    holds = bool(lemma["holds_reached"].iloc[0])
    if g > 1e-6 and resid < 1e-6 and not holds:
        verdict = "supported"
    elif g <= 1e-6 or holds:
        verdict = "not supported"
    else:
        verdict = "inconclusive"
    lhs, rhs = float(lemma["lhs_reached"].iloc[0]), float(lemma["rhs"].iloc[0])
    note = (f"||grad|| = {g:.4g}; GD residual {resid:.2g} over {len(final)} starts; Lemma 4.5 "
            f"{'holds' if holds else 'fails'} at W0 = W* (lhs {lhs:.4g} vs rhs {rhs:.4g})")
    return [{**base, "value": g, "verdict": verdict, "note": note}]
