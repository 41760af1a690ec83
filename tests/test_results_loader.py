"""bnstudy.results: a results directory's tables (with provenance) and rebuilt models.

The results directory is written as the workflow writes it, by the CLI verbs in-process
(prepare-data, train, aggregate), without Snakemake.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from specs import make_spec

from bnstudy import data, io, results
from bnstudy.cli import main as cli
from bnstudy.tables import layout
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

TRAINING = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 12, "eval_every": 4,
            "checkpoints": [0, 4, 8]}
GRID = {"tiny": {"norms": ["batchnorm", "noisy_batchnorm"], "seeds": [0, 1]}}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("study") / "results"
    npz = root / "data" / "star2d.npz"
    assert cli.main(["prepare-data", "--name", "star2d", "--kind", "star2d", "--options",
                     json.dumps({"n_train": 48, "n_test": 32, "seed": 0}),
                     "--out", str(npz)]) == 0
    for norm in GRID["tiny"]["norms"]:
        for seed in GRID["tiny"]["seeds"]:
            spec = make_spec(norm=norm, seed=seed, training=TRAINING, experiment="tiny")
            out = [layout.run_file(root, "tiny", norm, seed, f)
                   for f in ("checkpoints.pt", "history.parquet")]
            assert cli.main(["train", "--data", str(npz), "--spec", json.dumps(spec),
                             "--device", "cpu", "--out-checkpoints", out[0],
                             "--out-history", out[1]]) == 0
    assert cli.main(["aggregate", "--results", str(root), "--name", "history.parquet",
                     "--grid", json.dumps(GRID), "--out",
                     str(root / "tables" / "training.parquet")]) == 0
    return root


def test_tables_load_with_provenance(root):
    r = results.load(root)
    assert r.names() == ["training"] and list(r.tables) == ["training"]
    assert "training" in r.tables and "nope" not in r.tables
    df = r["training"]
    assert df is r.tables["training"]  # read once
    pd.testing.assert_frame_equal(df, io.read_table(root / "tables" / "training.parquet"))
    assert set(df["norm"]) == {"batchnorm", "noisy_batchnorm"} and set(df["seed"]) == {0, 1}
    prov = r.provenance("training")
    assert prov == io.read_provenance(root / "tables" / "training.parquet")
    assert prov["inputs"] == 4 and len(prov["input_config_hashes"]) == 4


def test_runs_lists_every_run(root):
    runs = results.load(root).runs()
    assert list(runs.columns) == ["experiment", "norm", "seed", "path"]
    assert runs[["experiment", "norm", "seed"]].values.tolist() == [
        ["tiny", n, s] for n in GRID["tiny"]["norms"] for s in GRID["tiny"]["seeds"]]
    assert runs["seed"].dtype.kind == "i"
    assert all(p.endswith("checkpoints.pt") for p in runs["path"])


@pytest.mark.parametrize("step", [0, 4, 8, 12])
def test_model_has_the_stored_weights_and_restores_predictions(root, step):
    r = results.load(root)
    ck = r.checkpoint("tiny", "batchnorm", 1, step=step)
    run = checkpoints.load(layout.run_file(root, "tiny", "batchnorm", 1, "checkpoints.pt"))
    assert ck.steps == [0, 4, 8, 12] and ck.step == step and ck.spec == run["spec"]
    stored = run["checkpoints"][ck.steps.index(step)]
    state = ck.model.state_dict()
    assert state.keys() == stored["model"].keys()
    for k, v in stored["model"].items():
        assert torch.equal(state[k], v), k
    assert torch.equal(ck.batch, stored["batch"])
    assert not ck.model.training  # eval mode by default
    ds = data.load(root / "data" / "star2d.npz")
    np_equal = [(getattr(ck.dataset, k) == getattr(ds, k)).all()
                for k in ("x_train", "y_train", "x_test", "y_test")]
    assert all(np_equal) and ck.dataset.meta == ds.meta
    ref = checkpoints.restore(run, ck.steps.index(step), ds).model
    x = torch.as_tensor(ds.x_test)
    with torch.no_grad():
        assert torch.equal(ck.model(x), ref.eval()(x))
        trained = r.model("tiny", "batchnorm", 1, step=step, train=True)
        assert trained.training and torch.equal(trained(x), ref.train()(x))


def test_last_checkpoint_reproduces_the_history_table(root):
    r = results.load(root)
    ck = r.checkpoint("tiny", "batchnorm", 0)
    assert ck.step == 12
    h = r["training"]
    row = h[(h.norm == "batchnorm") & (h.seed == 0) & (h.step == 12) & (h.split == "test")]
    loss, acc = training.evaluate(ck.model, torch.as_tensor(ck.dataset.x_test),
                                  torch.as_tensor(ck.dataset.y_test), ck.dataset.task)
    assert (loss, acc) == (row["loss"].item(), row["accuracy"].item())


def test_stochastic_model_draws_the_noise_of_its_step(root):
    r = results.load(root)
    run = r.run("tiny", "noisy_batchnorm", 0)
    ds = r.dataset("star2d")
    x = torch.as_tensor(ds.x_test)
    for i, step in enumerate(checkpoints.steps(run)):
        model = r.model("tiny", "noisy_batchnorm", 0, step=step, train=True)
        ref = checkpoints.restore(run, i, ds).model
        with torch.no_grad():
            out = model(x)
            assert torch.equal(out, model(x))  # the same noise in every pass
            assert torch.equal(out, ref(x))


def test_errors_name_what_exists(root, tmp_path):
    r = results.load(root)
    with pytest.raises(ValueError, match=r"no checkpoint at step 5; checkpointed steps: "
                                         r"\[0, 4, 8, 12\]"):
        r.model("tiny", "batchnorm", 0, step=5)
    with pytest.raises(ValueError, match="step True"):
        r.model("tiny", "batchnorm", 0, step=True)
    with pytest.raises(KeyError) as e:
        r["nope"]
    assert str(e.value) == (f"no table 'nope' in {root / 'tables'}; tables there: training")
    with pytest.raises(KeyError, match=r"seeds of tiny/batchnorm: \[0, 1\]"):
        r.model("tiny", "batchnorm", 7)
    with pytest.raises(KeyError, match=r"norms of tiny: \['batchnorm', 'noisy_batchnorm'\]"):
        r.model("tiny", "layernorm", 0)
    with pytest.raises(KeyError, match=r"experiments: \['tiny'\]"):
        r.model("star", "batchnorm", 0)
    with pytest.raises(KeyError, match="datasets there: star2d"):
        r.dataset("digits")
    with pytest.raises(KeyError, match="tables there"):
        r.provenance("../tables/training")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        results.load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="results directories inside it: results"):
        results.load(root.parent)


def test_corrupt_table_is_named(root, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(root / "tables", copy / "tables")
    path = copy / "tables" / "training.parquet"
    df = io.read_table(path)
    df.loc[0, "loss"] += 1.0  # altered data, the stored checksum kept
    meta, footer = pq.read_schema(path).metadata, pq.read_metadata(path).metadata
    with pq.ParquetWriter(path, pa.Table.from_pandas(df, preserve_index=False).schema
                          .with_metadata(meta)) as writer:
        writer.write_table(pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(
            meta))
        writer.add_key_value_metadata({io.CHECKSUM_KEY: footer[io.CHECKSUM_KEY]})
    with pytest.raises(io.CorruptFile, match="training.parquet is corrupt"):
        results.load(copy)["training"]


def test_loading_a_file_says_it_is_a_file_and_names_its_results_directory(root):
    table = root / "tables" / "training.parquet"
    with pytest.raises(NotADirectoryError) as e:
        results.load(table)
    msg = str(e.value)
    assert "is a file, not a results directory" in msg and "does not exist" not in msg
    assert f"its results directory is {str(root)!r}" in msg


def test_provenance_of_a_truncated_table_names_the_file(root, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(root / "tables", copy / "tables")
    path = copy / "tables" / "training.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(io.CorruptFile, match=r"training\.parquet is corrupt or truncated"):
        results.load(copy).provenance("training")


def test_provenance_records_versions_precision_checkout_and_time(tmp_path):
    """Issue 23: a table says which Snakemake and seaborn, which precision, whether the
    checkout had uncommitted changes, when it was written, and the resolved config."""
    from datetime import datetime

    path = tmp_path / "t.parquet"
    io.write_table(pd.DataFrame({"x": [1.0]}), path,
                   io.provenance("h", "cpu", config={"lr": 0.1}))
    prov = io.read_provenance(path)
    for key in ("snakemake_version", "seaborn_version", "deterministic_algorithms", "tf32",
                "git_commit", "git_dirty", "created"):
        assert key in prov, key
    assert prov["seaborn_version"] and prov["snakemake_version"]
    assert prov["tf32"] is False and prov["config"] == {"lr": 0.1}
    assert datetime.fromisoformat(prov["created"]).tzinfo is not None
    assert prov["git_dirty"] in (True, False, None)


def test_tables_record_the_cpu_and_kernels_and_an_aggregate_lists_its_inputs(tmp_path):
    """A table says which CPU and which kernel branches computed it (where torch is imported:
    MKL grants its AVX2 branch on Intel CPUs only, docs/reproducibility.md); an aggregated
    table lists its inputs' values, one per machine."""
    from bnstudy import provenance  # (torch is imported: the module's import)
    from bnstudy.tables import aggregation

    prov = io.provenance("h", "cpu")
    assert prov["cpu"] == provenance.cpu_model() and prov["kernels"] == provenance.kernels()
    assert prov["kernels"].startswith("ATen ")
    parts = []
    for i, (cpu, kern) in enumerate([("A", "ATen AVX2, MKL AVX2,STRICT"),
                                     ("B", "ATen AVX2, MKL AUTO,STRICT (asked AVX2,STRICT)"),
                                     ("A", "ATen AVX2, MKL AVX2,STRICT")]):
        parts.append(tmp_path / f"part{i}.parquet")
        io.write_table(pd.DataFrame({"x": [float(i)]}), parts[-1],
                       {**prov, "cpu": cpu, "kernels": kern})
    _, merged = aggregation.combine(parts, "t")
    assert merged["cpu"] == "A; B"
    assert merged["kernels"] == ("ATen AVX2, MKL AUTO,STRICT (asked AVX2,STRICT); "
                                 "ATen AVX2, MKL AVX2,STRICT")
    _, one = aggregation.combine(parts[::2], "t")
    assert one["cpu"] == "A" and one["kernels"] == "ATen AVX2, MKL AVX2,STRICT"
