"""A measure's own config check (the optional ``check(options, model)`` of the measure contract,
:mod:`bnstudy.measures`): the study check (:mod:`bnstudy.config.study`) calls it for every
experiment that runs the measure, with its parsed options and the experiment's plain model,
and reports its refusal as a config error naming the option, the model and the experiment. A
throwaway measure registered for the test shows that nothing in the study names the measure."""

from __future__ import annotations

import copy
import dataclasses
import re
import types
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from harness import tiny_config

from bnstudy import measures, options
from bnstudy.config import loader, study
from bnstudy.networks import models, normalizers

BASE = tiny_config()


@dataclass(frozen=True)
class RefuserOptions(options.Options):
    """A throwaway measure's options: the most hidden blocks a model may have."""

    SECTION: ClassVar[str] = "refuser"

    max_blocks: int = options.at_least(8, 0)
    plain_error: bool = False


def _refuser(calls: list, kinds=None) -> measures.Measure:
    def check(opts, model):
        calls.append((opts, model, model.training))
        n = len(models.blocks(model))
        if opts.plain_error:
            raise ValueError(f"no good for {n} blocks")
        if n > opts.max_blocks:
            opts.fail("max_blocks", f"the model has {n} hidden blocks; valid: at least {n}")

    return measures.Measure("refuser", lambda *a: {}, RefuserOptions, ("refuser",), kinds,
                            types.ModuleType("refuser"), {"refuser": {}}, {"refuser": "-"},
                            check)


def _config(tmp_path, **section) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    cfg["refuser"] = section
    return cfg


@pytest.mark.parametrize("kinds, inputs", [(None, [2, 4]), (("gaussian_linear",), [4])])
def test_check_sees_each_experiment_that_runs_the_measure(tmp_path, monkeypatch, kinds, inputs):
    calls: list = []
    monkeypatch.setitem(measures.REGISTRY, "refuser", _refuser(calls, kinds))
    study.check(_config(tmp_path), local=False)
    # star (star2d: 2 inputs) and dln (gaussian_linear: 4) run it, ts lists its measures
    # without it, and DATASET_KINDS restricts it
    assert [models.maps(m)[0].in_features for _, m, _ in calls] == inputs
    for opts, model, _ in calls:
        assert opts == RefuserOptions(max_blocks=8)  # parsed, defaults filled in
        assert not normalizers.batch_statistics_layers(model)  # the plain net (norm none)


def test_refusal_names_option_model_and_experiment(tmp_path, monkeypatch):
    monkeypatch.setitem(measures.REGISTRY, "refuser", _refuser([]))
    with pytest.raises(loader.ConfigError) as err:
        study.check(_config(tmp_path, max_blocks=0), local=False)
    msg = str(err.value)
    assert msg.startswith("refuser.max_blocks=0: the model has ") and "valid: at least" in msg
    assert "(model 'mlp', experiment 'star')" in msg and "\n" not in msg


def test_refusal_without_the_key_is_given_the_section(tmp_path, monkeypatch):
    monkeypatch.setitem(measures.REGISTRY, "refuser", _refuser([]))
    with pytest.raises(loader.ConfigError, match=r"^refuser: no good for \d+ blocks \(model "
                                                 r"'mlp', experiment 'star'\)$"):
        study.check(_config(tmp_path, plain_error=True), local=False)


def test_no_check_no_call(tmp_path, monkeypatch):
    calls: list = []
    silent = dataclasses.replace(_refuser(calls), check=None)
    monkeypatch.setitem(measures.REGISTRY, "refuser", silent)
    study.check(_config(tmp_path, max_blocks=0), local=False)
    assert calls == []


def test_ics_check_refuses_missing_layers_and_leaves_the_model():
    check = measures.get("ics").check
    net = models.build_model(models.ModelConfig.from_dict({"arch": "mlp", "depth": 2,
                                                           "width": 8}), "batchnorm", (2,), 2)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    ics_options = measures.get("ics").options
    check(ics_options.parse({"layers": [1, -3]}), net)  # blocks 1, 2 and the head
    for bad in ([4], [-4]):
        why = re.escape(f"ics.layers={bad}: ics layer {bad[0]} out of range")
        with pytest.raises(ValueError, match=why):
            check(ics_options.parse({"layers": bad}), net)
    assert net.training and all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
