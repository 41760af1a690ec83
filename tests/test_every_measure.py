"""``every_measure: true`` (the tiny study's switch): every registered measure runs, one the
config does not configure with its default options, so a new measure runs through the tiny study
in seconds with no edit there."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from bnstudy import measures
from bnstudy.config import study
from bnstudy.config.loader import ConfigError
from bnstudy.planning.plan import Plan

TINY = yaml.safe_load((Path(__file__).resolve().parents[1] / ".test" / "config.yaml").read_text())


def _checked(**changes) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg.pop("ics")  # a measure the config leaves out, as a new measure would be
    cfg.update(changes)
    return study.check(cfg)


def test_the_tiny_study_turns_on_every_registered_measure():
    assert TINY["every_measure"] is True
    checked = study.check(copy.deepcopy(TINY))
    assert set(measures.REGISTRY) <= set(checked)
    planned = Plan(checked).measures
    assert set(planned) == set(measures.REGISTRY)


def test_a_measure_without_a_section_gets_its_defaults():
    on = _checked(every_measure=True)
    defaults = measures.REGISTRY["ics"].options.parse({})
    assert measures.REGISTRY["ics"].options.parse(on["ics"]) == defaults
    assert "ics" in Plan(on).measures


def test_off_leaves_an_unconfigured_measure_out():
    off = _checked(every_measure=False)
    assert "ics" not in off
    assert "ics" not in Plan(off).measures


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_non_boolean_switch_is_refused_by_name(bad):
    with pytest.raises(ConfigError, match="every_measure"):
        _checked(every_measure=bad)
