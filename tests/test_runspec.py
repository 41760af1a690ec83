"""The typed run spec: parsed once where a spec enters the package (``--spec``, a run file read
back), attributes from then on; its JSON form unchanged for files and hashes."""

from __future__ import annotations

import io as io_module
import json

import pytest
import torch
from specs import make_spec

from bnstudy import data, io
from bnstudy.cli import main as cli
from bnstudy.measures.teacher_student import compute as ts
from bnstudy.networks.models import ModelConfig
from bnstudy.train import checkpoints
from bnstudy.train import loop as training
from bnstudy.train.config import TrainConfig
from bnstudy.train.spec import RunSpec


def test_parse_types_every_entry_and_keeps_the_json_form():
    raw = make_spec(model={"arch": "mlp", "depth": 2, "width": 8, "norm_options": {
        "ghost_batchnorm": {"ghost_batch_size": 4}}},
        training={"lr": 0.1, "batch_size": "full", "steps": 5})
    spec = RunSpec.parse(raw)
    assert isinstance(spec.model_config, ModelConfig) and isinstance(spec.training, TrainConfig)
    assert spec.model_config.depth == 2 and spec.training.batch_size is None  # "full"
    assert spec.ids == {"experiment": "t", "dataset": "star2d", "model": "m",
                        "norm": "batchnorm", "seed": 0}
    assert spec.to_dict() == raw and spec.to_dict() is not spec.raw
    assert io.stable_hash(spec.to_dict()) == io.stable_hash(raw)  # provenance as before
    assert RunSpec.parse(spec) is spec
    assert spec.replace(seed=3).seed == 3 and spec.replace(seed=3).to_dict()["seed"] == 3
    assert spec.model_config.normalizer("ghost_batchnorm").options["ghost_batch_size"] == 4


@pytest.mark.parametrize("change, match", [
    ({"norm": "batchnrom"}, r"batchnrom.*batchnorm"),
    ({"seed": "0"}, r"seed='0': allowed: an integer >= 0"),
    ({"seed": True}, r"seed=True"),
    ({"seed": -1}, r"seed=-1"),
    ({"experiment": ""}, r"experiment='': allowed: a non-empty name"),
    ({"training": {"lr": -1, "steps": 3}}, r"--spec: training lr=-1"),
    ({"training": {"lr": 0.1, "steps": 3, "bogus": 1}}, r"--spec: unknown training option.*bogus"),
    ({"model_config": {"arch": "mlpp"}}, r"--spec: unknown model arch 'mlpp'.*resnet18"),
    ({"model_config": [1]}, r"model_config=\[1\]: allowed: a mapping"),
    ({"extra": 1}, r"unknown keys \['extra'\]"),
])
def test_bad_specs_are_named(change, match):
    with pytest.raises(ValueError, match=match):
        RunSpec.parse({**make_spec(), **change}, source="--spec")


def test_missing_keys_are_named():
    raw = make_spec()
    del raw["training"]
    with pytest.raises(ValueError, match=r"missing keys \['training'\]"):
        RunSpec.parse(raw)
    with pytest.raises(ValueError, match="expected a mapping"):
        RunSpec.parse([raw])


def test_batch_for_is_the_batch_training_uses():
    assert TrainConfig.from_dict({"lr": 0.1}).batch_for(1000) == 64  # the default batch
    assert TrainConfig.from_dict({"lr": 0.1, "batch_size": 500}).batch_for(100) == 100
    assert TrainConfig.from_dict({"lr": 0.1, "batch_size": "full"}).batch_for(100) == 100


def test_teacher_student_zeta_uses_the_training_batch_when_the_spec_omits_it():
    """A spec without ``batch_size`` trains with TrainConfig's 64; the measure's BN zeta used to
    read the missing key as full batch (M = P)."""
    spec = RunSpec.parse(make_spec(training={"lr": 0.1, "steps": 3}))
    kind, zeta = ts.zeta_of(spec, None, "linear", False, 200)
    assert kind == "bn" and zeta == pytest.approx(1.5 / 64)


def test_train_and_run_files_carry_the_typed_spec(tmp_path):
    star = data.make("star2d", {"n_train": 64, "n_test": 32})
    raw = make_spec(training={"lr": 0.05, "batch_size": 16, "steps": 4, "eval_every": 2,
                              "checkpoints": [0, 2]})
    run = training.train(raw, star, "cpu")
    assert isinstance(run["spec"], RunSpec) and run["spec"].to_dict() == raw
    checkpoints.save(run, tmp_path / "c.pt")
    wrapper = torch.load(tmp_path / "c.pt", weights_only=True)
    stored = torch.load(io_module.BytesIO(wrapper["payload"]), weights_only=True)
    assert stored["spec"] == raw  # the file holds the plain JSON form
    back = checkpoints.load(tmp_path / "c.pt")
    assert back["spec"] == run["spec"] and back["spec"].to_dict() == raw


def test_a_run_file_whose_spec_does_not_parse_is_named(tmp_path):
    star = data.make("star2d", {"n_train": 64, "n_test": 32})
    run = training.train(make_spec(training={"lr": 0.05, "batch_size": 16, "steps": 2,
                                             "eval_every": 2}), star, "cpu")
    blob = {k: run[k] for k in ("checkpoints", "diverged", "device")}
    blob["spec"] = {**run["spec"].to_dict(), "norm": "no_such_norm"}
    io.save_pt(blob, tmp_path / "foreign.pt", checkpoints.KIND)
    with pytest.raises(io.CorruptFile, match=r"foreign\.pt: run spec.*no_such_norm"):
        checkpoints.load(tmp_path / "foreign.pt")


def test_train_verb_parses_the_spec_once_and_names_a_bad_one(tmp_path, capsys):
    star = data.make("star2d", {"n_train": 64, "n_test": 32})
    data.save(star, tmp_path / "star.npz")
    bad = {**make_spec(), "norm": "batchnrom"}
    rc = cli.main(["train", "--spec", json.dumps(bad), "--data", str(tmp_path / "star.npz"),
                   "--device", "cpu", "--out-checkpoints", str(tmp_path / "c.pt"),
                   "--out-history", str(tmp_path / "h.parquet")])
    assert rc != 0 and "batchnrom" in capsys.readouterr().err
    assert not (tmp_path / "c.pt").exists()
