"""The README's ledger blocks are generated from the studies' claims ledgers."""

import numpy as np
import pandas as pd
import pytest

from bnstudy import io
from bnstudy.claims.say import markdown as lm


def _ledger(tmp_path, name, rows):
    d = tmp_path / "results" / name / "tables"
    d.mkdir(parents=True)
    io.write_table(pd.DataFrame(rows), d / "claims.parquet", {})


ROWS = [
    {"claim_id": "ics_grad", "experiment": "dln", "norm": "batchnorm", "baseline": "none",
     "effect": 0.1234, "ci_low": -0.02, "ci_high": 0.27, "n_seeds": 3, "verdict": "undecided",
     "value": 0.5, "note": "", "adjusted_verdict": "undecided", "seeds_needed": 14.0,
     "in_words": "batchnorm's ICS is 1.1x none's [0.98x, 1.3x]"},
    {"claim_id": "lipschitz", "experiment": None, "norm": None, "baseline": "none",
     "effect": np.nan, "ci_low": np.nan, "ci_high": np.nan, "n_seeds": np.nan,
     "verdict": "not measured", "value": np.nan, "note": "no smoothness table"},
    {"claim_id": "dannemann", "experiment": None, "norm": None, "baseline": "plain | ls",
     "effect": np.nan, "ci_low": np.nan, "ci_high": np.nan, "n_seeds": np.nan,
     "verdict": "supported", "value": 0.3576, "note": "grad"},
]


def test_table_states_every_row_with_its_numbers():
    md = lm.table(pd.DataFrame(ROWS))
    lines = md.strip().splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert ("| `ics_grad` | dln: batchnorm vs none | 0.123 [-0.02, 0.27] | batchnorm's ICS is "
            "1.1x none's [0.98x, 1.3x] | 3 | undecided | undecided | 14 |") in md
    assert "no smoothness table" in lines[3] and "not measured" in lines[3]
    assert "0.358" in lines[4] and "supported" in lines[4]


def test_table_shows_the_adjusted_verdict_and_the_seeds_needed():
    row = {**ROWS[0], "verdict": "supported", "adjusted_verdict": "undecided",
           "seeds_needed": np.inf, "deviations": "lr 0.001 vs the paper's 0.01"}
    md = lm.table(pd.DataFrame([row]))
    assert md.splitlines()[0].endswith(
        "| verdict | adjusted verdict | seeds needed | departs from the paper's setting |")
    assert md.strip().splitlines()[-1].endswith(
        "| supported | undecided | inf | lr 0.001 vs the paper's 0.01 |")
    row.update(seeds_needed=12.0, seeds_needed_low=5.0, seeds_needed_high=np.inf)
    md = lm.table(pd.DataFrame([row]))
    assert "| 12 (5-inf) | lr 0.001" in md  # seeds needed with its range


def test_rewrite_regenerates_blocks_and_keeps_the_rest(tmp_path):
    _ledger(tmp_path, "a", ROWS[:1])
    _ledger(tmp_path, "b", ROWS[1:])
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- ledger: results/a -->\nstale 0.999\n<!-- /ledger -->\nmiddle\n"
                      "<!-- ledger: results/b -->\n<!-- /ledger -->\nend\n")
    assert lm.rewrite_file(readme) == 2
    text = readme.read_text()
    assert "stale" not in text and "0.123 [-0.02, 0.27]" in text
    assert "Not measured by this study: `lipschitz`." in text and "no smoothness table" not in text
    assert text.startswith("intro\n") and "\nmiddle\n" in text and text.endswith("end\n")
    assert lm.rewrite(text, tmp_path) == text  # idempotent


def test_missing_ledger_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="results/none/tables/claims.parquet"):
        lm.rewrite("<!-- ledger: results/none -->\n<!-- /ledger -->", tmp_path)


def test_where_names_the_curve_and_an_implementation_check():
    row = {**ROWS[0], "claim_id": "prop2_mu", "role": "implementation check", "curve": ""}
    luo = {**ROWS[0], "claim_id": "luo_bn", "role": "test", "curve": "zeta = 1/(2M)"}
    md = lm.table(pd.DataFrame([row, luo]))
    assert "dln: batchnorm vs none (implementation check)" in md
    assert "dln: batchnorm vs none (zeta = 1/(2M))" in md


def test_ledger_verb_rewrites_the_readme_blocks(tmp_path, capsys):
    from bnstudy.cli import main as cli

    _ledger(tmp_path, "a", ROWS)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: results/a -->\nold\n<!-- /ledger -->\n")
    assert cli.main(["ledger", "--readme", str(readme), str(tmp_path / "results" / "a")]) == 0
    assert "old" not in readme.read_text() and "`ics_grad`" in readme.read_text()
    assert "`dannemann`" in capsys.readouterr().out
    assert cli.main(["ledger", str(tmp_path / "results" / "missing")]) == 2


def test_a_row_read_at_a_sequential_look_says_its_level():
    """A replicated experiment's row has a wider interval than the study's level; the table's
    header keeps the study's level and the row names its own."""
    rows = [{**ROWS[0], "interval_level": 0.95},
            {**ROWS[0], "experiment": "star", "interval_level": 1 - 0.05 / 3}]
    md = lm.table(pd.DataFrame(rows)).splitlines()
    assert "effect [95% CI]" in md[0]
    assert "0.123 [-0.02, 0.27] |" in md[2]
    assert "0.123 [-0.02, 0.27] (98.3% CI: sequential look) |" in md[3]
    assert lm.table(pd.DataFrame([{**ROWS[0], "interval_level": 0.9}])).startswith(
        "| claim | where | effect [90% CI]")


def test_a_skewed_row_says_so():
    row = {**ROWS[0], "effect_skew": -2.1, "skew_flag": True}
    assert "(skewed: effect_skew -2.1)" in lm.table(pd.DataFrame([row]))
    row["skew_flag"] = False
    assert "skewed" not in lm.table(pd.DataFrame([row]))
