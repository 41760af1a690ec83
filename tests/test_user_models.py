"""Your own model without forking: a function in a file outside ``src/`` named by a ``models:``
entry (``from`` and ``options``, :mod:`bnstudy.networks.user_models`) builds with the run's
normalizer injected and trains; a bad import path, a function that returns no Net or a Net of the
wrong output size fails in the config check, in one line naming the entry, before any job. (The
tiny study's workflow runs one: tests/test_user_code.py, the ``mine`` experiment.)"""

from __future__ import annotations

import copy
import sys
import textwrap

import harness
import numpy as np
import pytest
import torch
from specs import make_spec

from bnstudy import data
from bnstudy.config import study
from bnstudy.config.loader import ConfigError
from bnstudy.networks import models
from bnstudy.networks.blocks import blocks
from bnstudy.planning import plan
from bnstudy.train import loop as training

EXAMPLE = harness.REPO / "examples" / "my_models.py"
FUNNEL = {"from": f"{EXAMPLE}:funnel_mlp", "options": {"widths": [8, 6]}}


def _config(model: dict) -> dict:
    cfg = harness.only_experiments(harness.tiny_config(), "star")
    cfg["models"]["mine"] = model
    cfg["experiments"]["star"]["model"] = "mine"
    return cfg


def test_a_users_model_gets_the_normalizer_injected_and_trains():
    star = data.make("star2d", {"n_train": 48, "n_test": 32, "n_arms": 4, "seed": 0})
    bn = models.build_model(FUNNEL, "batchnorm", star.input_shape, star.out_dim)
    plain = models.build_model(FUNNEL, "none", star.input_shape, star.out_dim)
    assert [b.linear.out_features for b in blocks(bn)] == [8, 6]
    assert all(isinstance(b.norm, torch.nn.BatchNorm1d) for b in blocks(bn))
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in plain.modules())
    assert bn.head.out_features == star.out_dim and blocks(bn)[0].linear.bias is None  # BN's
    spec = make_spec(model=FUNNEL, training={"lr": 0.1, "momentum": 0.9, "batch_size": 16,
                                             "steps": 30, "eval_every": 10,
                                             "checkpoints": [0, 30]})
    runs = [training.train(spec, star, device="cpu") for _ in range(2)]
    train_loss = [r["loss"] for r in runs[0]["history"] if r["split"] == "train"]
    assert np.isfinite(train_loss).all() and train_loss[-1] < train_loss[0], train_loss
    assert runs[0]["spec"].model_config.from_ == FUNNEL["from"]
    assert [h["loss"] for h in runs[0]["history"]] == [h["loss"] for h in runs[1]["history"]]


def test_an_installed_entry_point_names_a_model(monkeypatch):
    """A package's entry point (group bnstudy.models) named by its bare name; stands in for an
    installed package with importlib.metadata's own EntryPoint pointing at the example."""
    from importlib import metadata

    from bnstudy import user_code

    ep = metadata.EntryPoint("funnel", "bnstudy_example_models:funnel_mlp", "bnstudy.models")
    monkeypatch.setattr(user_code.metadata, "entry_points",
                        lambda group: [ep] if group == "bnstudy.models" else [])
    monkeypatch.setitem(sys.modules, "bnstudy_example_models",
                        user_code._module(str(EXAMPLE), "x"))  # noqa: SLF001
    net = models.build_model({"from": "funnel", "options": {"widths": [5]}}, "layernorm", (3,), 2)
    assert [type(b.norm).__name__ for b in blocks(net)] == ["LayerNorm"]
    with pytest.raises(ValueError, match=r"group bnstudy.models \(installed: funnel\)"):
        models.build_model({"from": "other"}, "none", (3,), 2)


def test_its_file_is_in_its_runs_code_version(tmp_path):
    mine = tmp_path / "my_models.py"
    mine.write_text(EXAMPLE.read_text())
    cfg = study.check(_config({**FUNNEL, "from": f"{mine}:funnel_mlp"}), local=False)
    before = plan.Plan(copy.deepcopy(cfg)).train_code("batchnorm", "mine")
    assert plan.Plan(copy.deepcopy(cfg)).train_code("batchnorm") != before
    mine.write_text(EXAMPLE.read_text() + "\n# edited\n")
    assert plan.Plan(copy.deepcopy(cfg)).train_code("batchnorm", "mine") != before


def _refused(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        study.check(cfg, local=False)
    (line,) = str(err.value).splitlines()
    return line


def test_a_model_that_breaks_the_contract_is_named_before_any_job(tmp_path):
    bad = tmp_path / "bad_models.py"
    bad.write_text(textwrap.dedent("""
        from torch import nn
        from bnstudy.networks.blocks import Block, Net
        def sequential(norm, input_shape, out_dim):
            return nn.Sequential(nn.Linear(input_shape[0], out_dim))
        def five_outputs(norm, input_shape, out_dim):
            block = Block(nn.Linear(input_shape[0], 4), norm.layer(4, "fc"), nn.ReLU())
            return Net(nn.Sequential(block), nn.Linear(4, 5), input_shape, conv=False)
        def needs_images(norm, input_shape, out_dim):
            raise ValueError(f"needs (C, H, W) inputs, got {input_shape}")
        not_a_function = 3
    """))
    for target, said in (
            ("sequential", "returned a Sequential, not a bnstudy.networks.blocks.Net"),
            ("five_outputs", "gives outputs (2, 5) on 2 inputs of shape (2,); allowed: (2, 2)"),
            ("needs_images", "raised ValueError: needs (C, H, W) inputs, got (2,)"),
            ("not_a_function", "is a int, not a function build(norm, input_shape, out_dim")):
        line = _refused(_config({"from": f"{bad}:{target}"}))
        assert "model 'mine'" in line or line.startswith("models.mine:"), line
        assert f"{bad}:{target}" in line and said in line, line
    line = _refused(_config({**FUNNEL, "depth": 3}))
    assert line.startswith("models.mine: depth=3: a user's model (from) has no option"), line
    line = _refused(_config({**FUNNEL, "arch": "mlp"}))
    assert line.startswith("models.mine: from=") and "arch mlp has no option 'from'" in line, line
    line = _refused(_config({"depth": 3}))
    assert line.startswith("models.mine: 'arch' is a required property"), line


@pytest.mark.parametrize("target, said", [
    ("no_such_module_xyz:build", "no module 'no_such_module_xyz'"),
    ("my_models.py:no_such_function", "has no attribute 'no_such_function'"),
])
def test_a_bad_import_path_fails_in_the_check_in_one_line(tmp_path, target, said):
    (tmp_path / "my_models.py").write_text(EXAMPLE.read_text())
    line = harness.check_error_line(tmp_path, _config({"from": target}))
    assert line.startswith("bnstudy check: error: models.mine: cannot load"), line
    assert said in line and not (tmp_path / "results").exists()


def test_a_users_model_is_named_in_the_ledgers_deviations():
    from bnstudy.claims.say import deviations

    text = deviations._model_text({"from": "examples/my_models.py:funnel_mlp", "options": {}})
    assert "examples/my_models.py:funnel_mlp" in text and "?" not in text
