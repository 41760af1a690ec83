"""Issue 46: every directional paper test declares its margin and where it comes from; each row
is what it is (the paper's quantity decides, implementation checks and one-seed runs are not
tests); and the four outcome words are the same on every surface."""

import numpy as np
import pandas as pd

from bnstudy.claims import ledger as claims
from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.say import compare, markdown
from bnstudy.cli import main as cli
from bnstudy.report import prose, readme, summary

# the claims whose paper gives a number (issue 46's list): the only paper-sourced margins
PAPER_NUMBERS = {"grad_pred", "jitter_batch", "jitter_aug"}
WORDS = ("supported", "contradicted at this setting", "absent at this setting", "undecided")


def test_every_test_claim_declares_its_margin_and_its_source():
    for c in claims.CLAIMS:
        if c.role != "test":
            continue
        assert c.margin > 0, c.key
        assert c.margin_source.startswith(("paper: ", "project: ")), c.key
        is_paper = c.margin_source.startswith("paper: ")
        assert is_paper == (c.key in PAPER_NUMBERS), c.key
        if not is_paper:
            assert c.paper_effect is None and not c.paper_words, c.key
    # no project number printed beside a paper's figure as if it were the paper's
    noisy = next(c for c in claims.CLAIMS if c.key == "noisy_bn")
    assert "1.5 above BN's; Fig. 2" not in noisy.claim and "project" in noisy.claim


def test_rows_are_what_they_are():
    roles = {c.key: c.role for c in claims.CLAIMS}
    assert roles["luo_sgd"] == "implementation check"
    assert roles["luo_bn"] == "beyond the paper" and roles["luo_bn_main"] == "test"
    assert roles["grad_pred_rel"] == roles["lipschitz_rel"] == "beyond the paper"
    quantity = {c.key: c.quantity for c in claims.CLAIMS}
    assert "/ ||g||" not in quantity["grad_pred"] and "absolute" in quantity["grad_pred"]


def _smooth(n_seeds, model="m", experiment="e"):
    rows = []
    for norm, beta in (("batchnorm", 1.0), ("none", 5.0)):
        for seed in range(n_seeds):
            for step in (0, 10):
                b = beta * (1 + 0.05 * seed)
                rows.append({"experiment": experiment, "dataset": "d", "model": model,
                             "norm": norm, "seed": seed, "step": step, "beta_eff": b,
                             "grad_pred_max": b, "loss_min": 1.0, "loss_max": 1.0 + b,
                             "loss": 1.0, "grad_norm": 1.0})
    return pd.DataFrame(rows)


def test_one_seed_rows_are_illustrations_not_paper_tests():
    led = claims.evaluate({"smoothness": _smooth(1)})
    row = led[led["claim_id"] == "grad_pred"].iloc[0]
    assert row["role"] == "one-seed illustration" and "not a test" in row["note"]
    assert summary.kind(row) == "one-seed illustration"
    assert readme.counts(led)["tests"] == 0


def test_noisy_bn_on_a_deep_linear_net_is_beyond_the_paper():
    rows = []
    for norm, loss in (("noisy_batchnorm", 0.5), ("batchnorm", 0.4)):
        for seed in range(3):
            rows.append({"experiment": "e", "dataset": "d", "model": "dln25", "norm": norm,
                         "seed": seed, "step": 100, "split": "train", "accuracy": 0.9,
                         "loss": loss * (1 + 0.1 * seed)})
    led = claims.evaluate({"training": pd.DataFrame(rows)}).set_index("claim_id")
    assert led.loc["noisy_bn", "verdict"] != "not measured"
    assert led.loc["noisy_bn", "role"] == "beyond the paper"


def test_the_outcome_words_are_the_same_on_every_surface(tmp_path, capsys):
    """Parquet (the ledger's columns), Markdown ledgers, compare, the report's summary and
    prose, and the README counts all write the four words of claims/decide/outcomes.py, and read an
    older ledger's words as them."""
    assert O.OUTCOMES == WORDS
    led = claims.evaluate({"smoothness": _smooth(12)})
    measured = led[led["verdict"] != "not measured"]
    # the ledger's columns hold only the outcome words
    assert set(measured["verdict"]) <= set(WORDS) and set(measured["adjusted_verdict"]) <= set(
        WORDS)
    path = tmp_path / "a" / "tables" / "claims.parquet"
    path.parent.mkdir(parents=True)
    from bnstudy import io
    io.write_table(led, path, io.provenance("x", "cpu"))
    back = io.read_table(path)
    assert set(back.loc[back["verdict"] != "not measured", "verdict"]) <= set(WORDS)
    # Markdown: the verdict cells
    md = markdown.table(led)
    for v in set(measured["verdict"]):
        assert f"| {v} |" in md
    # README counts: one column per outcome, in the words
    head = readme.table(tmp_path, ["a"]).splitlines()[0]
    for w in WORDS:
        assert f"| {w} |" in head
    # report summary and prose
    rows = summary.rows(led, {}, set())
    assert {r["adjusted_word"] for r in rows if r["measured"]} <= set(WORDS)
    text = prose.paragraphs(rows)[0]
    for w in WORDS:
        assert w in text
    # compare: an older ledger's words read as the outcome words, so only real changes show
    old = led.copy()
    old["verdict"] = old["verdict"].replace({"contradicted at this setting": "not supported",
                                             "undecided": "inconclusive"})
    assert compare.compare(old, led).empty
    b = led.copy()
    i = b.index[b["verdict"] == "supported"][0]
    b.loc[i, "verdict"] = "absent at this setting"
    diff = compare.compare(led, b)
    assert list(diff["verdict_b"]) == ["absent at this setting"]
    pb = tmp_path / "b" / "tables" / "claims.parquet"
    pb.parent.mkdir(parents=True)
    io.write_table(b, pb, io.provenance("x", "cpu"))
    cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert "absent at this setting" in capsys.readouterr().out
    # the words reach no surface in the legacy form
    for surface in (md, text):
        assert "not supported" not in surface and "inconclusive" not in surface
    assert np.isfinite(measured["margin"]).all()
