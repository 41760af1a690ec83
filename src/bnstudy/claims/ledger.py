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
  supported if it lies below ``-margin``; inconclusive otherwise. Its one use, Santurkar's "BN
  does not reduce ICS", compares on a log scale (``log((ics_bn + 1e-4) / (ics_none + 1e-4))``,
  margin ``log 1.25``: not supported iff BN's ICS is reliably below 0.8 times the baseline's),
  so that it can fail whatever the baseline's level (above the floor); an absolute margin on
  ``1 - cos`` could not once the baseline's ICS fell below it;
- ``equivalent`` claims: supported if the CI lies inside ``[-margin, margin]``, not supported if
  it lies outside it entirely, inconclusive otherwise.

With fewer than two seeds, or without the data a claim needs (a normalizer or measure the study
did not run), the verdict is ``inconclusive`` / ``not measured`` and says so. Study-level
analyses (Luo's closed forms, Dannemann-Junike's counterexample) contribute rows of their own
whose rule is stated in the same way.

Columns beyond the numbers: ``role`` is ``test`` for a claim where the paper makes a prediction
the data could contradict and ``implementation check`` where the stated result holds by
construction (Proposition 2 at the first BN layer: there the batch is an exact sample of the
population the formula uses, so agreement checks the measurement, not the proposition; the
``prop2_deep_*`` rows test it at deeper layers); ``curve`` names the closed form and constant a
Luo row is compared with (zeta, its multiple of 1/M, the ridge convention). The per-run metrics
are in :mod:`bnstudy.claims.metrics` (Santurkar, Luo) and :mod:`bnstudy.claims.jitter`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bnstudy.claims import jitter as cj
from bnstudy.claims import metrics as cm

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
    role: str = "test"  # or "implementation check": holds by construction, see the docstring
    curve: Callable[[pd.DataFrame, str, str], str] | None = None  # (table, norm, experiment)


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


LP = ("l1norm", "l2norm", "linfnorm")
BN_JITTER = ("batchnorm", "batchnorm_fixed_affine", "ghost_batchnorm")
SMOOTH_NOTE = (f"; a blow-up (non-finite probe) counts as {cm.BLOWUP_FACTOR:g} x the largest "
               "finite value in the table, 0 as the smallest positive one")
PD_CLAIM = ("BN concentrates the spline partition near the data, not near random points, at "
            "random initialization")
PD_QUANTITY = ("log((boundaries near train + .5) / (near random + .5)) at step 0, all layers, "
               "middle radius")
CLAIMS = (
    *(Claim(f"pd_data_vs_{base}", "Balestriero & Baraniuk", PD_CLAIM, "partition_density",
            PD_QUANTITY, _pd_concentration, ("batchnorm", "batchnorm_fixed_affine"),
            baseline=base, rule="more") for base in ("none", "zero_bias", "random_bias")),
    Claim("ics_grad", "Santurkar et al.", "BN does not reduce (gradient) internal covariate "
          "shift", "ics", "log(ICS + 1e-4), ICS = 1 - cos(G, G') averaged over layers 2.. and "
          "checkpoints; effect = log((ICS_bn + 1e-4) / (ICS_none + 1e-4))", cm.ics,
          ("batchnorm",), rule="no_less", margin=float(np.log(1.25))),
    Claim("lipschitz", "Santurkar et al.", "BN improves the Lipschitzness of the loss (smaller "
          "loss variation along the gradient)", "smoothness",
          "log(loss_max - loss_min over the probes), mean over checkpoints" + SMOOTH_NOTE,
          cm.smooth("loss_variation"), ("batchnorm",), rule="less"),
    Claim("grad_pred", "Santurkar et al.", "BN improves gradient predictiveness", "smoothness",
          "log(max ||grad L(w - eta g) - g||), mean over checkpoints" + SMOOTH_NOTE,
          cm.smooth("grad_pred_max"), ("batchnorm",), rule="less"),
    Claim("beta_smooth", "Santurkar et al.", "BN lowers the effective beta-smoothness",
          "smoothness", "log(beta_eff), mean over checkpoints" + SMOOTH_NOTE,
          cm.smooth("beta_eff"), ("batchnorm",), rule="less"),
    Claim("lp_smooth", "Santurkar et al.", "l_p normalizations smooth the landscape like BN "
          "(lower effective beta-smoothness than no normalization)", "smoothness",
          "log(beta_eff), mean over checkpoints" + SMOOTH_NOTE, cm.smooth("beta_eff"), LP,
          rule="less"),
    Claim("noisy_bn", "Santurkar et al.", "noisy BN trains about as well as BN (final training "
          "loss within a factor 1.5)", "training", "log(final train loss)", cm.final_train_loss,
          ("noisy_batchnorm",), baseline="batchnorm", rule="equivalent", margin=float(np.log(1.5))),
    Claim("jitter_batch", "Balestriero & Baraniuk", "smaller mini-batches jitter BN's decision "
          "boundary more (Fig. 6)", "bn_jitter", "log(boundary band fraction at the smallest / "
          "largest batch size), mean over checkpoints", cj.jitter_batch_ratio,
          ("batchnorm", "batchnorm_fixed_affine"), baseline=None, rule="more"),
    Claim("jitter_ghost", "Balestriero & Baraniuk", "noise-controlled BN (a virtual batch smaller "
          "than the real one) jitters the decision boundary more than BN", "bn_jitter",
          "log(boundary band fraction) at the largest batch size, mean over checkpoints",
          cj.jitter_band, ("ghost_batchnorm",), baseline="batchnorm", rule="more"),
    *(Claim(f"prop2_{s}", "Balestriero & Baraniuk", f"implementation check, not a test: at the "
            f"first BN layer Proposition 2's variance of BN's {t} is exact (the batch is a "
            "sample of the population it uses), so agreement within 10% checks the "
            "measurement's Monte Carlo", "bn_jitter", f"log(empirical / predicted var of {t}), "
            "first BN layer of fully connected nets, mean over checkpoints and batch sizes",
            cj.prop2_ratio(s), BN_JITTER, baseline=None, rule="equivalent",
            margin=float(np.log(1.1)), role="implementation check")
      for s, t in (("mu", "mu_B"), ("sigma2", "sigma_B^2"))),
    *(Claim(f"prop2_deep_{s}", "Balestriero & Baraniuk", f"Proposition 2 predicts the "
            f"mini-batch variance of BN's {t} at deeper BN layers from the layer's input "
            "population (within 10%), although earlier layers normalize by the same batch",
            "bn_jitter", f"log(empirical / predicted var of {t}), BN layers after the first "
            "of fully connected nets, mean over layers, checkpoints and batch sizes",
            cj.prop2_ratio(s, deeper=True), BN_JITTER, baseline=None, rule="equivalent",
            margin=float(np.log(1.1)))
      for s, t in (("mu", "mu_B"), ("sigma2", "sigma_B^2"))),
    Claim("luo_sgd", "Luo et al.", "vanilla SGD's generalization error follows the closed form "
          "(within 10%)", "teacher_student", "gen_error / closed form - 1, final checkpoint",
          cm.rel_error(), ("none",), baseline=None, rule="equivalent", margin=0.1,
          curve=cm.luo_curve()),
    Claim("luo_bn", "Luo et al.", "BN's generalization error follows WN + gamma decay at App. "
          "C.3's zeta (3/(2M) for BN with mu_B, 1/(2M) for variance-only BN; within 10%)",
          "teacher_student", "gen_error / closed form (WN + gamma decay) - 1, final checkpoint",
          cm.rel_error(), ("batchnorm", "weightnorm_varonly_bn"), baseline=None,
          rule="equivalent", margin=0.1, curve=cm.luo_curve()),
    Claim("luo_bn_main", "Luo et al.", "BN's generalization error follows WN + gamma decay at "
          "the main text's zeta = 1/(2M) (§4, Fig. 1a; within 10%)", "teacher_student",
          "gen_error / closed form (WN + gamma decay at 1/(2M)) - 1, final checkpoint",
          cm.rel_error("rel_error_main"), ("batchnorm",), baseline=None, rule="equivalent",
          margin=0.1, curve=cm.luo_curve("zeta_main")),
    Claim("luo_wn", "Luo et al.", "WN + gamma decay's generalization error follows the closed "
          "form of the objective it trains (Krogh & Hertz ridge, lam = alpha zeta; within 10%)",
          "teacher_student", "gen_error / closed form (WN + gamma decay) - 1, final checkpoint",
          cm.rel_error(), ("weightnorm_gamma_decay",), baseline=None, rule="equivalent",
          margin=0.1, curve=cm.luo_curve()),
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
    "no_less": "supported iff the CI lies above -{m:.3g}; not supported iff below -{m:.3g}",
    "equivalent": "supported iff the CI lies inside ±{m:.3g}; not supported iff outside it",
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
                   cohens_dz=(out["effect"] / sd if sd > 0 else np.inf * np.sign(out["effect"])
                              if out["effect"] != 0 else np.nan))
    return out


def evaluate(frames: dict[str, pd.DataFrame], level: float = 0.95) -> pd.DataFrame:
    rows = []
    for c in CLAIMS:
        base = {"claim_id": c.key, "paper": c.paper, "claim": c.claim, "quantity": c.quantity,
                "rule": RULE_TEXT[c.rule].format(m=c.margin), "baseline": c.baseline,
                "role": c.role, "curve": ""}
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
                curve = c.curve(df, norm, exp) if c.curve else ""
                rows.append({**base, "curve": curve, "experiment": exp, "dataset": ds,
                             "model": model,
                             "norm": norm, "value": float(by_norm[norm].mean()),
                             "baseline_value": float(base_values.mean()), **eff,
                             "verdict": verdict, "note": note})
        if not found:
            runs = (f"both {c.baseline} and one of" if c.baseline is not None
                    else "any of") + " " + ", ".join(c.norms)
            rows.append({**base, "verdict": "not measured", "note": f"no experiment runs {runs}"})
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
                    "inequality holds", "baseline": "plain least squares", "role": "test",
            "curve": ""}
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
