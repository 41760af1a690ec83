"""`python -m bnstudy compare A B`: the ledger rows whose verdicts or effects differ (issue 23)."""

import os

import pandas as pd
import pytest

from bnstudy import io
from bnstudy.claims.say import compare
from bnstudy.cli import main as cli


def _row(cid, norm, verdict, effect, **kw):
    return {"claim_id": cid, "experiment": "e", "dataset": "d", "model": "m", "norm": norm,
            "baseline": "none", "verdict": verdict, "adjusted_verdict": verdict,
            "effect": effect, "ci_low": effect - 1, "ci_high": effect + 1, "n_seeds": 3, **kw}


def _study(tmp_path, name, rows):
    d = tmp_path / name
    (d / "tables").mkdir(parents=True)
    io.write_table(pd.DataFrame(rows), d / "tables" / "claims.parquet", {"config_hash": name})
    return str(d)


A = [_row("ics_grad", "batchnorm", "supported", 0.5), _row("lipschitz", "batchnorm",
                                                            "undecided", -0.2),
     _row("noisy_bn", "noisy_batchnorm", "supported", 0.1)]


def test_same_ledger_has_no_differences(tmp_path, capsys):
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", A[::-1])
    assert cli.main(["compare", a, b]) == 0
    assert "no differences" in capsys.readouterr().out


def test_changed_verdict_effect_and_missing_rows_are_listed(tmp_path, capsys):
    b_rows = [_row("ics_grad", "batchnorm", "supported", 0.5 + 1e-12),  # same within tol
              _row("lipschitz", "batchnorm", "supported", -1.5),
              _row("jitter_aug", "batchnorm_jitter", "undecided", 0.3)]
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", b_rows)
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "3 ledger row(s) differ" in out
    assert "lipschitz [e: batchnorm vs none] (verdict, adjusted verdict, effect; why: " in out
    assert "noisy_bn" in out and "only in A" in out
    assert "jitter_aug" in out and "only in B" in out
    assert "ics_grad" not in out
    diff = compare.compare(pd.DataFrame(A), pd.DataFrame(b_rows), tol=0.0)
    assert "ics_grad" in set(diff["claim_id"])  # tol=0: identical numbers only


# -- issue 34: compare reads through the checked reader, validates --tol, names rows readably ---

def _flip(path, at: float = 0.5) -> None:
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * at)] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("verb", ["compare", "ledger"])
def test_a_flipped_byte_in_a_claims_table_is_refused_by_name(tmp_path, capsys, verb):
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", A)
    path = tmp_path / "b" / "tables" / "claims.parquet"
    _flip(path)
    assert cli.main([verb, a, b] if verb == "compare" else [verb, b]) == 2
    captured = capsys.readouterr()
    assert f"{path} is corrupt" in captured.err and "Traceback" not in captured.err
    assert "differ" not in captured.out and "|" not in captured.out


@pytest.mark.parametrize("verb", ["compare", "ledger"])
def test_a_foreign_or_other_table_as_claims_is_refused(tmp_path, capsys, verb):
    a = _study(tmp_path, "a", A)
    foreign = tmp_path / "f" / "tables" / "claims.parquet"
    foreign.parent.mkdir(parents=True)
    pd.DataFrame(A).to_parquet(foreign)  # not written by bnstudy: no checksum
    other = tmp_path / "o" / "tables" / "claims.parquet"
    io.write_table(pd.DataFrame({"step": [0], "loss": [1.0]}), other, {})  # a training table
    for bad, why in ((foreign, "not a bnstudy table"), (other, "is not a claims ledger: it has "
                                                          "no column claim_id, verdict")):
        d = str(bad.parent.parent)
        assert cli.main([verb, a, d] if verb == "compare" else [verb, d]) == 2
        err = capsys.readouterr().err
        assert f"{bad}" in err and why in err


@pytest.mark.parametrize("tol", ["nan", "-1", "inf", "x", "-inf"])
def test_a_bad_tolerance_is_refused(tmp_path, capsys, tol):
    a = _study(tmp_path, "a", A)
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", a, a, f"--tol={tol}"])
    assert e.value.code == 2
    assert "--tol: must be a finite number >= 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        compare.compare(pd.DataFrame(A), pd.DataFrame(A), tol=float(tol) if tol != "x" else tol)


def test_zero_tolerance_is_valid(tmp_path, capsys):
    a = _study(tmp_path, "a", A)
    assert cli.main(["compare", a, a, "--tol", "0"]) == 0
    assert compare.compare(pd.DataFrame(A), pd.DataFrame(A), tol=0).empty


def test_rows_over_no_experiment_are_named_readably(tmp_path, capsys):
    """Across studies, a claim one study did not measure is a row with no experiment nor
    normalizer: it printed as ``[ vs none]``."""
    unmeasured = {**_row("lipschitz", "", "not measured", float("nan")), "experiment": "",
                  "dataset": "", "model": ""}
    a, b = _study(tmp_path, "a", A), _study(tmp_path, "b", [*A, unmeasured])
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "[ vs none]" not in out
    assert "- lipschitz [no experiment vs none] (only in B; why: the declaration)" in out
    assert "- ics_grad" not in out


def test_ledger_without_arguments_prints_the_default_studys_ledger(tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ledger"]) == 2  # no config/config.yaml here: says what it needs
    err = capsys.readouterr().err
    assert "name the results directories" in err and "config/config.yaml" in err
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("results: out/default\n")
    assert cli.main(["ledger"]) == 2  # the default study has not run
    assert f"no claims ledger at {os.path.join('out', 'default', 'tables', 'claims.parquet')}" \
        in capsys.readouterr().err
    _study(tmp_path / "out", "default", A)
    assert cli.main(["ledger"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## out/default\n") and "`ics_grad`" in out
