"""The answer first (bnstudy.report.answer): one generated sentence per claim from the ledger,
saying where it goes which way; deviations grouped under the paper whose protocol they compare
against, each difference once; the README's sentences beside its counts."""

from __future__ import annotations

import math

import pandas as pd

from bnstudy import io
from bnstudy.report import answer, readme

BB = "BB §3.3: an MLP on 50 points of a 2-D star"
SANT = "Santurkar App. A: a VGG on CIFAR-10"


def _row(cid, exp, verdict, ratio, paper="Santurkar et al.", protocol=SANT, deviations="",
         claim="BN does not reduce gradient ICS", norm="batchnorm", baseline="none",
         role="test"):
    return {"claim_id": cid, "paper": paper, "claim": claim, "experiment": exp, "norm": norm,
            "baseline": baseline, "role": role, "verdict": verdict, "adjusted_verdict": verdict,
            "effect": math.log(ratio) if ratio else float("nan"), "protocol": protocol,
            "deviations": deviations}


def _ledger():
    return pd.DataFrame([
        _row("ics_grad", "dln", "supported", 1.6),
        _row("ics_grad", "star", "supported", 4.2),
        _row("ics_grad", "digits", "not supported", 0.16,
             deviations="8x8 digits, not CIFAR-10; 600 of the paper's 15,000 steps"),
        _row("pd_data_vs_none", "digits", "inconclusive", 1.08, paper="Balestriero & Baraniuk",
             protocol=BB, claim="BN concentrates the partition near the data",
             deviations="8x8 digits, not 50 points of a 2-D star; depth 4 vs the paper's 11"),
        _row("pd_data_vs_none", "star", "inconclusive", 1.1, paper="Balestriero & Baraniuk",
             protocol=BB, claim="BN concentrates the partition near the data",
             deviations="depth 4 vs the paper's 11"),
        _row("prop2_mu", "star", "supported", 1.01, role="implementation check",
             claim="Proposition 2"),
        _row("noisy_bn", None, "not measured", None, claim="noisy BN", norm=None),
    ])


def test_one_sentence_per_tested_claim_says_where_it_goes_which_way():
    said = answer.sentences(_ledger())
    assert [s["claim_id"] for s in said] == ["ics_grad", "pd_data_vs_none"]
    assert said[0]["text"] == (
        "BN does not reduce gradient ICS: supported on dln and star (1.6x and "
        "4.2x the plain net's); contradicted at this setting on digits (0.16x the plain net's).")
    assert said[1]["text"].startswith("BN concentrates the partition near the data: undecided "
                                      "on digits and star (1.1x and 1.1x the plain net's)")
    assert said[0]["decided"] and not said[1]["decided"]
    other = answer.others(_ledger())
    assert "1 implementation check row (1 supported)" in other
    assert "Not measured here: noisy_bn." in other


def test_a_users_normalizer_is_named_where_it_is_not_the_claims_usual_arm():
    ledger = pd.DataFrame([_row("ics_grad", "star", "supported", 4.2),
                           _row("ics_grad", "dln", "supported", 1.6),
                           _row("ics_grad", "star", "not supported", 0.5, norm="rms")])
    text = answer.sentences(ledger)[0]["text"]
    assert "contradicted at this setting on star (rms) (0.5x the plain net's)" in text


def test_deviations_are_grouped_under_their_paper_each_difference_once():
    """The old digits line mixed Balestriero's protocol with Santurkar's without naming them:
    each difference now sits under the paper and protocol it compares against, once, with the
    experiments it applies to."""
    groups = answer.by_paper(_ledger())
    assert [g["paper"] for g in groups] == ["Santurkar et al.", "Balestriero & Baraniuk"]
    sant, bb = groups[0]["protocols"], groups[1]["protocols"]
    assert [p["protocol"] for p in sant] == [SANT] and [p["protocol"] for p in bb] == [BB]
    assert sant[0]["lines"] == [("8x8 digits, not CIFAR-10", ["digits"]),
                                ("600 of the paper's 15,000 steps", ["digits"])]
    assert bb[0]["lines"] == [("8x8 digits, not 50 points of a 2-D star", ["digits"]),
                              ("depth 4 vs the paper's 11", ["digits", "star"])]


def test_the_readme_block_says_what_each_study_found_beside_its_counts(tmp_path):
    (tmp_path / "s" / "tables").mkdir(parents=True)
    io.write_table(_ledger(), tmp_path / "s" / "tables" / "claims.parquet", {})
    text = "x\n<!-- verdicts: s -->\nold\n<!-- /verdicts -->\ny\n"
    out = readme.rewrite(text, tmp_path)
    block = out[out.index("<!-- verdicts"):out.index("<!-- /verdicts")]
    assert "| `s` |" in block  # the counts
    assert ("- **`s`**: BN does not reduce gradient ICS: supported on dln and "
            "star") in block
    assert "1 more claim in its [report](s/report.html)." in block
    assert readme.rewrite(out, tmp_path) == out
