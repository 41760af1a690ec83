"""The report's opening sentences (bnstudy.report.prose) say what the ledger says."""

import numpy as np
import pandas as pd

from bnstudy.report import prose, summary


def _row(cid, exp, adjusted, words, need, role="test"):
    return {"claim_id": cid, "claim": f"claim {cid}", "experiment": exp, "norm": "batchnorm",
            "baseline": "none", "effect": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n_seeds": 6,
            "verdict": adjusted, "adjusted_verdict": adjusted, "in_words": words,
            "seeds_needed": need, "role": role}


def test_the_opening_counts_and_spells_out_the_ledgers_rows():
    ledger = pd.DataFrame([
        _row("ics_grad", "star", "supported", "batchnorm's ICS is 4.3x none's", 3.0),
        _row("lipschitz", "star", "contradicted at this setting", "5.7x none's", 4.0),
        _row("grad_pred", "digits", "undecided", "0.99x none's", 12.0),
        _row("beta_smooth", "digits", "undecided", "0.9x none's", np.inf),
        _row("prop2_mu", "star", "supported", "1.01x", 3.0, role="implementation check"),
        {"claim_id": "noisy_bn", "claim": "c", "verdict": "not measured",
         "adjusted_verdict": "not measured", "role": "test"},
    ])
    text = prose.paragraphs(summary.rows(ledger, {}, set()))
    assert text[0] == ("This study measured 4 paper tests (4 claims); after Holm's adjustment "
                       "over them, 1 are supported, 1 contradicted at this setting, 0 absent "
                       "at this setting and 2 undecided.")
    assert text[1] == ("Supported: batchnorm's ICS is 4.3x none's (ics_grad, "
                       "star: batchnorm vs none).")
    assert text[2].startswith("Contradicted at this setting: 5.7x none's (lipschitz, star")
    assert text[3] == ("Undecided: beta_smooth, grad_pred. At their observed effects and "
                       "spreads they would need 12 to 12 seeds (median 12) to be resolved "
                       "with 80% power; 1 sit on their rule's boundary.")
    assert text[4] == ("Counted apart, as they do not test a paper's claim statistically: 1 "
                       "implementation check row (1 supported).")
    assert prose.paragraphs(summary.rows(ledger.iloc[5:], {}, set())) == []


def test_long_lists_are_counted_not_spelled_out():
    rows = [_row(f"c{i}", "e", "supported", f"w{i}", 3.0) for i in range(prose.SHOWN + 3)]
    text = prose.paragraphs(summary.rows(pd.DataFrame(rows), {}, set()))
    assert text[1].endswith("; and 3 more rows.") and "w0" in text[1]
    assert f"w{prose.SHOWN}" not in text[1]


def test_the_variance_table_counts_each_normalizers_quantities():
    from bnstudy.report import variance

    def ics(n, s, layer, k):  # none: a seed effect; batchnorm: every run's mean the same
        if n == "none":
            return 0.1 * s + 0.001 * (-1) ** (layer + k)
        return 0.05 + 0.02 * (-1) ** (layer + k + s)

    rows = [{"experiment": "e", "dataset": "d", "model": "m", "norm": n, "seed": s,
             "layer_index": layer, "step": 10 * k, "grad_cosine": 1 - ics(n, s, layer, k)}
            for n in ("none", "batchnorm") for s in range(4) for layer in (1, 2, 3)
            for k in (0, 1)]
    t = variance.rows({"ics": pd.DataFrame(rows)})
    assert list(t["normalizer"]) == ["batchnorm", "none"] and (t["quantities"] == 1).all()
    # none's runs differ by seed (between dominates); batchnorm's only within
    assert t.set_index("normalizer").loc["none", "more seeds"] == 1
    assert t.set_index("normalizer").loc["batchnorm", "more within-run samples"] == 1
    assert "<table" in variance.table({"ics": pd.DataFrame(rows)})
    assert variance.table({}) == ""
