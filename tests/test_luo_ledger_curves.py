"""Issue 18, item 3: the Luo §4 ledger rows compare every arm with the curve of the objective it
is equivalent to (lam = alpha zeta; BN at App. C.3's zeta), and show the curve Luo's Fig. 1a
prints only as a labelled secondary row."""

import pandas as pd

from bnstudy.claims.ledger import CLAIMS


def _claim(key):
    return next(c for c in CLAIMS if c.key == key)


def _table():
    rows = []
    for seed in range(3):  # as the teacher_student measure now writes them (convention: loss)
        rows.append({"experiment": f"a2_d{seed}_sgd", "norm": "batchnorm", "seed": 0,
                     "alpha": 2.0, "batch_size": 32, "zeta": 3 / 64, "zeta_main": 1 / 64,
                     "convention": "loss", "rel_error": 0.01, "rel_error_main": 0.02})
        rows.append({"experiment": f"a2_d{seed}_wn", "norm": "weightnorm_gamma_decay",
                     "seed": 0, "alpha": 2.0, "batch_size": 400, "zeta": 1 / 64,
                     "zeta_main": float("nan"), "convention": "loss", "rel_error": 0.0,
                     "rel_error_main": float("nan")})
    return pd.DataFrame(rows)


def test_primary_rows_use_the_objectives_ridge_and_the_secondary_is_labelled():
    df, exp = _table(), "alpha=2 (pooled)"
    bn, wn, main = _claim("luo_bn"), _claim("luo_wn"), _claim("luo_bn_main")
    assert "lam = alpha zeta" in bn.claim and "3/(2M)" in bn.claim
    assert bn.curve(df, "batchnorm", exp) == ("WN + gamma decay closed form at zeta = 0.04688 = "
                                              "1.5/M, M = 32, ridge lam = alpha zeta")
    assert "ridge lam = alpha zeta" in wn.curve(df, "weightnorm_gamma_decay", exp)
    # the secondary row: Fig. 1a's printed curve, 1/(2M) with lam = zeta, whatever the table's
    # (primary) convention column says
    assert main.claim.startswith("secondary: the curve printed in Luo Fig. 1a")
    assert main.quantity.startswith("secondary:")
    assert main.curve(df, "batchnorm", exp) == ("WN + gamma decay closed form at zeta = 0.01562 "
                                                "= 0.5/M, M = 32, ridge lam = zeta")
