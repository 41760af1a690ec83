"""The ledger's row for Dannemann & Junike's counterexample, from the ``dannemann`` analysis's
table (:mod:`bnstudy.analyses.dannemann`)."""

from __future__ import annotations

import pandas as pd

from bnstudy.claims.decide import outcomes as O


def dannemann_claim(df: pd.DataFrame | None) -> list[dict]:
    """Dannemann & Junike: at the plain optimum W* the BN loss gradient is not zero, gradient
    descent on the BN loss ends on 3 w1 = 5 w2, and Lemma 4.5's inequality fails at W0 = W*."""
    base = {"claim_id": "dannemann", "paper": "Dannemann & Junike",
            "claim": "BN does not improve initialization (Santurkar's Lemma 4.5 fails)",
            "quantity": "||grad L_BN(W*)||; max |3w1 - 5w2| / (sqrt(34)||w||) after GD; Lemma "
                        "4.5 at W0 = W*",
            "rule": "supported iff the gradient norm > 1e-6, the GD residual < 1e-6 and the "
                    "inequality fails at W0 = W*; contradicted if the gradient vanishes or the "
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
        verdict = O.SUPPORTED
    elif g <= 1e-6 or holds:
        verdict = O.CONTRADICTED
    else:
        verdict = O.UNDECIDED
    lhs, rhs = float(lemma["lhs_reached"].iloc[0]), float(lemma["rhs"].iloc[0])
    note = (f"||grad|| = {g:.4g}; GD residual {resid:.2g} over {len(final)} starts; Lemma 4.5 "
            f"{'holds' if holds else 'fails'} at W0 = W* (lhs {lhs:.4g} vs rhs {rhs:.4g})")
    return [{**base, "value": g, "effect": g, "verdict": verdict, "note": note,
             "in_words": f"the BN loss's gradient at the plain optimum has norm {g:.3g} (0 "
                         f"would make W* a stationary point of BN), GD ends {resid:.2g} from "
                         f"the line 3 w1 = 5 w2, and Lemma 4.5 {'holds' if holds else 'fails'} "
                         "at W0 = W*",
             "verdict_means": "supported: W* is not stationary for BN and the lemma fails "
                              "there; contradicted at this setting: the gradient vanishes "
                              "or the lemma holds"}]
