"""Issue 34, items 6 and 7: inputs that exhausted the check (or failed late, after work) are
bounded before any work, each with one short message naming the key, the value and what is
allowed (bnstudy.config.bounds, bnstudy.config.paths, the loader's YAML cap).

Each case goes through the loader and the check as the Snakefile calls them (``study.load`` on a
config file, then ``study.check``), in-process, in seconds; nothing is written to the results
directory. The last test is the ``verify`` message on a foreign PyTorch file.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from harness import tiny_config, write_config

from bnstudy.config import bounds, loader, study

BASE = tiny_config()


def _cfg(tmp_path: Path, **sections) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    cfg.update(sections)
    return cfg


def _check_file(f: Path, overrides: dict | None = None) -> dict:
    return study.check(study.load([f], overrides), local=False)


def rejected(f: Path, words, tmp_path: Path, overrides: dict | None = None,
             seconds: float = 10) -> str:
    """The one-line message the config file ``f`` is refused with, holding every one of
    ``words``, within ``seconds``; nothing written to the results directory."""
    t0 = time.perf_counter()
    with pytest.raises(loader.ConfigError) as err:
        _check_file(f, overrides)
    assert time.perf_counter() - t0 < seconds
    msg = str(err.value)
    # the length without the test's temporary directory (longer under pytest-xdist's workers)
    assert "\n" not in msg and len(msg.replace(str(tmp_path), "TMP")) < 400, msg
    for w in words:
        assert w in msg, (w, msg)
    assert not (tmp_path / "results").exists()
    return msg


def study_file(tmp_path: Path, cfg: dict | None = None, extra: str = "") -> Path:
    """``cfg`` (default: the tiny study) written as base.yaml, and a file extending it with the
    YAML text ``extra``."""
    write_config(tmp_path / "base.yaml", cfg or _cfg(tmp_path))
    f = tmp_path / "study.yaml"
    f.write_text("extends: base.yaml\n" + extra)
    return f


def _bomb(anchor: str, leaf: str, levels: int = 9) -> str:
    """A YAML list of ``levels`` nested lists, each alias-repeating the one before ten times
    (10^levels values expanded, a few hundred characters)."""
    items = [f"&{anchor}0 [" + ", ".join([leaf] * 10) + "]"]
    items += [f"&{anchor}{i} [" + ", ".join([f"*{anchor}{i - 1}"] * 10) + "]"
              for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


# -- item 6: inputs that exhaust the checker ----------------------------------------------------

@pytest.mark.parametrize("extra", [
    # an alias bomb as a sweep value (a 522 MB message after 90 s before)
    "datasets:\n  star2d:\n    sweep:\n      noise: " + _bomb("a", "0.1") + "\n",
    # inside a variant's measures (hung in the schema's uniqueItems before)
    "experiments:\n  star:\n    sweep:\n      v:\n        a: {measures: " + _bomb("b", "ics")
    + "}\n",
    # merge keys (<<) are counted as the aliases they are
    "x0: &m0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}\n" + "".join(
        f"x{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}\n" for i in range(1, 9)),
])
def test_a_yaml_alias_bomb_is_refused_in_seconds(extra, tmp_path):
    f = study_file(tmp_path, extra=extra)
    rejected(f, [str(f), f"more than {loader.MAX_VALUES:,} values", "aliases"], tmp_path,
             seconds=5)


def test_a_few_aliases_still_load(tmp_path):
    f = study_file(tmp_path, extra="trainings:\n  sgd: &t {lr: 0.05, momentum: 0.9, "
                                   "batch_size: 16, steps: 20, eval_every: 5, "
                                   "checkpoints: &c [0, 1, 10]}\n  gd: {<<: *t, "
                                   "batch_size: full, checkpoints: *c}\n")
    cfg = _check_file(f)
    assert cfg["trainings"]["gd"]["checkpoints"] == [0, 1, 10]


def test_a_shared_value_in_the_overrides_is_counted_where_it_is_used(tmp_path):
    f = study_file(tmp_path)
    leaf = [0.1] * 10
    for _ in range(6):  # 10^7 values, built in microseconds by sharing
        leaf = [leaf] * 10
    rejected(f, [f"more than {loader.MAX_VALUES:,} values", "overrides"], tmp_path,
             overrides={"datasets": {"star2d": {"sweep": {"noise": leaf}}}}, seconds=5)


@pytest.mark.parametrize("replication, words", [
    ({"start": 2, "max": 1_000_000_000},
     ["replication", "1,000,000,000 seeds", "[2, 4, ..., 536870912, 1000000000]",
      "limits.seeds = 256"]),
    ({"rounds": [2, 300]}, ["replication", "300 seeds", "limits.seeds = 256"]),
])
def test_replication_rounds_are_bounded_by_limits_seeds(replication, words, tmp_path):
    cfg = _cfg(tmp_path, replication=replication)
    rejected(study_file(tmp_path, cfg), words, tmp_path, seconds=5)
    cfg = _cfg(tmp_path)  # an experiment's own policy is named by its own key
    cfg["experiments"]["star"]["replication"] = replication
    rejected(study_file(tmp_path, cfg), ["experiments.star.replication", *words[1:]], tmp_path)


def test_seeds_are_bounded_by_a_configurable_limit(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["experiments"]["star"]["seeds"] = list(range(300))
    rejected(study_file(tmp_path, cfg), ["experiments.star.seeds", "lists 300 seeds",
                                         "limits.seeds = 256"], tmp_path)
    cfg["limits"] = {"seeds": 300}
    _check_file(study_file(tmp_path, cfg))
    cfg["limits"] = {"seeds": 2, "dataset_values": 10**9, "memory_budget_mb": 1}
    cfg["experiments"]["star"]["seeds"] = [0, 1]
    cfg["replication"] = {"rounds": [2, 3]}
    rejected(study_file(tmp_path, cfg), ["replication", "3 seeds", "limits.seeds = 2"],
             tmp_path)


@pytest.mark.parametrize("dataset, words", [
    ({"kind": "star2d", "options": {"n_train": 100_000_000_000}},
     ["datasets.d.options", "'n_train': 100000000000", "300,000,000,600 numbers"]),
    ({"kind": "star2d", "options": {"n_test": 10**30}}, ["datasets.d.options", "n_test"]),
    ({"kind": "gaussian_linear", "options": {"dim": 100_000}},
     ["datasets.d.options", "'dim': 100000", "10,400,000,000 numbers"]),
    ({"kind": "teacher_student", "options": {"N": 1_000_000}},
     ["datasets.d.options", "'N': 1000000", "numbers"]),
    ({"kind": "teacher_student", "options": {"N": 10, "n_test": 10**9}},
     ["datasets.d.options", "'n_test': 1000000000"]),
])
def test_a_dataset_too_large_is_refused_before_it_is_made(dataset, words, tmp_path):
    cfg = _cfg(tmp_path)
    cfg["datasets"]["d"] = dataset
    cfg["experiments"]["star"]["dataset"] = "d"
    cfg["experiments"]["star"]["norms"] = ["none"]
    rejected(study_file(tmp_path, cfg), [*words, "limits.dataset_values = 250,000,000"],
             tmp_path, seconds=5)


def test_the_dataset_limit_is_configurable_and_counts_what_the_generator_makes(tmp_path):
    from bnstudy import data

    for kind, options in (("star2d", {"n_train": 37, "n_test": 5}),
                          ("gaussian_linear", {"n_train": 5, "n_test": 3, "dim": 3}),
                          ("teacher_student", {"N": 7, "alpha": 1.5, "n_test": 4})):
        ds = data.make(kind, options)
        stored = sum(getattr(ds, k).size for k in ("x_train", "y_train", "x_test", "y_test"))
        extra = {"gaussian_linear": 9, "teacher_student": 7}.get(kind, 0)  # A, or the teacher
        assert bounds.dataset_values(kind, data.check_options(kind, options)) == stored + extra
    cfg = _cfg(tmp_path, limits={"dataset_values": 500})  # the tiny star2d: 128 * 3 numbers
    rejected(study_file(tmp_path, cfg), ["datasets.gaussian_linear.options",
                                         "limits.dataset_values = 500"], tmp_path)
    del cfg["datasets"]["gaussian_linear"], cfg["datasets"]["ts_tiny"]
    del cfg["experiments"]["dln"], cfg["experiments"]["ts"]
    _check_file(study_file(tmp_path, cfg))


@pytest.mark.parametrize("patch, words", [
    (lambda c: c.update(plots={"width": float("nan")}), ["plots.width", "nan"]),
    (lambda c: c.update(report={"ci": float("nan")}), ["report.ci", "nan"]),
    (lambda c: c.update(plots={"width": float("inf")}), ["plots.width", "inf"]),
    (lambda c: c["trainings"]["sgd"].update(lr=float("-inf")), ["trainings.sgd.lr", "-inf"]),
    (lambda c: c["datasets"]["star2d"]["options"].update(noise=float("nan")),
     ["datasets.star2d.options.noise", "nan"]),
    (lambda c: c["datasets"]["star2d"].update(sweep={"noise": [0.1, float("nan")]}),
     ["datasets.star2d.sweep.noise.1", "nan"]),
    (lambda c: c["bn_jitter"].update(memory_budget_mb=float("inf")),
     ["bn_jitter.memory_budget_mb", "inf"]),
])
def test_nan_and_infinities_are_refused_in_every_setting(patch, words, tmp_path):
    cfg = _cfg(tmp_path)
    patch(cfg)
    rejected(study_file(tmp_path, cfg), [*words, "allowed: a finite number"], tmp_path)


def test_nan_given_as_an_override_is_refused(tmp_path):
    rejected(study_file(tmp_path), ["report.ci", "nan", "finite"], tmp_path,
             overrides={"report": {"ci": float("nan")}})


@pytest.mark.parametrize("section", ["partition_density", "bn_jitter"])
def test_a_tiny_memory_budget_is_refused(section, tmp_path):
    cfg = _cfg(tmp_path)
    cfg[section]["memory_budget_mb"] = 1e-6
    rejected(study_file(tmp_path, cfg), [f"{section}.memory_budget_mb", "1e-06",
                                         "limits.memory_budget_mb = 16", '"auto"'], tmp_path)
    cfg[section]["memory_budget_mb"] = 16  # at the floor
    _check_file(study_file(tmp_path, cfg))
    cfg[section]["memory_budget_mb"] = 0.5
    cfg["limits"] = {"memory_budget_mb": 0.25}  # configurable
    _check_file(study_file(tmp_path, cfg))


# -- item 7: tracebacks and unclear messages ----------------------------------------------------

def test_a_file_that_is_not_utf8_is_named_with_line_and_column(tmp_path):
    f = study_file(tmp_path)
    f.write_bytes(b"extends: base.yaml\nplots: {palette: 'caf\xe9'}\n")
    rejected(f, [str(f), "line 2, column 22", "byte 0xe9 is not UTF-8", "UTF-8"], tmp_path)
    child = tmp_path / "child.yaml"  # through extends: the bad file is named
    child.write_text("extends: study.yaml\n")
    rejected(child, [str(f), "line 2, column 22", "not UTF-8"], tmp_path)


def test_a_file_nested_too_deeply_is_one_message(tmp_path):
    f = tmp_path / "deep.yaml"
    f.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    rejected(f, [str(f), "nested too deeply"], tmp_path)


@pytest.mark.parametrize("make, words", [
    (lambda d: ((d / "la").symlink_to(d / "lb"), (d / "lb").symlink_to(d / "la"), d / "la")[2],
     ["symbolic link loop"]),
    (lambda d: ((d / "la").symlink_to(d / "lb"), (d / "lb").symlink_to(d / "la"),
                d / "la" / "res")[2], ["symbolic link loop"]),
    (lambda d: ((d / "dang").symlink_to(d / "gone"), d / "dang")[1],
     ["dangling symbolic link", "gone", "does not exist"]),
])
def test_results_through_a_broken_link_is_named(make, words, tmp_path):
    results = make(tmp_path)
    cfg = _cfg(tmp_path, results=str(results))
    rejected(study_file(tmp_path, cfg), ["results", *words, "fix or remove the link"],
             tmp_path)


def test_results_with_a_tilde_is_the_home_folder(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    cfg = _check_file(study_file(tmp_path, _cfg(tmp_path, results="~/out")))
    assert cfg["results"] == str(home / "out")
    assert not (tmp_path / "~").exists()


def test_a_real_datasets_data_dir_is_expanded_and_its_links_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = _cfg(tmp_path)
    cfg["datasets"]["real"] = {"kind": "svhn", "options": {"data_dir": "~/data",
                                                           "download": True}}
    out = _check_file(study_file(tmp_path, cfg))
    assert out["datasets"]["real"]["options"]["data_dir"] == str(tmp_path / "data")
    (tmp_path / "data").symlink_to(tmp_path / "gone")
    rejected(study_file(tmp_path, cfg), ["datasets.real.options.data_dir", "dangling"],
             tmp_path)


def test_extends_through_a_link_loop_or_a_tilde(tmp_path, monkeypatch):
    f = study_file(tmp_path)
    (tmp_path / "la").symlink_to(tmp_path / "lb")
    (tmp_path / "lb").symlink_to(tmp_path / "la")
    f.write_text("extends: la\n")
    rejected(f, [str(f), "extends: 'la'", "symbolic link loop"], tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    f.write_text("extends: ~/base.yaml\n")
    _check_file(f)
    rejected(tmp_path / "la", ["config file", "symbolic link loop"], tmp_path)


@pytest.mark.parametrize("section, entry", [
    ("datasets", {"kind": "star2d"}), ("models", {"arch": "mlp"}),
    ("trainings", {"lr": 0.1, "steps": 2}),
    ("experiments", {"dataset": "star2d", "model": "mlp", "training": "sgd",
                     "norms": ["none"], "seeds": [0]}),
])
def test_a_name_too_long_for_a_file_is_refused_before_work(section, entry, tmp_path):
    cfg = _cfg(tmp_path)
    cfg[section]["n" * 300] = entry
    rejected(study_file(tmp_path, cfg), [f"{section}.nnnn", "300 characters",
                                         f"at most {bounds.MAX_NAME}"], tmp_path)
    del cfg[section]["n" * 300]
    cfg[section]["n" * bounds.MAX_NAME] = entry  # at the cap
    _check_file(study_file(tmp_path, cfg))


def test_a_generated_name_too_long_and_a_results_name_too_long(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["experiments"]["star"].update(sweep={"v": {"a": {}}}, name="x" * 150 + "{v}")
    rejected(study_file(tmp_path, cfg), ["experiments.xxxx", "151 characters"], tmp_path)
    cfg = _cfg(tmp_path, results=str(tmp_path / ("r" * 300) / "x"))
    rejected(study_file(tmp_path, cfg), ["results", "300 characters", "255 bytes"], tmp_path)


@pytest.mark.parametrize("extra, words", [
    # a sweep variant's settings with an integer key (a TypeError in sorted() before)
    ("experiments:\n  star:\n    sweep:\n      v:\n        a: {1: 2, foo: 3}\n",
     ["experiments.star.sweep.v.a.1", "the key 1 (int)", "quote it: '1'"]),
    ("datasets:\n  star2d:\n    sweep:\n      v:\n        a: {1: 2, n_trian: 3}\n",
     ["datasets.star2d.sweep.v.a.1", "(int)"]),
    # integer keys beside unknown ones anywhere else
    ("1: 2\nfoo: 3\n", ["1: the key 1 (int)"]),
    ("trainings:\n  sgd: {1: 2, foo: 3}\n", ["trainings.sgd.1", "(int)"]),
    ("plots: {1: 2, foo: 3}\n", ["plots.1", "(int)"]),
    ("partition_density: {1: 2, foo: 3}\n", ["partition_density.1", "(int)"]),
    ("experiments:\n  star:\n    replication: {1: 2, foo: 3}\n",
     ["experiments.star.replication.1", "(int)"]),
    ("analyses:\n  dannemann: {1: 2, foo: 3}\n", ["analyses.dannemann.1", "(int)"]),
    ("resources:\n  train: {1: 2, foo: 3}\n", ["resources.train.1", "(int)"]),
    ("models:\n  mlp: {norm_options: {batchnorm: {1: 2, foo: 3}}}\n",
     ["models.mlp.norm_options.batchnorm.1", "(int)"]),
    ("limits: {1: 2, foo: 3}\n", ["limits.1", "(int)"]),
    ("plots: {null: 2}\n", ["plots.None", "the key None (NoneType)"]),
])
def test_a_key_that_is_no_text_is_named(extra, words, tmp_path):
    rejected(study_file(tmp_path, extra=extra), [*words, "allowed: a text key"], tmp_path)


def test_integer_variant_names_are_still_allowed(tmp_path):
    f = study_file(tmp_path, extra="experiments:\n  star:\n    sweep:\n      v:\n"
                                   "        1: {seeds: [0]}\n        2: {seeds: [1]}\n")
    assert {"star_v1", "star_v2"} <= set(_check_file(f)["experiments"])


def test_the_new_limits_add_nothing_to_a_checked_config(tmp_path):
    """A study without the new limits checks to the same config as before them (the schema
    declares them without defaults): the shipped studies' checked JSON is unchanged."""
    cfg = _check_file(study_file(tmp_path))
    assert cfg["limits"] == {"experiments": 10000, "parameters": 500000000}


def test_the_cli_refuses_an_alias_bomb_in_one_line(tmp_path):
    f = study_file(tmp_path, extra="datasets:\n  star2d:\n    sweep:\n      noise: "
                                   + _bomb("a", "0.1", 12) + "\n")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bnstudy", "check", "--cluster", str(f)],
                         capture_output=True, text=True, timeout=120)
    assert time.perf_counter() - t0 < 60
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and len(out.stderr) < 400, out.stderr
    assert "more than 100,000 values" in out.stderr


# -- verify on a foreign PyTorch file -------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_verify_names_a_torchscript_file_without_torchs_advice(tmp_path):
    from bnstudy import verify

    run = tmp_path / "runs" / "e" / "none" / "seed0"
    run.mkdir(parents=True)
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), run / "checkpoints.pt")
    torch.save({"w": torch.zeros(2)}, run / "history.pt")
    with pytest.warns(UserWarning, match="TorchScript"):
        text = verify.report(verify.check_study(tmp_path))
    assert "checkpoints.pt is not a bnstudy run file" in text, text
    assert "history.pt is not a bnstudy run file (no bnstudy file header)" in text, text
    assert "weights_only" not in text and "None" not in text, text
