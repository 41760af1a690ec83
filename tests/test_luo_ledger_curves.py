"""Issues 18 and 30: the Luo §4 ledger rows compare each arm with the curve of the objective it
trains or is equivalent to (WN + gamma decay: ridge lam = alpha zeta; BN: least squares shrunk
by 1/(1 + zeta) at App. C.3's zeta), and Luo's own claim, the curve Fig. 1a prints (1/(2M),
lam = zeta), on the paper's BN student (variance-only BN) alone."""

import numpy as np
import pandas as pd

from bnstudy.claims.ledger import CLAIMS


def _claim(key):
    return next(c for c in CLAIMS if c.key == key)


def _table():
    rows = []
    for seed in range(3):  # as the teacher_student measure now writes them
        common = {"seed": 0, "alpha": 2.0, "N": 400, "P": 800, "S": 0.25}
        rows.append({**common, "experiment": f"a2_d{seed}_sgd", "norm": "batchnorm",
                     "batch_size": 32, "lr": 0.1, "zeta": 3 / 64, "zeta_main": 1 / 64,
                     "curve": "shrinkage", "convention": None, "rel_error": 0.01,
                     "rel_error_main": 0.02})
        rows.append({**common, "experiment": f"a2_d{seed}_sgd", "norm": "weightnorm_varonly_bn",
                     "batch_size": 32, "lr": 0.1, "zeta": 1 / 64, "zeta_main": 1 / 64,
                     "curve": "shrinkage", "convention": None, "rel_error": 0.01,
                     "rel_error_main": 0.02})
        rows.append({**common, "experiment": f"a2_d{seed}_wn", "norm": "weightnorm_gamma_decay",
                     "batch_size": 800, "lr": 0.5, "zeta": 1 / 64, "zeta_main": np.nan,
                     "curve": "ridge", "convention": "loss", "rel_error": 0.0,
                     "rel_error_main": np.nan})
    return pd.DataFrame(rows)


def test_each_arm_names_the_curve_of_its_objective():
    df = _table()
    bn_exp = "alpha=2, M=32, lr=0.1, N=400, S=0.25 (pooled)"
    wn_exp = "alpha=2, M=full, lr=0.5, N=400, S=0.25 (pooled)"
    bn, wn, main = _claim("luo_bn"), _claim("luo_wn"), _claim("luo_bn_main")
    assert "shrunk by 1/(1 + zeta)" in bn.claim and "output variance" in bn.claim
    assert "3/(2M)" in bn.claim and "1/(2M)" in bn.claim
    assert bn.norms == ("batchnorm", "weightnorm_varonly_bn")
    assert bn.curve(df, "batchnorm", bn_exp) == ("least squares shrunk by 1/(1 + zeta) at zeta "
                                                 "= 0.04688 = 1.5/M, M = 32")
    assert bn.curve(df, "weightnorm_varonly_bn", bn_exp) == (
        "least squares shrunk by 1/(1 + zeta) at zeta = 0.01562 = 0.5/M, M = 32")
    assert wn.curve(df, "weightnorm_gamma_decay", wn_exp) == (
        "WN + gamma decay closed form (ridge) at zeta = 0.01562, ridge lam = alpha zeta")
    assert "lam = alpha zeta" in wn.claim
    # Luo's own claim: its BN student (variance-only) against Fig. 1a's printed curve
    assert main.claim.startswith("Luo's own claim") and main.norms == ("weightnorm_varonly_bn",)
    assert main.curve(df, "weightnorm_varonly_bn", bn_exp) == (
        "WN + gamma decay closed form (ridge) at zeta = 0.01562 = 0.5/M, M = 32, ridge lam = "
        "zeta")


def test_a_table_written_before_the_curve_column_reads_as_a_ridge():
    df = _table().drop(columns=["curve"])
    df.loc[df["norm"] == "batchnorm", "convention"] = "loss"
    got = _claim("luo_bn").curve(df, "batchnorm", "alpha=2, M=32, lr=0.1, N=400, S=0.25 (pooled)")
    assert got == ("WN + gamma decay closed form (ridge) at zeta = 0.04688 = 1.5/M, M = 32, "
                   "ridge lam = alpha zeta")
