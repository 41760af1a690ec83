"""Your own question without forking: a normalizer from a file outside ``src/`` named by a study
config (``normalizers:``, :mod:`bnstudy.networks.external`) and a user's own arrays (the
``arrays`` dataset kind, :mod:`bnstudy.data.user`) run through the tiny study's workflow; bad
import paths, contract-breaking normalizers and malformed data files fail in the config check,
in one line, before any job."""

from __future__ import annotations

import sys
import textwrap

import harness
import numpy as np
import pytest

from bnstudy import data, user_code
from bnstudy.networks import external
from bnstudy.networks.norms import registry

EXAMPLE = harness.REPO / "examples" / "my_norms.py"


def _config(**extra) -> dict:
    cfg = harness.only_experiments(harness.tiny_config(), "star")
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize("target, said", [
    ("no_such_module_xyz:norm", "no module 'no_such_module_xyz'"),
    ("missing_file.py:norm", "no file missing_file.py"),
    ("bnstudy.networks.norms.registry:no_such_thing", "has no attribute 'no_such_thing'"),
    ("no_such_entry_point", "no installed entry point of that name in group "
                            "bnstudy.normalizers"),
])
def test_a_bad_import_path_fails_in_the_check_in_one_line(tmp_path, target, said):
    cfg = _config(normalizers={"mine": {"from": target}})
    cfg["experiments"]["star"]["norms"] = ["none", "mine"]
    line = harness.check_error_line(tmp_path, cfg)
    assert line.startswith("bnstudy check: error: normalizers.mine: ") and said in line, line
    assert not (tmp_path / "results").exists()


def test_a_normalizer_that_breaks_the_contract_is_named(tmp_path):
    (tmp_path / "bad_norms.py").write_text(textwrap.dedent("""
        from torch import nn
        def plain_layer(c, kind):   # a layer without float32 statistics under autocast
            return nn.Linear(c, c)
        not_callable = 3
    """))
    with pytest.raises(ValueError, match="breaks the autocast rule.*from .*plain_layer"):
        external.register_normalizer("bad_one", f"{tmp_path}/bad_norms.py:plain_layer")
    with pytest.raises(ValueError, match="is a int, not a bnstudy Normalizer"):
        external.register_normalizer("bad_two", f"{tmp_path}/bad_norms.py:not_callable")
    assert "bad_one" not in registry.REGISTRY and "bad_two" not in registry.REGISTRY
    with pytest.raises(ValueError, match="already registered"):  # no built-in is replaced
        external.register_normalizer("batchnorm", f"{EXAMPLE}:rms_norm")


def test_claims_as_must_name_a_built_in(tmp_path):
    cfg = _config(normalizers={"rms": {"from": f"{EXAMPLE}:rms_norm", "claims_as": "bn"}})
    line = harness.check_error_line(tmp_path, cfg)
    assert "normalizers.rms.claims_as: 'bn' is not a built-in normalizer" in line


def _arrays(path, n_train=48, n_test=32, labels=True):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n_train + n_test, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64) if labels else x[:, 0]
    np.savez(path, x_train=x[:n_train], y_train=y[:n_train], x_test=x[n_train:],
             y_test=y[n_train:])
    return path


def test_the_arrays_kind_reads_shapes_from_headers_and_checks_them(tmp_path):
    p = _arrays(tmp_path / "d.npz")
    assert data.n_train("arrays", {"path": str(p)}) == 48
    assert data.shape("arrays", {"path": str(p)}) == ((2,), 2)
    ds = data.make("arrays", {"path": str(p), "n_test": 10})
    assert ds.x_test.shape == (10, 2) and ds.y_train.dtype == np.int64
    bad = _arrays(tmp_path / "r.npz", labels=False)
    with pytest.raises(ValueError, match="integer labels"):
        data.shape("arrays", {"path": str(bad)})
    assert data.shape("arrays", {"path": str(bad), "task": "regression"}) == ((2,), 1)
    np.savez(tmp_path / "short.npz", x_train=np.zeros((4, 2)), y_train=np.zeros(3, int),
             x_test=np.zeros((2, 2)), y_test=np.zeros(2, int))
    with pytest.raises(ValueError, match="one target per input row"):
        data.shape("arrays", {"path": str(tmp_path / "short.npz")})
    np.savez(tmp_path / "nan.npz", x_train=np.full((4, 2), np.nan), y_train=np.array([0, 1, 0, 1]),
             x_test=np.zeros((2, 2)), y_test=np.array([0, 1]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        data.make("arrays", {"path": str(tmp_path / "nan.npz")})
    cfg = _config(datasets={"mine": {"kind": "arrays", "options": {"path": "none.npz"}}})
    cfg["experiments"]["star"]["dataset"] = "mine"
    line = harness.check_error_line(tmp_path, cfg)
    assert "datasets.mine: no file 'none.npz'" in line


def test_the_image_folder_kind(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", 3), ("test", 2)):
        for c in ("a", "b"):
            (tmp_path / split / c).mkdir(parents=True)
            for i in range(n):
                Image.fromarray((rng.random((9, 7, 3)) * 255).astype("uint8")).save(
                    tmp_path / split / c / f"{i}.png")
    o = {"folder": str(tmp_path), "size": 6, "grayscale": True}
    assert data.shape("image_folder", o) == ((1, 6, 6), 2)
    ds = data.make("image_folder", o)
    assert ds.x_train.shape == (6, 1, 6, 6) and list(ds.y_train) == [0, 0, 0, 1, 1, 1]
    (tmp_path / "test" / "c").mkdir()
    with pytest.raises(ValueError, match="test-only classes"):
        data.shape("image_folder", {**o, "size": 5})


def test_a_users_normalizer_and_arrays_run_through_the_tiny_study(tmp_path_factory):
    """The user's RMSNorm (examples/my_norms.py, outside src/) beside BN on the tiny study's star,
    read with BN's claims (claims_as), and an experiment on a user's .npz in the user's own model
    (examples/my_models.py, rebuilt by the jobs from the run spec): trained, measured and in the
    ledger."""
    root = tmp_path_factory.mktemp("user_code")
    cfg = _config(normalizers={"rms": {"from": "my_norms.py:rms_norm",
                                       "claims_as": "batchnorm"}})
    cfg["experiments"]["star"]["norms"] = ["none", "batchnorm", "rms"]
    cfg["datasets"]["mine"] = {"kind": "arrays", "options": {"path": "mine.npz"}}
    cfg["models"]["funnel"] = {"from": "my_models.py:funnel_mlp", "options": {"widths": [8, 6]}}
    cfg["experiments"]["mine"] = {**cfg["experiments"]["star"], "dataset": "mine",
                                  "model": "funnel", "norms": ["batchnorm"], "seeds": [0],
                                  "measures": ["generalization"]}
    cfg = harness.with_figures(cfg, "ics_gradient")
    project = harness.copy_project(root / "p", config=cfg)
    (project / "my_norms.py").write_text(EXAMPLE.read_text())
    (project / "my_models.py").write_text((EXAMPLE.parent / "my_models.py").read_text())
    _arrays(project / "mine.npz")
    harness.snakemake(project, "--cores", "2")
    from bnstudy import io

    ledger = io.read_table(project / "results" / "tables" / "claims.parquet")
    rms = ledger[ledger["norm"].astype(str) == "rms"]
    assert {"ics_grad", "lipschitz"} <= set(rms["claim_id"]), ledger[["claim_id", "norm"]]
    assert (rms["verdict"] != "not measured").all()
    gen = io.read_table(project / "results" / "tables" / "generalization.parquet")
    mine = gen[gen["experiment"].astype(str) == "mine"]  # trained in the user's own model
    assert len(mine) and set(mine["arch"].astype(str)) == {"my_models.py:funnel_mlp"}


def test_a_dataset_from_a_users_function_by_import_path(tmp_path):
    """The ``function`` kind: a generator in a file outside src/, named by import path, called
    with the seed; its arrays checked as an .npz's are, a bad target named in one line."""
    (tmp_path / "my_data.py").write_text(textwrap.dedent("""
        import numpy as np
        def make(seed):
            rng = np.random.default_rng(seed)
            x = rng.standard_normal((30, 3))
            y = (x[:, 0] > 0).astype(np.int64)
            return {"x_train": x[:20], "y_train": y[:20], "x_test": x[20:], "y_test": y[20:]}
        def floats(seed):
            return np.zeros((4, 2)), np.zeros(4), np.zeros((2, 2)), np.zeros(2)
    """))
    src = f"{tmp_path}/my_data.py"
    assert data.shape("function", {"source": f"{src}:make"}) == ((3,), 2)
    ds = data.make("function", {"source": f"{src}:make", "seed": 3})
    assert ds.x_train.shape == (20, 3) and ds.meta["kind"] == "function"
    with pytest.raises(ValueError, match="integer labels"):
        data.shape("function", {"source": f"{src}:floats"})
    assert data.shape("function", {"source": f"{src}:floats", "task": "regression"}) == ((2,), 1)
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        data.n_train("function", {"source": f"{src}:nope"})


def test_an_installed_entry_point_is_found_by_its_name(monkeypatch):
    """A package's entry point (group bnstudy.normalizers) named by its bare name; stands in for
    an installed package with importlib.metadata's own EntryPoint pointing at the example."""
    from importlib import metadata

    ep = metadata.EntryPoint("fancy_rms", "bnstudy_example_norms:rms_norm", "bnstudy.normalizers")
    monkeypatch.setattr(user_code.metadata, "entry_points",
                        lambda group: [ep] if group == "bnstudy.normalizers" else [])
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    monkeypatch.setitem(sys.modules, "bnstudy_example_norms",
                        user_code._module(str(EXAMPLE), "x"))  # noqa: SLF001
    obj = external.resolve("fancy_rms", "bnstudy.normalizers")
    assert isinstance(obj, registry.Normalizer) and obj.name == "rms"
    with pytest.raises(ValueError, match=r"installed: fancy_rms"):
        external.resolve("other", "bnstudy.normalizers")
