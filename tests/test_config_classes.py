"""Issue 19's classes of bad configs, each closed as a class and rejected before any work.

Every case goes through the loader and the check as the Snakefile calls them (a config file
read with ``study.load``, then ``study.check``), in-process: a ConfigError of one short
paragraph naming the entry, the bad value and what is allowed, and nothing written. The
classes: options the chosen architecture or schedule does not read; schedules that cannot do
what they say; normalizer arms without a normalizer layer; names ending in a newline (and every
name pattern matched whole); reserved keys and axes shadowing table columns; sweeps of the wrong
shape; extends chains, sweeps and models past their stated caps (counted, never built); what a
job would find out only when it runs (data files, data_dir, augment, palette, seeds, lr
overflow, an uncreatable results directory); list-valued axes (rejected).
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
import yaml
from harness import tiny_config, write_config

from bnstudy.config import loader, study, sweeps
from bnstudy.networks import archs, models

BASE = tiny_config()


def _load_check(cfg: dict, tmp_path: Path, local: bool = False) -> dict:
    cfg.setdefault("results", str(tmp_path / "results"))
    cfg.setdefault("results_anywhere", True)  # a tmp folder, outside the working directory
    f = write_config(tmp_path / "study.yaml", cfg)
    return study.check(study.load([f]), local=local)


def rejected(cfg: dict, tmp_path: Path, words, local: bool = False) -> str:
    """The one-paragraph message ``cfg`` is rejected with, holding every one of ``words``."""
    with pytest.raises(loader.ConfigError) as err:
        _load_check(cfg, tmp_path, local)
    msg = str(err.value)
    assert "\n" not in msg.rstrip("\n") or msg.count("\n") <= 1, msg
    # the length without the test's temporary directory (longer under pytest-xdist's workers)
    assert len(msg.replace(str(tmp_path), "TMP")) < 500, msg
    for w in words:
        assert w in msg, (w, msg)
    assert not (tmp_path / "results").exists()
    return msg


def base(**sections) -> dict:
    cfg = copy.deepcopy(BASE)
    del cfg["results"]  # set to a temporary directory by _load_check unless a case sets it
    for k, v in sections.items():
        cfg[k] = v
    return cfg


def with_entry(section: str, name: str, entry: dict, **exp) -> dict:
    cfg = base()
    cfg[section][name] = entry
    if exp:
        e = {"dataset": "star2d", "model": "mlp", "training": "sgd", "norms": ["none"],
             "seeds": [0]}
        e.update(exp)
        cfg["experiments"]["x"] = e
    return cfg


DIGITS = {"kind": "digits", "options": {"image": True}}


# -- options the chosen thing does not read -----------------------------------------------------

@pytest.mark.parametrize("model, key", [
    ({"arch": "cnn", "width": 2}, "width"),
    ({"arch": "resnet18", "depth": 34}, "depth"),
    ({"arch": "resnet18", "width_mult": 0.0625}, "width_mult"),
    ({"arch": "dln", "width": 8}, "width"),
    ({"arch": "mlp", "channels": [8, "M"]}, "channels"),
    ({"arch": "unit", "depth": 3}, "depth"),
])
def test_an_option_the_architecture_does_not_read_is_refused(model, key, tmp_path):
    cfg = with_entry("models", "m", model)
    rejected(cfg, tmp_path, ["models.m", key, f"arch {model['arch']}", "allowed",
                             str(archs.options(model["arch"]))])


def test_every_model_option_is_read_by_some_architecture():
    from dataclasses import fields

    declared = set(archs.COMMON_OPTIONS).union(*archs.ARCH_OPTIONS.values(), archs.FROM_OPTIONS)
    assert declared == {f.metadata.get("key", f.name) for f in fields(models.ModelConfig)}
    assert set(archs.FROM_OPTIONS) - {"from", "options"} <= set(archs.COMMON_OPTIONS)
    assert set(archs.ARCH_OPTIONS) == set(archs.ARCHS)


@pytest.mark.parametrize("training, words", [
    ({"lr_decay": 0.01}, ["lr_decay=0.01", "unless lr_schedule is inverse_time or exponential"]),
    ({"lr_step_factor": 0.5}, ["lr_step_factor=0.5", "unless lr_schedule is step"]),
    ({"lr_milestone_unit": "epoch"}, ["lr_milestone_unit='epoch'", "step"]),
    ({"lr_schedule": "inverse_time", "lr_decay": 0.1, "lr_milestones": [3]},
     ["lr_milestones=[3]", "step"]),
    ({"augment_padding": 2}, ["augment_padding=2", "unless augment is true"]),
    # schedules that cannot do what they say
    ({"lr_schedule": "step", "lr_milestones": [5, 5, 5]}, ["lr_milestones", "distinct"]),
    ({"lr_schedule": "step", "lr_milestones": [5, 20]}, ["lr_milestones", "last step 19"]),
    ({"warmup_steps": 21}, ["warmup_steps=21", "at most the run's 20 steps"]),
    ({"lr_schedule": "step", "lr_milestones": [1, 2, 3], "lr_step_factor": 1e200},
     ["lr_step_factor=1e+200", "finite"]),
])
def test_schedules_and_training_options_that_would_be_ignored_or_misread(training, words,
                                                                         tmp_path):
    cfg = base()
    cfg["trainings"]["sgd"].update(training)
    rejected(cfg, tmp_path, ["trainings.sgd", *words])


def test_an_epoch_milestone_beyond_the_run_is_refused(tmp_path):
    cfg = base()  # star2d: 64 examples, batch 16: 4 steps per epoch, 20 steps
    cfg["trainings"]["sgd"].update(lr_schedule="step", lr_milestones=[2, 5],
                                   lr_milestone_unit="epoch")
    rejected(cfg, tmp_path, ["experiments.star", "[2, 5]", "epoch 5 starts at step 20",
                             "at most epoch 4"])
    cfg["trainings"]["sgd"]["lr_milestones"] = [2, 4]
    _load_check(cfg, tmp_path)


# -- a normalizer arm without a normalizer layer -----------------------------------------------

@pytest.mark.parametrize("model, dataset", [
    ({"arch": "vgg", "channels": ["M", "M"]}, "d"),
    ({"arch": "dln", "depth": 1}, "gaussian_linear"),
])
def test_a_normalizer_arm_needs_a_layer_of_its_normalizer(model, dataset, tmp_path):
    cfg = with_entry("models", "m", model, model="m", dataset=dataset, norms=["batchnorm"])
    cfg["datasets"]["d"] = DIGITS
    rejected(cfg, tmp_path, ["experiments.x", "'m'", "no layer for the normalizer 'batchnorm'",
                             "norms: [none]"])
    cfg["experiments"]["x"]["norms"] = ["none"]  # the plain net alone is fine
    _load_check(cfg, tmp_path)


# -- names ending in a newline: every pattern matched whole --------------------------------------

def _schema_patterns(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                out.append(v)
            else:
                _schema_patterns(v, out)
    elif isinstance(node, list):
        for v in node:
            _schema_patterns(v, out)
    return out


SAMPLES = ["abc", "a_1", "cpu", "cuda:0", "results/x", "x"]


def test_every_name_pattern_refuses_a_trailing_newline():
    patterns = _schema_patterns(yaml.safe_load(loader.SCHEMA.read_text()), [])
    assert len(patterns) >= 10
    for p in patterns:  # jsonschema uses re.search
        ok = [s for s in SAMPLES if re.search(p, s)]
        assert ok, p
        for s in ok:
            assert not re.search(p, s + "\n"), (p, s)
    from bnstudy.config import sweep_checks

    for rx in (loader.NAME, sweep_checks.AXIS, sweeps.SAFE_NAME):
        assert rx.fullmatch("a1") and not rx.fullmatch("a1\n")


@pytest.mark.parametrize("patch, words", [
    (lambda c: c["experiments"].update({"ex\n": c["experiments"]["star"]}), ["experiments"]),
    (lambda c: c["datasets"].update({"d\n": DIGITS}), ["datasets"]),
    (lambda c: c["experiments"]["star"].update(name="s{v}\n", sweep={"v": {"a": {}}}),
     ["experiments.star", "generated name 'sa\\n'"]),
    (lambda c: c["experiments"]["star"].update(norms=["batchnorm\n"]), ["experiments.star.norms"]),
])
def test_names_ending_in_a_newline_are_refused(patch, words, tmp_path):
    cfg = base()
    patch(cfg)
    rejected(cfg, tmp_path, words)


# -- reserved keys, axes shadowing table columns, list-valued axes -----------------------------

def test_a_hand_written_sweep_axes_is_refused(tmp_path):
    cfg = base(sweep_axes={"star": {"loss": 1.0}})
    rejected(cfg, tmp_path, ["sweep_axes", "written by the loader", "sweep:"])


@pytest.mark.parametrize("section, name, sweep, axis", [
    ("experiments", "star", {"lr": {"small": {"training": "sgd"}, "big": {"training": "gd"}}},
     "lr"),
    ("experiments", "star", {"loss": {"a": {}}}, "loss"),
    ("datasets", "star2d", {"data_seed": {"a": {"seed": 1}}}, "data_seed"),
    ("datasets", "ts_tiny", {"N": [10, 20]}, "N"),
])
def test_an_axis_may_not_shadow_a_table_column(section, name, sweep, axis, tmp_path):
    cfg = base()
    cfg[section][name]["sweep"] = sweep
    rejected(cfg, tmp_path, [f"{section}.{name}.sweep.{axis}", f"shadow the table column "
                                                              f"{axis!r}", "allowed"])


def test_list_valued_and_mixed_axes_are_refused_before_work(tmp_path):
    cfg = base()
    cfg["experiments"]["star"]["sweep"] = {"seeds": [[0], [1]]}
    rejected(cfg, tmp_path, ["experiments.star.sweep.seeds", "[0]", "cannot be a table column",
                             "named variants"])
    cfg["experiments"]["star"]["sweep"] = {"v": {1: {}, "a": {}}}
    rejected(cfg, tmp_path, ["experiments.star.sweep.v", "mix", "one kind"])
    cfg = base()  # one axis name on two entries with values of two kinds
    cfg["experiments"]["star"]["sweep"] = {"v": {1: {}}}
    cfg["experiments"]["dln"]["sweep"] = {"v": {"a": {}}}
    rejected(cfg, tmp_path, ["sweep axis 'v'", "one kind"])


# -- sweeps of the wrong shape: clear errors, no TypeError ---------------------------------------

@pytest.mark.parametrize("patch, words", [
    (lambda c: c["datasets"]["star2d"].update(options=None, sweep={"n_train": [10, 20]}),
     ["datasets.star2d.options", "None", "mapping"]),
    (lambda c: c["datasets"]["star2d"].update(options=[1], sweep={"n_train": [10, 20]}),
     ["datasets.star2d.options", "[1]", "mapping"]),
    (lambda c: c["experiments"]["star"].update(sweep={5: {"a": {"seeds": [0]}}}),
     ["experiments.star.sweep", "axis name 5 (int)", "letters"]),
    (lambda c: c["experiments"]["star"].update(sweep={"v": {1.5: {"seeds": [0]}}}),
     ["experiments.star.sweep.v", "variant name 1.5 (float)", "integer"]),
    (lambda c: c["experiments"].update({5: c["experiments"]["star"]}),
     ["experiments.5", "(int)", "quote a number"]),
    (lambda c: c["experiments"].update(star=None), ["experiments.star", "None", "mapping"]),
])
def test_sweeps_of_the_wrong_shape_are_named(patch, words, tmp_path):
    cfg = base()
    patch(cfg)
    rejected(cfg, tmp_path, words)


# -- caps, stated and checked without building ----------------------------------------------------

def test_a_deep_extends_chain_is_refused_at_the_stated_depth(tmp_path):
    write_config(tmp_path / "f0.yaml", {**base(), "results": str(tmp_path / "results"),
                                          "results_anywhere": True})
    for i in range(1, 1100):
        (tmp_path / f"f{i}.yaml").write_text(f"extends: f{i - 1}.yaml\n")
    with pytest.raises(loader.ConfigError) as err:
        study.load([tmp_path / "f1099.yaml"])
    msg = str(err.value)
    assert f"more than {loader.MAX_EXTENDS} files deep" in msg and "f1099.yaml" in msg
    study.load([tmp_path / f"f{loader.MAX_EXTENDS - 1}.yaml"])  # within the cap


def test_a_model_too_large_is_refused_without_allocating(tmp_path):
    cfg = with_entry("models", "big", {"arch": "mlp", "depth": 10, "width": 200_000},
                     model="big")
    t0 = time.perf_counter()
    rejected(cfg, tmp_path, ["experiments.x", "'big'", "360,002,800,002 parameters",
                             "limits.parameters = 500,000,000"])
    assert time.perf_counter() - t0 < 10
    del cfg["experiments"]["x"]
    cfg["limits"] = {"parameters": 100}  # configurable: the tiny mlp is over a cap of 100
    rejected(cfg, tmp_path, ["experiments.star", "limits.parameters = 100"])


def test_a_huge_sweep_is_counted_and_refused_in_seconds(tmp_path):
    cfg = base()
    cfg["datasets"]["star2d"]["sweep"] = {"n_train": list(range(1, 101)),
                                          "n_test": list(range(1, 101)),
                                          "noise": [i / 100 for i in range(100)]}
    t0 = time.perf_counter()
    rejected(cfg, tmp_path, ["datasets", "1,000,002 entries", "datasets.star2d: 1,000,000",
                             "limits.experiments = 10,000"])
    assert time.perf_counter() - t0 < 5
    cfg = base(limits={"experiments": 3})  # configurable
    cfg["experiments"]["star"]["sweep"] = {"seeds": {"a": {}, "b": {}, "c": {}}}
    rejected(cfg, tmp_path, ["experiments", "5 entries", "limits.experiments = 3"])
    cfg["limits"]["experiments"] = 5
    _load_check(cfg, tmp_path)


# -- what a job would find out only when it runs ---------------------------------------------

@pytest.mark.parametrize("kind, files", [
    ("cifar100", ["cifar100/cifar-100-binary/train.bin", "test.bin"]),
    ("svhn", ["svhn/train_32x32.mat", "svhn/test_32x32.mat"]),
    ("mnist", ["mnist/train-images-idx3-ubyte[.gz]", "and 1 more"]),
    ("cifar10", ["cifar10/cifar-10-batches-bin/data_batch_1.bin", "and 3 more"]),
])
def test_missing_dataset_files_are_named_before_work(kind, files, tmp_path):
    opts = {"data_dir": str(tmp_path / "data"), "download": False}
    cfg = with_entry("datasets", "real", {"kind": kind, "options": opts})
    rejected(cfg, tmp_path, ["datasets.real", "download: false", *files], local=True)
    _load_check(cfg, tmp_path, local=False)  # a cluster's nodes may hold the files
    opts["download"] = True
    _load_check(cfg, tmp_path, local=True)


def test_data_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("")
    cfg = with_entry("datasets", "real", {"kind": "svhn", "options": {
        "data_dir": str(tmp_path / "afile"), "download": True}})
    rejected(cfg, tmp_path, ["datasets.real.options.data_dir", "afile", "is a file"])


@pytest.mark.parametrize("patch, words", [
    (lambda c: c["trainings"]["sgd"].update(augment=True),
     ["experiments.star", "augment: true needs image inputs", "(2,)"]),
    (lambda c: c.update(plots={"palette": "no_such_palette"}),
     ["plots.palette", "'no_such_palette'", "colorblind"]),
    (lambda c: c["datasets"]["star2d"]["options"].update(seed=2**32),
     ["datasets.star2d.options.seed", "4294967296", "0..4294967295"]),
    (lambda c: c["experiments"]["star"].update(seeds=[2**63]),
     ["experiments.star.seeds", "9223372036854775808", "9223372036854775807"]),
    (lambda c: c.update(results="/proc/bnstudy/results"), ["results", "cannot be created"]),
])
def test_what_a_job_would_find_out_is_checked_before(patch, words, tmp_path):
    cfg = base()
    patch(cfg)
    rejected(cfg, tmp_path, words)


@pytest.mark.parametrize("patch, words", [
    (lambda c: c["models"].update(mlp={"arch": "cnn", "width": 2}),
     ["models.mlp", "arch cnn has no option 'width'"]),
    (lambda c: c["datasets"]["star2d"].update(options=None, sweep={"n_train": [16, 32]}),
     ["datasets.star2d.options", "None", "mapping"]),
])
def test_the_cli_check_verb_says_it_in_one_paragraph(patch, words, tmp_path):
    import subprocess
    import sys

    cfg = base()
    patch(cfg)
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    f = write_config(tmp_path / "bad.yaml", cfg)
    out = subprocess.run([sys.executable, "-m", "bnstudy", "check", "--cluster", str(f)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    for w in words:
        assert w in out.stderr, (w, out.stderr)


@pytest.mark.parametrize("patch, words", [
    (lambda c: c["experiments"]["star"].update(sweep={"v": {"a": {}}}, name="{v.x}"),
     ["experiments.star.name", "'{v.x}'", "not a valid template"]),
    (lambda c: c.update(experiments="x"), ["experiments", "'x'", "mapping"]),
])
def test_more_shapes_that_raised_a_traceback(patch, words, tmp_path):
    cfg = base()
    patch(cfg)
    rejected(cfg, tmp_path, words)
