"""Every bad config is rejected by bnstudy.config.study before any job, with one short message.

The parametrised audit runs in-process (milliseconds each): each case asserts the error type,
the key words of its message (key path, bad value, what is allowed), that the message is one
short paragraph, and that nothing was written to the results directory. A few cases go through
a real ``snakemake -n`` to show that the Snakefile uses the same check (exit status 1, the
short message, no traceback), and through ``python -m bnstudy check``.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from harness import REPO, copy_project, snakemake, tiny_config, write_config

from bnstudy import data
from bnstudy.config import loader, study
from bnstudy.networks import normalizers

BASE = tiny_config()


def _set(path: str, value):
    """A patch setting the dotted ``path`` (created as needed) to ``value``."""
    def patch(cfg):
        *parents, last = path.split(".")
        d = cfg
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = value
    return patch


def _del(path: str):
    def patch(cfg):
        *parents, last = path.split(".")
        d = cfg
        for p in parents:
            d = d[p]
        del d[last]
    return patch


def _experiment(**kw):
    e = {"dataset": "star2d", "model": "mlp", "training": "sgd", "norms": ["none"], "seeds": [0]}
    e.update(kw)
    return _set("experiments.x", e)


# (id, patch, key words of the message)
CASES = [
    # accepted wrongly before
    ("batch_size_over_n_train", _set("trainings.sgd.batch_size", 100),
     ["trainings.sgd.batch_size", "100", "larger than the training set", "64"]),
    ("checkpoint_beyond_steps", _set("trainings.sgd.checkpoints", [0, 1, 30]),
     ["trainings.sgd", "checkpoints", "30", "0..20"]),
    ("lr_nan", _set("trainings.sgd.lr", math.nan), ["trainings.sgd", "lr", "nan", "finite"]),
    ("lr_inf", _set("trainings.sgd.lr", math.inf), ["trainings.sgd", "lr", "inf", "finite"]),
    ("n_train_negative", _set("datasets.star2d.options.n_train", -5),
     ["datasets.star2d.options.n_train", "-5", ">= 1"]),
    # failed only inside a job before
    ("dataset_option_typo", _set("datasets.star2d.options.n_trian", 64),
     ["datasets.star2d.options.n_trian", "unknown option", "n_train"]),
    ("dataset_option_string", _set("datasets.star2d.options.n_train", "64"),
     ["datasets.star2d.options.n_train", "'64'", "integer"]),
    ("n_arms_odd", _set("datasets.star2d.options.n_arms", 5),
     ["datasets.star2d.options.n_arms", "5", "even"]),
    ("ics_layer_out_of_range", _set("ics.layers", [9]),
     ["ics.layers", "9", "out of range", "mlp"]),
    ("ics_negative_layer_out_of_range", _set("ics.layers", [-6]),
     ["ics.layers", "-6", "out of range"]),
    ("radii_nan", _set("partition_density.radii", [0.01, math.nan]),
     ["partition_density.radii.1", "nan", "finite number"]),  # refused before any section
    ("analysis_option_unknown", _set("analyses.dannemann.stepz", 3),
     ["analyses.dannemann", "stepz", "valid"]),
    ("analysis_option_bad_value", _set("analyses.dannemann.steps", 0),
     ["analyses.dannemann", "steps", "0", ">= 1"]),
    ("n_train_zero", _set("datasets.star2d.options.n_train", 0),
     ["datasets.star2d.options.n_train", "0", ">= 1"]),
    # schema errors: one paragraph, not the whole schema
    ("unknown_top_level_key", _set("resutls", "out"), ["(top level)", "resutls", "results"]),
    ("unknown_training_key", _set("trainings.sgd.stpes", 3),
     ["trainings.sgd", "stpes", "steps"]),
    ("dataset_kind_unknown", _set("datasets.star2d.kind", "star3d"),
     ["datasets.star2d.kind", "star3d", "'star2d'"]),
    ("model_depth_zero", _set("models.mlp.depth", 0), ["models.mlp.depth", "0", ">= 1"]),
    ("model_width_string", _set("models.mlp.width", "16"), ["models.mlp.width", "'16'", "integer"]),
    ("model_slope_nan", _set("models.mlp.slope", math.nan), ["models.mlp", "slope", "nan"]),
    ("model_arch_unknown", _set("models.mlp.arch", "resnet"), ["models.mlp.arch", "resnet", "mlp"]),
    ("momentum_negative", _set("trainings.sgd.momentum", -1),
     ["trainings.sgd.momentum", "-1", ">= 0"]),
    ("weight_decay_inf", _set("trainings.sgd.weight_decay", math.inf),
     ["trainings.sgd", "weight_decay", "inf"]),
    ("steps_zero", _set("trainings.sgd.steps", 0), ["trainings.sgd.steps", "0", ">= 1"]),
    ("eval_every_zero", _set("trainings.sgd.eval_every", 0), ["eval_every", "0", ">= 1"]),
    ("batch_size_word", _set("trainings.sgd.batch_size", "all"),
     ["trainings.sgd.batch_size", "'all'", "'full'"]),
    ("training_missing_lr", _del("trainings.sgd.lr"), ["trainings.sgd", "'lr'", "required"]),
    ("seed_negative", _set("experiments.star.seeds", [0, -1]), ["experiments.star.seeds", "-1"]),
    ("norms_empty", _set("experiments.star.norms", []), ["experiments.star.norms", "[]"]),
    ("normalizer_unknown", _experiment(norms=["batchnrom"]),
     ["experiments.x.norms", "batchnrom", "batchnorm"]),
    ("dataset_undefined", _experiment(dataset="stars"),
     ["experiments.x.dataset", "stars", "star2d"]),
    ("training_undefined", _experiment(training="adam"), ["experiments.x.training", "adam", "sgd"]),
    ("measure_not_configured", _experiment(measures=["icss"]),
     ["experiments.x.measures", "icss", "ics"]),
    ("measure_wrong_data_kind", _experiment(measures=["teacher_student"]),
     ["experiments.x.measures", "teacher_student", "star2d"]),
    ("experiment_named_study", lambda c: c["experiments"].update(study=c["experiments"]["star"]),
     ["experiments.study", "reserved"]),
    ("analysis_unknown", _set("analyses.danneman", {}), ["analyses.danneman", "dannemann"]),
    ("device_word", _set("device", "gpu"), ["device", "gpu", "cuda:N"]),
    ("results_leading_dash", _set("results", "-x"), ["results", "'-x'", "not starting with '-'"]),
    ("smoothness_one_multiplier", _set("smoothness.multipliers", [4.0]),
     ["smoothness.multipliers", "[4.0]"]),
    ("smoothness_spacing", _set("smoothness.spacing", "cubic"),
     ["smoothness.spacing", "cubic", "log, linear"]),
    ("smoothness_tol_nan", _set("smoothness.hessian_tol", math.nan), ["smoothness", "hessian_tol"]),
    ("bn_jitter_batch_one", _set("bn_jitter.batch_sizes", [1]),
     ["bn_jitter.batch_sizes", "1", ">= 2"]),
    ("partition_density_odd_vertices", _set("partition_density.n_vertices", 3),
     ["partition_density.n_vertices", "3"]),
    ("ics_probe_size_zero", _set("ics.probe_size", 0), ["ics.probe_size", "0", ">= 1"]),
    ("teacher_student_convention", _set("teacher_student.convention", "x"),
     ["teacher_student.convention", "'x'", "'paper'"]),
    ("generalization_statistics", _set("generalization.bn_statistics", "batch"),
     ["generalization.bn_statistics", "batch", "'running'"]),
    ("digits_test_fraction", _set("datasets.d", {"kind": "digits",
                                                 "options": {"test_fraction": 1.5}}),
     ["datasets.d.options.test_fraction", "1.5", "< 1"]),
    ("teacher_student_alpha_tiny", _set("datasets.t", {"kind": "teacher_student",
                                                       "options": {"N": 10, "alpha": 0.01}}),
     ["datasets.t.options.alpha", "0.01", "alpha * N >= 1"]),
    ("gaussian_dim_zero", _set("datasets.gaussian_linear.options.dim", 0),
     ["datasets.gaussian_linear.options.dim", "0", ">= 1"]),
    ("mnist_n_train_word", _set("datasets.m", {"kind": "mnist", "options": {"n_train": "all"}}),
     ["datasets.m.options.n_train", "'all'", "integer", "null"]),
    ("dln_on_ten_classes", lambda c: (_set("datasets.d", {"kind": "digits",
                                                          "options": {"image": False}})(c),
                                      _experiment(model="dln", dataset="d")(c)),
     ["experiments.x", "dln", "square", "64 != output dim 10"]),
    ("vgg_on_vectors", lambda c: (_set("models.v", {"arch": "vgg"})(c),
                                  _experiment(model="v")(c)),
     ["experiments.x", "vgg", "(C, H, W)"]),
    ("vgg_too_many_pools", lambda c: (
        _set("datasets.d", {"kind": "digits", "options": {"image": True}})(c),
        _set("models.v", {"arch": "vgg", "channels": [4, "M", 8, "M", 16, "M", 32, "M"]})(c),
        _experiment(model="v", dataset="d")(c)),
     ["experiments.x", "'v'", "(1, 8, 8)", "Output size is too small"]),
    ("norm_option_unknown", _set("models.mlp.norm_options", {"batchnorm": {"groups": 2}}),
     ["models.mlp: norm_options.batchnorm", "'groups'", "valid: none"]),
    ("norm_option_misspelt", _set("models.mlp.norm_options",
                                  {"ghost_batchnorm": {"ghost_batchsize": 8}}),
     ["models.mlp: norm_options.ghost_batchnorm", "'ghost_batchsize'",
      "valid: ghost_batch_size"]),
    ("noisy_n_sigma_below_one", _set("models.mlp.norm_options",
                                     {"noisy_batchnorm": {"n_sigma": 0.5}}),
     ["models.mlp: norm_options.noisy_batchnorm", "n_sigma=0.5", "a number >= 1"]),
    ("ghost_batch_of_one", _set("models.mlp.norm_options",
                                {"ghost_batchnorm": {"ghost_batch_size": 1}}),
     ["models.mlp: norm_options.ghost_batchnorm", "ghost_batch_size=1", "an int >= 2"]),
    ("plots_dpi", _set("plots.dpi", 10), ["plots.dpi", "10", ">= 30"]),
    ("report_ci", _set("report.ci", 1.5), ["report.ci", "1.5", "< 1"]),
    ("experiment_missing_seeds", _del("experiments.star.seeds"),
     ["experiments.star", "'seeds'", "required"]),
]


def bad_config(patch, tmp_path) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    patch(cfg)
    return cfg


def assert_clear(err: Exception, words) -> None:
    msg = str(err)
    assert "\n" not in msg and len(msg) < 400, msg  # one short paragraph, not the schema
    for w in words:
        assert w in msg, (w, msg)


def test_base_config_passes(tmp_path):
    cfg = study.check(bad_config(_del("partition_density.n_points"), tmp_path))
    assert cfg["results"] == str(tmp_path / "results")
    assert cfg["partition_density"]["n_points"] == 100  # the schema's defaults are filled in


def test_at_least_forty_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("patch, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_is_rejected_clearly(patch, words, tmp_path, capsys):
    cfg = bad_config(patch, tmp_path)
    with pytest.raises(loader.ConfigError) as err:
        study.check(copy.deepcopy(cfg), local=False)
    assert_clear(err.value, words)
    # as the Snakefile calls it: exit status 1 and the message on one line, no traceback
    with pytest.raises(SystemExit) as exit_:
        loader.or_exit(study.check, cfg, local=False)
    out = capsys.readouterr()
    assert exit_.value.code == 1 and out.out == ""
    assert out.err == f"bnstudy config error: {err.value}\n"
    assert not (tmp_path / "results").exists()


def test_cuda_without_cuda_is_rejected_locally_only(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = bad_config(_set("device", "cuda"), tmp_path)
    with pytest.raises(loader.ConfigError) as err:
        study.check(copy.deepcopy(cfg), local=True)
    assert_clear(err.value, ["device", "'cuda'", "0 CUDA device", "auto"])
    study.check(cfg, local=False)  # a cluster's compute nodes may have the GPU


def test_results_pointing_at_a_file_is_rejected(tmp_path):
    (tmp_path / "results").write_text("not a directory")
    with pytest.raises(loader.ConfigError) as err:
        study.check(bad_config(lambda c: None, tmp_path))
    assert_clear(err.value, ["results", "existing file", "directory"])
    (tmp_path / "f").write_text("")
    with pytest.raises(loader.ConfigError):
        study.check(bad_config(_set("results", str(tmp_path / "f" / "sub")), tmp_path))


@pytest.mark.parametrize("text, words", [
    ("results: a\nresults: b\n", ["line 2, column 1", "duplicate key 'results'", "line 1"]),
    ("datasets:\n  s: {kind: star2d}\n  s: {kind: digits}\n", ["line 3", "duplicate key 's'"]),
    ("a: [1, 2\nb: 3\n", ["line 2, column 2", "YAML syntax error"]),
    ("a: 1\n\tb: 2\n", ["line 2", "YAML syntax error"]),
    ("- 1\n- 2\n", ["must be a mapping"]),
    ("# nothing\n", ["must be a mapping", "empty file"]),
])
def test_config_files_are_read_strictly(tmp_path, text, words):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(loader.ConfigError) as err:
        loader.check_files([f])
    assert_clear(err.value, [str(f), *words])


def test_merge_keys_may_still_be_overridden(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("a: &x {p: 1, q: 2}\nb: {<<: *x, q: 3}\n")
    assert loader.read_yaml(f) == {"a": {"p": 1, "q": 2}, "b": {"p": 1, "q": 3}}


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(loader.ConfigError) as err:
        loader.check_files([tmp_path / "nope.yaml"])
    assert_clear(err.value, ["nope.yaml", "does not exist"])


@pytest.mark.parametrize("path", ["config/config.yaml",
                                  *sorted(f"config/studies/{p.name}"
                                          for p in (REPO / "config/studies").glob("*.yaml"))])
def test_shipped_configs_pass(path):
    study.check(study.load([REPO / path]), local=False)  # extends: and sweeps expanded


# models each normalizer must construct (or refuse) alike with and without its weights drawn:
# every architecture, dropout, each initialization
UNDRAWN_MODELS = [({"arch": "mlp", "depth": 2, "width": 16, "dropout": 0.1}, (2,), 3),
                  ({"arch": "mlp", "depth": 2, "width": 6, "init": "orthogonal"}, (2,), 3),
                  ({"arch": "dln", "depth": 3, "init": "xavier"}, (4,), 4),
                  ({"arch": "unit"}, (4,), 1),
                  ({"arch": "vgg", "channels": [8, "M", 12], "dropout": 0.2}, (3, 8, 8), 3),
                  ({"arch": "cnn", "width_mult": 0.25}, (3, 16, 16), 3),
                  *(({"arch": a, "width": 8}, (3, 16, 16), 3) for a in ("resnet9", "resnet18"))]


def _constructed(cfg, norm, shape, out, drawn: bool) -> str | None:
    """None when the model constructs, else the error's type."""
    import contextlib

    from bnstudy.networks import meta, models

    try:
        with contextlib.nullcontext() if drawn else meta.no_draws():
            models.build_model(cfg, norm, shape, out)
    except (ValueError, RuntimeError) as e:
        return type(e).__name__
    return None


@pytest.mark.parametrize("norm", sorted(normalizers.REGISTRY))
def test_a_normalizer_arm_constructs_without_drawing_its_weights_as_with_them(norm):
    """The config check constructs each normalizer arm without drawing its weights
    (bnstudy.config.study._build): an arm is refused there exactly when its built model fails,
    for every architecture."""
    from bnstudy.networks import models

    assert set(models.BUILDERS) <= {m["arch"] for m, _, _ in UNDRAWN_MODELS}
    for entry, shape, out in UNDRAWN_MODELS:
        cfg = models.ModelConfig.from_dict(entry)
        assert _constructed(cfg, norm, shape, out, False) == \
            _constructed(cfg, norm, shape, out, True), (norm, entry)


def test_the_check_draws_weights_only_for_the_plain_nets(monkeypatch):
    """Only the plain net of each model and dataset has its weights drawn (it is run forward
    once); the normalizer arms are constructed without (a paper-scale study's check drew every
    arm's: 13 of the cost-header tests' 25 CPU-s)."""
    from bnstudy.networks import models

    real, drawn = models._initialize, []

    def record(net, cfg):
        real(net, cfg)
        w = next(p for p in net.parameters() if p.dim() > 1)
        if not w.is_meta:  # (the parameter count's build is on the meta device)
            drawn.append(bool(w.detach().abs().sum() > 0))  # undrawn: zeros

    monkeypatch.setattr(models, "_initialize", record)
    cfg = copy.deepcopy(BASE)
    cfg["experiments"]["star"]["norms"] = ["none", "batchnorm", "layernorm", "groupnorm"]
    study.check(cfg, local=False)
    pairs = {(e["model"], e["dataset"]) for e in cfg["experiments"].values()}
    assert drawn.count(True) == len(pairs) and drawn.count(False) >= 3, drawn


@pytest.mark.parametrize("kind, options", [
    ("star2d", {"n_train": 37}), ("gaussian_linear", {"n_train": 5, "dim": 3}),
    ("digits", {}), ("digits", {"test_fraction": 0.3333, "image": False}),
    ("teacher_student", {"N": 50, "alpha": 1.37}),
])
def test_sizes_from_options_match_the_data(kind, options):
    ds = data.make(kind, options)
    assert data.n_train(kind, options) == len(ds.x_train)
    assert data.shape(kind, options) == (ds.input_shape, ds.out_dim)


def test_declared_dataset_options_are_the_generators_arguments():
    import inspect

    for kind, gen in data.GENERATORS.items():
        assert set(data.OPTIONS[kind]) == set(inspect.signature(gen).parameters), kind


def test_cli_check_verb(tmp_path):
    good = write_config(tmp_path / "good.yaml", {**BASE, "results": str(tmp_path / "r"),
                                                   "results_anywhere": True})
    out = subprocess.run([sys.executable, "-m", "bnstudy", "check", str(good)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "config OK" in out.stdout, out.stderr
    bad = copy.deepcopy(BASE)
    bad["trainings"]["sgd"]["batch_size"] = 100
    write_config(tmp_path / "bad.yaml", bad)
    out = subprocess.run([sys.executable, "-m", "bnstudy", "check", str(tmp_path / "bad.yaml")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "trainings.sgd.batch_size" in out.stderr


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("wf") / "project")


@pytest.mark.workflow
@pytest.mark.parametrize("name, patch, words", [
    ("typo", _set("datasets.star2d.options.n_trian", 64), ["datasets.star2d.options.n_trian"]),
    ("results_file", _set("results", "afile"), ["results", "existing file"]),
    ("batch", _set("trainings.sgd.batch_size", 100), ["trainings.sgd.batch_size", "100"]),
    # issue 19: an option the arch does not read; a sweep of the wrong shape (a TypeError once)
    ("cnn_width", _set("models.mlp", {"arch": "cnn", "width": 2}),
     ["models.mlp", "width=2", "arch cnn has no option 'width'"]),
    ("options_null",
     lambda c: c["datasets"]["star2d"].update(options=None, sweep={"n_train": [16, 32]}),
     ["datasets.star2d.options", "None", "mapping"]),
    # issue 34: snakemake -n built a DAG of a billion seeds for minutes; NaN failed after work
    ("replication_max", _set("replication", {"start": 2, "max": 1_000_000_000}),
     ["replication", "1,000,000,000 seeds", "limits.seeds = 256"]),
    ("width_nan", _set("plots.width", math.nan), ["plots.width", "nan", "finite"]),
])
def test_snakemake_rejects_before_any_job(workdir, name, patch, words):
    (workdir / "afile").write_text("")
    cfg = copy.deepcopy(BASE)
    patch(cfg)
    write_config(workdir / f"{name}.yaml", cfg)
    out = snakemake(workdir, "-n", "--configfile", f"{name}.yaml", check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "bnstudy config error:" in text and "Traceback" not in text and "File \"" not in text
    assert "Building DAG" not in text  # stopped while reading the config: no job planned
    for w in words:
        assert w in text, (w, text)
    assert len(text.splitlines()) < 10, text


@pytest.mark.workflow
def test_snakemake_rejects_duplicate_keys(workdir):
    f = workdir / "dup.yaml"
    f.write_text(Path(REPO / "config/config.yaml").read_text() + "\nresults: elsewhere\n")
    out = snakemake(workdir, "-n", "--configfile", "dup.yaml", check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 1 and "duplicate key 'results'" in text and "Traceback" not in text
