"""A normalizer's options are declared once, in its own registration: defaults (``options``),
checks (``check``) and meanings (``option_docs``). The study schema takes any mapping per
normalizer, the config check refuses unknown options and bad values through the registry, and
``python -m bnstudy list normalizers`` generates the option listing from it."""

from __future__ import annotations

import pytest
from harness import tiny_config

from bnstudy.cli import main as cli
from bnstudy.config import loader, measure_config, study
from bnstudy.networks import models, normalizers
from bnstudy.networks.norms.registry import Normalizer, identity, number_at_least, require


@pytest.mark.parametrize("name", normalizers.names())
def test_every_option_is_documented_and_every_doc_is_an_option(name):
    norm = normalizers.REGISTRY[name]
    assert set(norm.option_docs) == set(norm.options), name
    assert all(isinstance(v, str) and v.strip() and "\n" not in v
               for v in norm.option_docs.values()), name


@pytest.mark.parametrize("name", normalizers.names())
def test_every_normalizers_defaults_pass_its_own_check(name):
    norm = normalizers.get(name)
    assert norm.options == normalizers.REGISTRY[name].options


def test_noisy_and_ghost_defaults_are_unchanged():
    assert normalizers.get("noisy_batchnorm").options == {
        "n_mu": 0.5, "n_sigma": 1.25, "r_mu": 0.1, "r_sigma": 0.1, "eval_noise": "mean"}
    assert normalizers.get("ghost_batchnorm").options == {"ghost_batch_size": 16}


@pytest.mark.parametrize("name, key, bad, valid", [
    ("noisy_batchnorm", "n_mu", -0.1, "a number >= 0"),
    ("noisy_batchnorm", "n_sigma", 0.5, "a number >= 1"),
    ("noisy_batchnorm", "n_sigma", "2", "a number >= 1"),
    ("noisy_batchnorm", "r_mu", -1, "a number >= 0"),
    ("noisy_batchnorm", "r_sigma", True, "a number >= 0"),
    ("noisy_batchnorm", "eval_noise", "on", "'mean' or 'off'"),
    ("ghost_batchnorm", "ghost_batch_size", 1, "an int >= 2"),
    ("ghost_batchnorm", "ghost_batch_size", 8.0, "an int >= 2"),
    ("ghost_batchnorm", "ghost_batch_size", True, "an int >= 2"),
])
def test_noisy_and_ghost_options_are_checked_by_the_registry(name, key, bad, valid):
    """Their ranges were only in the schema before: the registry accepted any value."""
    with pytest.raises(ValueError) as err:
        normalizers.get(name, {key: bad})
    msg = str(err.value)
    assert f"{key}={bad!r}" in msg and f"valid: {valid}" in msg, msg


@pytest.mark.parametrize("name, good", [
    ("noisy_batchnorm", {"n_mu": 0, "n_sigma": 1, "r_mu": 0, "r_sigma": 0, "eval_noise": "off"}),
    ("ghost_batchnorm", {"ghost_batch_size": 2}),
])
def test_the_bounds_themselves_are_accepted(name, good):
    assert normalizers.get(name, good).options == good


@pytest.mark.parametrize("opts, words", [
    ({"noisy_batchnorm": {"n_sigma": 0.5}},
     ["norm_options.noisy_batchnorm", "n_sigma=0.5", ">= 1"]),
    ({"ghost_batchnorm": {"ghost_batchsize": 8}},
     ["norm_options.ghost_batchnorm", "'ghost_batchsize'", "valid: ghost_batch_size"]),
    ({"batchnorm": {"eps": 1e-3}}, ["norm_options.batchnorm", "'eps'", "valid: none"]),
])
def test_model_config_refuses_a_bad_normalizer_option(opts, words):
    with pytest.raises(ValueError) as err:
        models.ModelConfig.from_dict({"arch": "mlp", "norm_options": opts})
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_study_check_names_model_normalizer_and_option(tmp_path):
    """Refused when the config is checked, for a normalizer no experiment runs too."""
    cfg = tiny_config()
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    cfg["models"]["mlp"]["norm_options"] = {"noisy_batchnorm": {"eval_noise": "sometimes"}}
    with pytest.raises(loader.ConfigError) as err:
        study.check(cfg, local=False)
    msg = str(err.value)
    assert msg.startswith("models.mlp: norm_options.noisy_batchnorm: "), msg
    assert "eval_noise='sometimes'" in msg and "'mean' or 'off'" in msg, msg


def _toy() -> Normalizer:
    return Normalizer(
        "toy_norm", identity, options={"alpha": 1.0, "mode": None, "on": True},
        check=lambda o: require(o, "alpha", number_at_least(0), "a number >= 0"),
        option_docs={"alpha": "the toy's strength", "mode": "the toy's mode"})


def test_a_new_normalizers_option_needs_no_schema_edit(monkeypatch):
    """The schema refused every option it did not list, so a new normalizer's option needed a
    schema edit; now the registry alone accepts or refuses it."""
    monkeypatch.setitem(normalizers.REGISTRY, "toy_norm", _toy())
    cfg = tiny_config()
    cfg["models"]["mlp"]["norm_options"] = {"toy_norm": {"alpha": 2.0}}
    loader.validate_schema(cfg, sections=measure_config.sections())
    cfg = models.ModelConfig.from_dict({"arch": "mlp", "norm_options": {"toy_norm": {
        "alpha": 2.0}}})
    assert cfg.normalizer("toy_norm").options["alpha"] == 2.0
    with pytest.raises(ValueError, match=r"toy_norm: .*alpha=-1; valid: a number >= 0"):
        models.ModelConfig.from_dict({"arch": "mlp", "norm_options": {"toy_norm": {
            "alpha": -1}}})


def test_the_schema_still_wants_a_mapping_per_normalizer():
    cfg = tiny_config()
    cfg["models"]["mlp"]["norm_options"] = {"ghost_batchnorm": 8}
    with pytest.raises(loader.ConfigError, match="ghost_batchnorm"):
        loader.validate_schema(cfg, sections=measure_config.sections())


def test_option_help_is_generated_from_defaults_and_docs():
    assert _toy().option_help() == ["alpha (1.0): the toy's strength",
                                    "mode (null): the toy's mode", "on (true)"]


def test_list_normalizers_prints_each_option_with_default_and_meaning(capsys):
    assert cli.main(["list", "normalizers"]) == 0
    out = capsys.readouterr().out
    for name in normalizers.names():
        norm = normalizers.REGISTRY[name]
        for key, doc in norm.option_docs.items():
            assert f"{key} (" in out and doc in out, (name, key)
    assert "ghost_batch_size (16): virtual batch size" in out
    assert "eval_noise ('mean'): " in out
