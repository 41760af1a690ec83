"""`python -m bnstudy compare A B`: the ledger rows whose verdicts or effects differ (issue 23)."""

import pandas as pd

from bnstudy import cli
from bnstudy.claims import compare


def _row(cid, norm, verdict, effect, **kw):
    return {"claim_id": cid, "experiment": "e", "dataset": "d", "model": "m", "norm": norm,
            "baseline": "none", "verdict": verdict, "adjusted_verdict": verdict,
            "effect": effect, "ci_low": effect - 1, "ci_high": effect + 1, "n_seeds": 3, **kw}


def _study(tmp_path, name, rows):
    d = tmp_path / name
    (d / "tables").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(d / "tables" / "claims.parquet")
    return str(d)


A = [_row("ics_grad", "batchnorm", "supported", 0.5), _row("lipschitz", "batchnorm",
                                                            "inconclusive", -0.2),
     _row("noisy_bn", "noisy_batchnorm", "supported", 0.1)]


def test_same_ledger_has_no_differences(tmp_path, capsys):
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", A[::-1])
    assert cli.main(["compare", a, b]) == 0
    assert "no differences" in capsys.readouterr().out


def test_changed_verdict_effect_and_missing_rows_are_listed(tmp_path, capsys):
    b_rows = [_row("ics_grad", "batchnorm", "supported", 0.5 + 1e-12),  # same within tol
              _row("lipschitz", "batchnorm", "supported", -1.5),
              _row("jitter_aug", "batchnorm_jitter", "inconclusive", 0.3)]
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", b_rows)
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "3 ledger row(s) differ" in out
    assert "lipschitz [e: batchnorm vs none] (verdict, adjusted verdict, effect)" in out
    assert "noisy_bn" in out and "only in A" in out
    assert "jitter_aug" in out and "only in B" in out
    assert "ics_grad" not in out
    diff = compare.compare(pd.DataFrame(A), pd.DataFrame(b_rows), tol=0.0)
    assert "ics_grad" in set(diff["claim_id"])  # tol=0: identical numbers only
