"""A ledger row in plain words (issue 23): the effect as a ratio, points or percent with its
interval, and what 'supported' means for the row's rule and margin."""

import math

import pandas as pd
import pytest

from bnstudy.claims import ledger
from bnstudy.claims.pairing import measured_row
from bnstudy.claims.say import words


def test_a_log_ratio_reads_as_times_the_baseline():
    text = words.effect_words(math.log(4.0), math.log(1.1), math.log(14.0), scale="log",
                              what="ICS", norm="batchnorm", baseline="none")
    assert text == "batchnorm's ICS is 4x none's [1.1x, 14x]"


def test_a_negatively_worded_claim_says_what_supported_means():
    text = words.rule_words("no_less", math.log(1.25), scale="log", what="ICS",
                            norm="batchnorm", baseline="none")
    assert text.startswith("supported: batchnorm's ICS is reliably above 0.8x none's")
    assert "contradicted at this setting: reliably below 0.8x none's" in text


@pytest.mark.parametrize("scale,effect,expect", [
    ("points", 0.4, "+0.4 points"), ("relative", 0.028, "+2.8%"), ("diff", -1.5, "-1.5")])
def test_other_scales(scale, effect, expect):
    text = words.effect_words(effect, effect - 0.1, effect + 0.1, scale=scale, what="q",
                              norm="a", baseline="b")
    assert expect in text and text.startswith("a's q differs from b's by")


def test_no_effect_no_words():
    assert words.effect_words(float("nan"), None, None, scale="log", what="q") == ""


def test_every_claim_declares_a_known_scale_and_what_it_measures():
    for c in ledger.CLAIMS:
        assert c.scale in words.SCALES, c.key
        assert c.what, c.key


def test_measured_rows_carry_their_words():
    c = next(c for c in ledger.CLAIMS if c.key == "ics_grad")
    arm = pd.Series([math.log(0.4), math.log(0.5), math.log(0.45)], index=[0, 1, 2])
    base = pd.Series([math.log(0.1), math.log(0.12), math.log(0.11)], index=[0, 1, 2])
    row = measured_row({}, c, 0.95, arm, base, experiment="e", norm="batchnorm")
    assert row["in_words"].startswith("batchnorm's ICS is 4.") and "x none's [" in row["in_words"]
    assert row["verdict_means"].startswith("supported: batchnorm's ICS is reliably above")


def test_an_extreme_log_ratio_interval_is_written_not_an_overflow():
    """A skew-corrected bound at few seeds can be far beyond exp's range (the santurkar round
    failed on one: OverflowError)."""
    text = words.effect_words(2.0, -1500.0, 800.0, scale="log", what="ICS", norm="bn",
                              baseline="none")
    assert "[e^-1.5e+03x, e^800x]" in text
    assert "1.0e+07x" in words.effect_words(math.log(1e7), 0.0, 20.0, scale="log", what="q",
                                            norm="a", baseline="b")
