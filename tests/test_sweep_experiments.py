"""Experiments over swept datasets, models and trainings (issue 21,
bnstudy.config.sweep_experiments):
an experiment that names a swept entry runs over every entry it generates, whose axes name the
experiments, filter them (``where``) and become columns of every table (``sweep_axes``); the
``extends:`` chains that delete or override such an entry; the documented recipes."""

import json
from pathlib import Path

import pytest
import yaml
from specs import sweep_config

from bnstudy.config import study, sweeps
from bnstudy.config.loader import ConfigError, read_study

ROOT = Path(__file__).resolve().parents[1]



LR_SWEEP = {"sgd": {"lr": 0.1, "steps": 5, "sweep": {"lr": [0.01, 0.1, 1.0]}}}


def _load(tmp_path, cfg, name="s.yaml"):
    f = tmp_path / name
    f.write_text(json.dumps(cfg))
    return study.load([f])


def test_a_learning_rate_sweep_declared_once_on_a_training(tmp_path):
    """An experiment naming the swept training runs over every rate, without a sweep of its own:
    names ``<experiment>_<generated training>``, the rate a column of every table (under
    ``training_lr``: the training table's own ``lr`` is the step's rate)."""
    exp = {"dataset": "g", "model": "m", "training": "sgd", "norms": ["batchnorm"], "seeds": [0]}
    flat = _load(tmp_path, sweep_config(trainings=LR_SWEEP, experiments={"lrs": exp}))
    assert list(flat["trainings"]) == ["sgd_lr0p01", "sgd_lr0p1", "sgd_lr1"]
    assert flat["experiments"] == {f"lrs_sgd_lr{w}": {**exp, "training": f"sgd_lr{w}"}
                                   for w in ("0p01", "0p1", "1")}
    assert flat["sweep_axes"] == {"lrs_sgd_lr0p01": {"training_lr": 0.01},
                                  "lrs_sgd_lr0p1": {"training_lr": 0.1},
                                  "lrs_sgd_lr1": {"training_lr": 1.0}}
    exp.update(name="lrs_{lr}", where={"lr": [0.1, 1.0]})
    flat = _load(tmp_path, sweep_config(trainings=LR_SWEEP, experiments={"lrs": exp}))
    assert list(flat["experiments"]) == ["lrs_0p1", "lrs_1"]
    assert [flat["experiments"][e]["training"] for e in flat["experiments"]] == ["sgd_lr0p1",
                                                                                  "sgd_lr1"]
    assert flat["sweep_axes"] == {"lrs_0p1": {"training_lr": 0.1}, "lrs_1": {"training_lr": 1.0}}
    exp["where"] = {"lr": 0.5}
    with pytest.raises(ConfigError, match=r"experiments\.lrs\.where.*keeps no combination"):
        _load(tmp_path, sweep_config(trainings=LR_SWEEP, experiments={"lrs": exp}))
    exp["where"] = {"rate": 0.1}
    with pytest.raises(ConfigError, match=r"experiments\.lrs\.where\.rate.*allowed: \['lr', "
                                          r"'training'\]"):
        _load(tmp_path, sweep_config(trainings=LR_SWEEP, experiments={"lrs": exp}))


def test_a_model_axis_is_an_experiment_axis_and_a_column(tmp_path):
    models = {"m": {"arch": "mlp", "depth": 2, "sweep": {"width": [8, 16]}},
              "wide": {"arch": "mlp", "width": 64}}
    flat = _load(tmp_path, sweep_config(models=models, experiments={"e": {
        "dataset": "g", "model": "m", "training": "t", "norms": ["none"], "seeds": [0],
        "where": {"width": 16}}}))
    assert flat["experiments"] == {"e_m_width16": {"dataset": "g", "model": "m_width16",
                                                   "training": "t", "norms": ["none"],
                                                   "seeds": [0]}}
    assert flat["sweep_axes"] == {"e_m_width16": {"width": 16}}
    # an axis named like a declared column (init: an integer column) is renamed model_<axis>,
    # and a plain entry is unchanged
    models["m"]["sweep"] = {"init": ["kaiming", "xavier"]}
    flat = _load(tmp_path, sweep_config(models=models, experiments={
        "e": {"dataset": "g", "model": "m", "training": "t", "norms": ["none"], "seeds": [0]},
        "w": {"dataset": "g", "model": "wide", "training": "t", "norms": ["none"], "seeds": [0]}}))
    assert list(flat["experiments"]) == ["e_m_initkaiming", "e_m_initxavier", "w"]
    assert flat["sweep_axes"] == {"e_m_initkaiming": {"model_init": "kaiming"},
                                  "e_m_initxavier": {"model_init": "xavier"}}


def test_an_experiment_over_a_swept_training_and_a_swept_dataset(tmp_path):
    """The product, dataset outermost, with both entries' axes in names, where and columns."""
    datasets = {"g": {"kind": "gaussian_linear", "options": {"dim": 4}, "name": "g{seed}",
                      "sweep": {"seed": [0, 1]}}}
    exp = {"dataset": "g", "model": "m", "training": "sgd", "norms": ["none"], "seeds": [0]}
    flat = _load(tmp_path, sweep_config(datasets=datasets, trainings=LR_SWEEP,
                                        experiments={"x": exp}))
    assert list(flat["experiments"]) == [f"x_g{d}_sgd_lr{w}" for d in (0, 1)
                                         for w in ("0p01", "0p1", "1")]
    assert flat["experiments"]["x_g1_sgd_lr0p1"] == {**exp, "dataset": "g1",
                                                     "training": "sgd_lr0p1"}
    assert flat["sweep_axes"]["x_g1_sgd_lr0p1"] == {"data_seed": 1, "training_lr": 0.1}
    exp.update(name="x_lr{lr}_d{seed}", where=[{"seed": 0, "lr": 0.01}, {"seed": 1, "lr": 1.0}])
    flat = _load(tmp_path, sweep_config(datasets=datasets, trainings=LR_SWEEP,
                                        experiments={"x": exp}))
    assert flat["sweep_axes"] == {"x_lr0p01_d0": {"data_seed": 0, "training_lr": 0.01},
                                  "x_lr1_d1": {"data_seed": 1, "training_lr": 1.0}}
    # the explicit form places the axis: training outermost, then the arms
    exp = {"dataset": "g0", "model": "m", "seeds": [0], "name": "{arm}_{lr}",
           "sweep": {"training": "sgd", "arm": {"bn": {"norms": ["batchnorm"]},
                                                "plain": {"norms": ["none"]}}}}
    flat = _load(tmp_path, sweep_config(datasets=datasets, trainings=LR_SWEEP,
                                        experiments={"y": exp}))
    assert list(flat["experiments"])[:3] == ["bn_0p01", "plain_0p01", "bn_0p1"]
    assert flat["sweep_axes"]["plain_0p01"] == {"data_seed": 0, "training_lr": 0.01,
                                                "arm": "plain"}


def test_a_typo_in_a_swept_name_names_the_valid_entries():
    cfg = sweep_config(trainings={**LR_SWEEP, "t": {"lr": 0.1, "steps": 5}})
    cfg["experiments"]["e"]["training"] = "sdg"
    with pytest.raises(ConfigError, match=r"experiments\.e\.training: 'sdg' is not defined; "
                                          r"allowed: one of \['sgd_lr0p01', 'sgd_lr0p1', "
                                          r"'sgd_lr1', 't'\], or a swept training .*\['sgd'\]"):
        sweeps.expand(cfg)
    cfg["experiments"]["e"]["sweep"] = {"training": "sdg"}
    with pytest.raises(ConfigError, match=r"experiments\.e\.sweep\.training: 'sdg' is not a "
                                          r"swept training; allowed: .*\['sgd'\]"):
        sweeps.expand(cfg)
    cfg["experiments"]["e"]["sweep"] = {"model": "m"}
    with pytest.raises(ConfigError, match=r"'m' is not a swept model; allowed: .* \[\]"):
        sweeps.expand(cfg)


def test_axes_over_swept_entries_must_be_distinct_columns_of_scalars(tmp_path):
    trainings = {"sgd": {"lr": 0.1, "steps": 5, "sweep": {"arm": {"a": {"lr": 0.1}}}}}
    cfg = sweep_config(trainings=trainings, experiments={"e": {
        "dataset": "g", "model": "m", "training": "sgd", "seeds": [0],
        "sweep": {"arm": {"x": {"norms": ["none"]}}}}})
    with pytest.raises(ConfigError, match=r"experiments\.e\.training: the axes \['arm'\] of "
                                          r"training 'sgd_arma'"):
        sweeps.expand(cfg)
    trainings = {"sgd": {"lr": 0.1, "steps": 5, "sweep": {"checkpoints": [[0], [0, 2]]}}}
    with pytest.raises(ConfigError, match=r"trainings\.sgd_checkpoints0\.sweep.*value \[0\] "
                                          r"\(list\) cannot be a table column"):
        _load(tmp_path, sweep_config(trainings={**trainings, "t": {"lr": 0.1, "steps": 5}},
                             experiments={"e": {**sweep_config()["experiments"]["e"],
                                                "training": "sgd"}}))
    # unused, such a sweep is no column
    assert "sweep_axes" not in _load(tmp_path, sweep_config(trainings={**trainings,
                                                                "t": {"lr": 0.1, "steps": 5}}))


def test_the_size_limit_counts_experiments_over_swept_entries():
    cfg = sweep_config(trainings={"sgd": {"lr": 0.1, "steps": 5, "sweep": {"lr": [0.1, 0.2, 0.3]}}},
               models={"m": {"arch": "mlp", "sweep": {"width": [4, 8]}}},
               limits={"experiments": 5})
    cfg["experiments"]["e"].update(training="sgd")
    with pytest.raises(ConfigError, match=r"expand to 6 entries \(experiments\.e: 6\)"):
        sweeps.expand(cfg)


def _study_files(tmp_path, child: str):
    from harness import tiny_config, write_config

    parent = tiny_config()
    parent["trainings"]["sgd"]["sweep"] = {"lr": [0.05, 0.1]}
    write_config(tmp_path / "parent.yaml", parent)
    (tmp_path / "child.yaml").write_text("extends: parent.yaml\n" + child)
    return tmp_path / "child.yaml"


def test_a_swept_training_passes_the_whole_check(tmp_path):
    cfg = study.check(study.load([_study_files(tmp_path, "")]))
    assert [e for e in cfg["experiments"] if e.startswith("star")] == ["star_sgd_lr0p05",
                                                                       "star_sgd_lr0p1"]
    assert cfg["sweep_axes"] == {"star_sgd_lr0p05": {"training_lr": 0.05},
                                 "star_sgd_lr0p1": {"training_lr": 0.1}}


@pytest.mark.parametrize("child,experiments", [
    ("trainings: {sgd: {sweep: {lr: [0.2]}}}\n", ["star_sgd_lr0p2"]),  # the axis replaced
    ("trainings: {sgd: {sweep: null}}\n", ["star"]),  # the sweep dropped: a plain training
    ("trainings: {sgd: {steps: 10}}\n", ["star_sgd_lr0p05", "star_sgd_lr0p1"]),
])
def test_extends_over_a_swept_training_expands_what_the_files_say(tmp_path, child, experiments):
    flat = study.load([_study_files(tmp_path, child)])
    assert [e for e in flat["experiments"] if e.startswith("star")] == experiments
    assert all(flat["trainings"][flat["experiments"][e]["training"]]["steps"] ==
               (10 if "steps" in child else 20) for e in experiments)


def test_extends_that_deletes_or_overrides_a_swept_training_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"experiments\.star\.training: 'sgd' is not defined"):
        study.check(study.load([_study_files(tmp_path, "trainings: {sgd: null}\n")]))
    with pytest.raises(ConfigError, match=r"child\.yaml: trainings\.sgd\.lr: 0\.5 would be "
                                          r"ignored: the sweep axis 'lr' of trainings\.sgd "
                                          r"\(\[0\.05, 0\.1\]\)"):
        study.load([_study_files(tmp_path, "trainings: {sgd: {lr: 0.5}}\n")])
    with pytest.raises(ConfigError, match=r"child\.yaml: datasets\.g\.options\.seed: 3 would be "
                                          r"ignored: the sweep axis 'seed'"):
        (tmp_path / "p.yaml").write_text(json.dumps(sweep_config(datasets={"g": {
            "kind": "gaussian_linear", "options": {"dim": 4}, "sweep": {"seed": [0, 1]}}})))
        (tmp_path / "child.yaml").write_text("extends: p.yaml\n"
                                             "datasets: {g: {options: {seed: 3}}}\n")
        read_study(tmp_path / "child.yaml")


# -- the documented recipes ----------------------------------------------------------------------

def _yaml_block(doc: str, section: str) -> str:
    text = (ROOT / doc).read_text()
    text = text[text.index(section):]
    start = text.index("```yaml\n") + len("```yaml\n")
    return text[start:text.index("```", start)]


def test_the_extending_recipe_sweeps_the_star_learning_rate(tmp_path):
    """EXTENDING.md, "A sweep": its study file at the root of a copy of the project."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(
        (ROOT / "config" / "config.yaml").read_text())
    f = tmp_path / "star_lr.yaml"
    f.write_text(_yaml_block("EXTENDING.md", "## A sweep"))
    flat = study.load([f])
    default = study.load([ROOT / "config" / "config.yaml"])
    assert flat["sweep_axes"] == {"star_lr0p01": {"training_lr": 0.01},
                                  "star_lr0p05": {"training_lr": 0.05},
                                  "star_lr0p2": {"training_lr": 0.2},
                                  **default.get("sweep_axes", {})}  # the default's (none)
    assert list(flat["experiments"]) == ["star_lr0p01", "star_lr0p05", "star_lr0p2",
                                         *list(default["experiments"])[1:]]
    assert flat["experiments"]["star_lr0p05"] == {**default["experiments"]["star"],
                                                  "training": "star_sgd_lr0p05"}


def test_the_config_readme_sweep_example_expands_as_commented():
    cfg = yaml.safe_load(_yaml_block("config/README.md", "## Sweeps and extends"))
    cfg["models"] = {"student": {"arch": "unit"}}
    cfg["trainings"].update({t: {"lr": 0.1, "steps": 5}
                             for t in ("gd", "sgd_m32", "sgd_m16", "sgd_m128")})
    record: dict = {}
    flat = sweeps.expand(cfg, record)
    axes = sweeps.experiment_axes(flat, record)
    names = list(flat["experiments"])
    assert names[18:27] == ["bs16_d0", "bs16_d1", "bs16_d2", "bs128_d0", "bs128_d1", "bs128_d2",
                            "lrs_sgd_lr0p01", "lrs_sgd_lr0p1", "lrs_sgd_lr1"]
    assert axes["lrs_sgd_lr0p01"] == {"alpha": 2.0, "data_seed": 0, "training_lr": 0.01}
    assert names[27:] == [f"a{a}_d{d}_lr{w}" for a in ("0p5", "1", "2") for d in (0, 1, 2)
                          for w in ("0p1", "1")]
    assert flat["experiments"]["a0p5_d0_lr0p1"]["training"] == "sgd_lr0p1"
